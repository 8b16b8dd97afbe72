// Package root assembles kvq's command tree.
package root

import (
	"fmt"
	"strings"

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
faster. It runs the model itself (Hugging Face, GGUF and llama2.c
checkpoints) with several caches side by side. Every command that takes
--model runs on the built-in kvq-probe model when it is omitted.

` + cmdutil.ExitCodesHelp("a check ran and failed (a kvq eval gate, a kvq calibrate audit error)"),
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
	cmd.InitDefaultHelpCmd()
	cmd.InitDefaultCompletionCmd()
	groups(cmd)
	return cmd
}

// groups makes every command with subcommands refuse an unknown one with
// exit code 2 (cobra otherwise prints a group's help and exits 0) and
// suggest the nearest names; a group run alone prints its help.
func groups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groups(sub)
	}
	if !c.HasSubCommands() || !c.HasParent() {
		return // the root: cobra itself refuses an unknown command there
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	run := c.RunE
	c.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &cmdutil.FlagError{Err: fmt.Errorf("%s", msg)}
	}
	if run == nil && c.Run == nil {
		c.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	}
}
