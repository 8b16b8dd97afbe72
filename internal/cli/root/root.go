// Package root assembles kvq's command tree.
package root

import (
	benchcmd "github.com/kvqlabs/kvq/internal/cli/bench"
	calibratecmd "github.com/kvqlabs/kvq/internal/cli/calibrate"
	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/cli/estimate"
	evalcmd "github.com/kvqlabs/kvq/internal/cli/eval"
	"github.com/kvqlabs/kvq/internal/cli/formats"
	"github.com/kvqlabs/kvq/internal/cli/generate"
	"github.com/kvqlabs/kvq/internal/cli/inspect"
	plancmd "github.com/kvqlabs/kvq/internal/cli/plan"
	"github.com/kvqlabs/kvq/internal/cli/probe"
	servecmd "github.com/kvqlabs/kvq/internal/cli/serve"
	"github.com/kvqlabs/kvq/internal/cli/version"
	"github.com/spf13/cobra"
)

// NewCmd returns the kvq root command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kvq",
		Short: "Measure what a low-precision KV cache saves and costs, on your own model",
		Long: `kvq answers, before you switch an LLM service to an FP8, INT8, INT4 or 2-bit
KV cache: how much memory does it save, what quality does it lose, and is it
faster. It runs the model itself (Hugging Face, GGUF and llama2.c checkpoints) with several
caches side by side.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       f.Version,
	}
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cmdutil.FlagError{Err: err}
	})
	cmd.AddCommand(
		generate.NewCmd(f, nil),
		formats.NewCmd(f, nil),
		inspect.NewCmd(f, nil),
		probe.NewCmd(f),
		estimate.NewCmd(f, nil),
		calibratecmd.NewCmd(f, nil),
		evalcmd.NewCmd(f, nil),
		plancmd.NewCmd(f, nil),
		benchcmd.NewCmd(f, nil),
		servecmd.NewCmd(f, nil),
		version.NewCmd(f),
	)
	return cmd
}
