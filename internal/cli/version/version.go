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

// NewCmd returns the version command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvq's version and build details",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := f.Version
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						rev = " " + s.Value[:12]
					}
				}
			}
			fmt.Fprintf(f.IO.Out, "kvq %s%s (%s, %s/%s, %s kernels)\n", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, simd.Kernels())
			return nil
		},
	}
}
