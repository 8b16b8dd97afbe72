//go:build !cuda && !cudaemu

package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Available reports whether this binary was built with the GPU backend.
const Available = false

// Kind names the GPU backend compiled in ("" when none).
const Kind = ""

// whyNot is why this build has no GPU backend: the Registration's
// Unavailable, in the words kvq's --device cuda prints.
var whyNot = errors.New("this kvq was built without CUDA; on a GPU host use bin/kvq-cuda (make build-cuda)")

// errNoCUDA is what Open and Probe return in this build.
var errNoCUDA = fmt.Errorf("%w: %w", ErrUnavailable, whyNot)

// Registration describes the GPU backend to a backend.Registry: in this
// build, unavailable, with the reason.
func Registration() backend.Registration {
	r := registration()
	r.Description = "NVIDIA GPUs through CUDA (not in this build)"
	r.Unavailable = whyNot
	return r
}

// Open returns ErrUnavailable: this binary was built without the cuda tag.
func Open(ctx context.Context, opts Options) (backend.Backend, error) { return nil, errNoCUDA }

// Probe lists the devices a GPU build could use: none in this build.
func Probe() ([]DeviceInfo, error) { return nil, errNoCUDA }
