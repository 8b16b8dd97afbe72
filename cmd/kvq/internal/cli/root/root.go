// Package root assembles kvq's command tree.
package root

import (
	"fmt"
	"strings"

	benchcmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/bench"
	calibratecmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/calibrate"
	canarycmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/canary"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/estimate"
	evalcmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/eval"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/formats"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/generate"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/inspect"
	plancmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/plan"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/probe"
	servecmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/serve"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/version"
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
		Example: `  kvq estimate --model llama-3.1-8b --gpu h100    # KV memory per format on one H100
  kvq formats                                     # every cache format and its cost
  kvq generate -m ../shared/models/stories260K/stories260K.gguf --prompt "Once upon a time" -n 64
  kvq eval --tasks copy,json -n 10 --no-text --no-speed   # fp16 against quantized caches, seconds
  kvq probe eval --help                           # the probe suites`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       f.Version,
	}
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cmdutil.FlagError{Err: err}
	})
	cmd.SetVersionTemplate(strings.ReplaceAll(version.Line(f.Version, f.BackendRegistry()), "{{", `{{"{{"}}`) + "\n")
	cmd.SetUsageTemplate(usageTemplate(f.IO.Columns()))
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
		canarycmd.NewCmd(f),
		version.NewCmd(f),
	)
	cmd.InitDefaultHelpCmd()
	helpTopics(cmd)
	cmd.InitDefaultCompletionCmd()
	groups(cmd)
	fit(cmd, f.IO.Columns())
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

// helpTopics makes kvq help refuse an unknown topic with exit code 2 and
// the nearest command names (cobra's help prints the usage and exits 0).
func helpTopics(root *cobra.Command) {
	for _, h := range root.Commands() {
		if h.Name() != "help" {
			continue
		}
		h.Run = nil
		h.RunE = func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if target == nil || err != nil || len(rest) > 0 {
				last := args[len(args)-1]
				if len(rest) > 0 {
					last = rest[0]
				}
				msg := fmt.Sprintf("unknown help topic %q", strings.Join(args, " "))
				parent := root
				if target != nil {
					parent = target
				}
				if s := parent.SuggestionsFor(last); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return &cmdutil.FlagError{Err: fmt.Errorf("%s", msg)}
			}
			target.InitDefaultHelpFlag()
			target.InitDefaultVersionFlag()
			return target.Help()
		}
	}
}

// oneLine puts cobra's suggestions ("\n\nDid you mean this?\n\teval\n") on
// the error's line, as kvq's own unknown-command errors have them.
func oneLine(msg string) string {
	const did = "\n\nDid you mean this?\n"
	i := strings.Index(msg, did)
	if i < 0 {
		return strings.TrimRight(msg, "\n")
	}
	return msg[:i] + "; did you mean " + strings.Join(strings.Fields(msg[i+len(did):]), " or ") + "?"
}

// fit wraps every command's long help to width columns (lines that fit are
// kept as written).
func fit(c *cobra.Command, width int) {
	c.Long = cmdutil.WrapHanging(c.Long, width)
	for _, s := range c.Commands() {
		fit(s, width)
	}
}

// usageTemplate is cobra's usage template with the flag help wrapped to
// width columns.
func usageTemplate(width int) string {
	return fmt.Sprintf(`Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsagesWrapped %[1]d | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsagesWrapped %[1]d | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`, width)
}
