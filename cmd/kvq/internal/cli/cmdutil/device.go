package cmdutil

import (
	"context"
	"fmt"
	"io"

	"github.com/kvqlabs/kvq/pkg/gpu"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/spf13/pflag"
)

// DeviceUsage is the --device flag's help.
const DeviceUsage = "where the model runs: auto (the GPU when this kvq has CUDA and a GPU is present, else the CPU), cpu, or cuda"

// AddDeviceFlag registers --device on fl, default auto.
func AddDeviceFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "device", "auto", DeviceUsage)
}

// CheckDevice validates a --device value before any work.
func CheckDevice(name string) error {
	switch name {
	case "auto", "cpu":
		return nil
	case "cuda":
		if !gpu.Available {
			return FlagErrorf("--device cuda: this kvq was built without CUDA; on a GPU host use bin/kvq-cuda (make build-cuda)")
		}
		return nil
	}
	return FlagErrorf("--device %q: want auto, cpu or cuda", name)
}

// OpenDevice returns the backend --device names: nil for the CPU (the
// runtime's default backend), or the opened GPU. With auto, a GPU build
// that cannot open its device says so in one line on errOut and runs on
// the CPU; with cuda that is an error.
func OpenDevice(ctx context.Context, name string, errOut io.Writer) (backend.Backend, error) {
	if err := CheckDevice(name); err != nil {
		return nil, err
	}
	if name == "cpu" || !gpu.Available {
		return nil, nil
	}
	be, err := gpu.Open(ctx, gpu.Options{})
	if err != nil {
		if name == "cuda" {
			return nil, UsageError(fmt.Errorf("--device cuda: %w", err))
		}
		fmt.Fprintf(errOut, "kvq: no usable GPU (%v); running on the CPU\n", err)
		return nil, nil
	}
	return be, nil
}
