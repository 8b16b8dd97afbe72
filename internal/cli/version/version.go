// Package version implements kvq version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/simd"
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
	return fmt.Sprintf("kvq %s%s (%s, %s/%s, %s kernels)", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, simd.Kernels())
}

// NewCmd returns the version command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvq's version and build details (the same line as kvq --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(f.IO.Out, Line(f.Version))
			return err
		},
	}
}
