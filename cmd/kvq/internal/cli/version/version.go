// Package version implements kvq version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gpu"
	"github.com/spf13/cobra"
)

// Line is what kvq version and kvq --version print: the version, the
// commit it was built from, the Go release, the platform and the kernel
// set.
func Line(v string) string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	backends := "cpu"
	if gpu.Available {
		backends += "+" + gpu.Kind
	}
	return fmt.Sprintf("kvq %s%s (%s, %s/%s, %s kernels, backends %s)", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, simd.Kernels(), backends)
}

// Devices describes the GPUs this binary can use, one line each: none in
// a build without CUDA ("gpu: none (built without CUDA)"), else the
// devices it finds or why it finds none.
func Devices() []string {
	if !gpu.Available {
		return []string{"gpu: none (this kvq was built without CUDA; make build-cuda builds bin/kvq-cuda)"}
	}
	ds, err := gpu.Probe()
	if err != nil {
		return []string{"gpu: " + err.Error()}
	}
	if len(ds) == 0 {
		return []string{"gpu: no device found"}
	}
	var out []string
	for _, d := range ds {
		drv := ""
		if d.Driver > 0 {
			drv = fmt.Sprintf(", CUDA driver %d.%d", d.Driver/1000, d.Driver%1000/10)
		}
		out = append(out, fmt.Sprintf("gpu %d: %s (compute %d.%d, %d SMs, %.1f GiB%s)", d.Ordinal, d.Name, d.Major, d.Minor, d.SMs, float64(d.TotalMemory)/(1<<30), drv))
	}
	return out
}

// NewCmd returns the version command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvq's version, build details and GPUs (the first line is kvq --version's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := fmt.Fprintln(f.IO.Out, Line(f.Version)); err != nil {
				return err
			}
			for _, l := range Devices() {
				if _, err := fmt.Fprintln(f.IO.Out, l); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
