//go:build cuda || cudaemu

package gpu

import (
	"context"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Available reports whether this binary was built with the GPU backend.
const Available = true

// Open opens device opts.Device and returns its backend (a *Backend).
func Open(ctx context.Context, opts Options) (backend.Backend, error) {
	d, err := openDriver(opts)
	if err != nil {
		return nil, err
	}
	b, err := newBackend(d)
	if err != nil {
		d.close()
		return nil, err
	}
	return b, nil
}

// Probe lists the devices this build can use.
func Probe() ([]DeviceInfo, error) { return probeDevices() }
