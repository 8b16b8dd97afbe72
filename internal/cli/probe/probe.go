// Package probe implements kvq probe: the ability suites of kvq's probe
// model (passkey, multi-key, copying, JSON, refusals, perplexity) scored per
// KV-cache format.
package probe

import (
	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	evalcmd "github.com/kvqlabs/kvq/internal/cli/eval"
	"github.com/spf13/cobra"
)

// NewCmd returns the probe command group.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Train kvq's probe model; score cache formats on its abilities (passkey, copy, JSON)",
		Long: `The probe suites measure abilities that depend on remembering long context
exactly — what low-bit KV caches break first while perplexity barely moves:
passkey retrieval at several context lengths and depths, multi-key lookup,
copying, JSON records from prose, and a refusal policy stated far back in the
prompt. Examples come from the held-out eval split of kvq's own generators.
kvq probe eval is kvq eval under its earlier name.`,
		Example: `  kvq probe eval --tasks passkey,copy -n 5 --contexts 512 --no-text --no-speed   # seconds
  kvq probe eval -n 100 --cache fp16,fp8,int8,int4,int2 --no-text --no-speed   # about 6 minutes
  kvq probe train --dir probe-smoke --smoke                         # a tiny training run, seconds`,
	}
	ev := evalcmd.NewCmd(f, nil)
	ev.Short = "Alias of kvq eval (the probe abilities are its default suites)"
	cmd.AddCommand(ev, newTrainCmd(f, nil))
	return cmd
}
