//go:build !cuda

package gpu

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Available reports whether this binary was built with the GPU backend.
const Available = false

// Open returns ErrUnavailable: this binary was built without the cuda tag.
func Open(ctx context.Context, opts Options) (tensor.Backend, error) {
	return nil, fmt.Errorf("%w: kvq was built without CUDA support (rebuild with -tags cuda on a machine with the CUDA toolkit)", ErrUnavailable)
}
