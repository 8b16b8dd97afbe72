// Package version implements kvq version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/spf13/cobra"
)

// Line is what kvq version and kvq --version print: the version, the
// commit it was built from, the Go release, the platform, the kernel set
// and the backends of reg this build can open ("backends cpu+cuda").
func Line(v string, reg *backend.Registry) string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	var avail []string
	for _, r := range reg.All() {
		if r.Unavailable == nil {
			avail = append(avail, r.Name)
		}
	}
	return fmt.Sprintf("kvq %s%s (%s, %s/%s, %s kernels, backends %s)", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, simd.Kernels(), strings.Join(avail, "+"))
}

// Backends describes every backend of reg, in order: "NAME (available):
// DESCRIPTION", followed by the devices it finds, indented, or why it
// finds none; or "NAME (unavailable): WHY".
func Backends(reg *backend.Registry) []string {
	var out []string
	for _, r := range reg.All() {
		if r.Unavailable != nil {
			out = append(out, fmt.Sprintf("%s (unavailable): %v", r.Name, r.Unavailable))
			continue
		}
		out = append(out, fmt.Sprintf("%s (available): %s", r.Name, r.Description))
		if r.Probe == nil {
			continue
		}
		devs, err := r.Probe()
		switch {
		case err != nil:
			out = append(out, "  "+err.Error())
		case len(devs) == 0:
			out = append(out, "  no device found")
		}
		for _, d := range devs {
			out = append(out, "  "+d)
		}
	}
	return out
}

// NewCmd returns the version command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvq's version, build details and backends (the first line is kvq --version's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := f.BackendRegistry()
			if _, err := fmt.Fprintln(f.IO.Out, Line(f.Version, reg)); err != nil {
				return err
			}
			for _, l := range Backends(reg) {
				if _, err := fmt.Fprintln(f.IO.Out, l); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
