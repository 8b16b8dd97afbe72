// Package stub registers subcommands that are planned but not built yet: they
// explain that and exit non-zero, with no fake output.
package stub

import (
	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/spf13/cobra"
)

// NewCmd returns a placeholder command.
func NewCmd(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short + " (not implemented yet)",
		DisableFlagParsing: true,
		RunE:               cmdutil.NotImplemented(name),
	}
}
