//go:build cuda

package gpu

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Available reports whether this binary was built with the GPU backend.
const Available = true

// Open opens CUDA device opts.Device. The CUDA kernels are not written yet,
// so it reports ErrUnavailable naming what is missing.
func Open(ctx context.Context, opts Options) (tensor.Backend, error) {
	return nil, fmt.Errorf("%w: the CUDA kernels are not implemented yet (device %d)", ErrUnavailable, opts.Device)
}
