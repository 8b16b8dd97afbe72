package cmdutil

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/spf13/pflag"
)

// Device is a command's --device flag: the backend's name, or auto, and
// the registry it is chosen from.
type Device struct {
	Name string
	reg  *backend.Registry
}

// AddDeviceFlag registers --device on fl, default auto, choosing among
// reg's backends.
func AddDeviceFlag(fl *pflag.FlagSet, d *Device, reg *backend.Registry) {
	d.reg = reg
	fl.StringVar(&d.Name, "device", "auto", DeviceUsage(reg))
}

// registry is the registry d chooses from (Backends() for a Device made
// without AddDeviceFlag).
func (d *Device) registry() *backend.Registry {
	if d.reg == nil {
		d.reg = Backends()
	}
	return d.reg
}

// DeviceUsage is the --device flag's help: auto and reg's names, "where
// the model runs: auto (cuda when this kvq has it and a device opens,
// else cpu), cpu, or cuda".
func DeviceUsage(reg *backend.Registry) string {
	var devices []string
	fallback := ""
	for _, r := range reg.All() {
		if r.Default {
			fallback = r.Name
		} else {
			devices = append(devices, r.Name)
		}
	}
	var auto string
	switch len(devices) {
	case 0:
		auto = fallback
	case 1:
		auto = devices[0] + " when this kvq has it and a device opens"
	default:
		auto = "the first of " + strings.Join(devices, ", ") + " that this kvq has and that opens"
	}
	if len(devices) > 0 && fallback != "" {
		auto += ", else " + fallback
	}
	choices := append([]string{"auto (" + auto + ")"}, reg.Names()...)
	if len(choices) > 2 {
		choices[len(choices)-1] = "or " + choices[len(choices)-1]
		return "where the model runs: " + strings.Join(choices, ", ")
	}
	return "where the model runs: " + strings.Join(choices, " or ")
}

// Check validates the --device value before any work: auto, or a
// registered backend that this build can open.
func (d *Device) Check() error {
	if d.Name == "auto" {
		return nil
	}
	reg := d.registry()
	r, err := reg.Lookup(d.Name)
	if err != nil {
		names := append([]string{"auto"}, reg.Names()...)
		last := len(names) - 1
		return FlagErrorf("--device %q: want %s or %s", d.Name, strings.Join(names[:last], ", "), names[last])
	}
	if r.Unavailable != nil {
		return FlagErrorf("--device %s: %v", d.Name, r.Unavailable)
	}
	return nil
}

// Open returns the backend --device names: nil for the registry's default
// (the CPU, which the runtime makes per runner), or the opened backend.
// With auto it tries every available backend but the default, in the
// registry's order, and falls back to the default, saying in one line on
// errOut why each it tried did not open; with a name, a backend that does
// not open is an error.
func (d *Device) Open(ctx context.Context, errOut io.Writer) (backend.Backend, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	reg := d.registry()
	if d.Name != "auto" {
		r, _ := reg.Lookup(d.Name) // Check found it
		if r.Default {
			return nil, nil
		}
		be, err := reg.Open(ctx, d.Name, backend.OpenOptions{})
		if err != nil {
			return nil, UsageError(fmt.Errorf("--device %s: %w", d.Name, err))
		}
		return be, nil
	}
	var failed []string
	report := func(chosen string) {
		for _, f := range failed {
			fmt.Fprintf(errOut, "kvq: --device auto: %s; running on %s\n", f, chosen)
		}
	}
	for _, r := range reg.All() {
		if r.Default || r.Unavailable != nil {
			continue
		}
		be, err := r.Open(ctx, backend.OpenOptions{})
		if err == nil {
			report(r.Name)
			return be, nil
		}
		failed = append(failed, fmt.Sprintf("%s did not open (%v)", r.Name, err))
	}
	def, ok := reg.Default()
	if !ok {
		return nil, fmt.Errorf("--device auto: no backend opened: %s", strings.Join(failed, "; "))
	}
	report(def.Name)
	return nil, nil
}
