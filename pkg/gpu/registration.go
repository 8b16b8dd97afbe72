package gpu

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Name is the GPU backend's name in every build (the emulator's
// included): its Backend's Name, and its key in a backend.Registry (kvq's
// --device cuda).
const Name = "cuda"

// registration is what every build's Registration shares: the name,
// Open and Probe.
func registration() backend.Registration {
	return backend.Registration{
		Name: Name,
		Open: func(ctx context.Context, o backend.OpenOptions) (backend.Backend, error) {
			return Open(ctx, Options{Device: o.Device})
		},
		Probe: probeLines,
	}
}

// probeLines describes the devices Probe finds, one line each.
func probeLines() ([]string, error) {
	ds, err := Probe()
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = fmt.Sprintf("gpu %d: %s", d.Ordinal, d)
	}
	return lines, nil
}

// String describes the device in one line: "NVIDIA H100 80GB HBM3
// (compute 9.0, 132 SMs, 79.1 GiB, CUDA driver 13.0)".
func (d DeviceInfo) String() string {
	drv := ""
	if d.Driver > 0 {
		drv = fmt.Sprintf(", CUDA driver %d.%d", d.Driver/1000, d.Driver%1000/10)
	}
	return fmt.Sprintf("%s (compute %d.%d, %d SMs, %.1f GiB%s)", d.Name, d.Major, d.Minor, d.SMs, float64(d.TotalMemory)/(1<<30), drv)
}
