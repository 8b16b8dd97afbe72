//go:build !cuda && !cudaemu

package gpu

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Available reports whether this binary was built with the GPU backend.
const Available = false

// Kind names the GPU backend compiled in ("" when none).
const Kind = ""

// errNoCUDA is what Open and Probe return in this build.
var errNoCUDA = fmt.Errorf("%w: this kvq was built without CUDA (build bin/kvq-cuda with make build-cuda)", ErrUnavailable)

// Open returns ErrUnavailable: this binary was built without the cuda tag.
func Open(ctx context.Context, opts Options) (backend.Backend, error) { return nil, errNoCUDA }

// Probe lists the devices a GPU build could use: none in this build.
func Probe() ([]DeviceInfo, error) { return nil, errNoCUDA }
