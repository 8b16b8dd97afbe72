// Package probe implements kvq probe: the ability suites of kvq's probe
// model (passkey, multi-key, copying, JSON, refusals, perplexity) scored per
// KV-cache format.
package probe

import (
	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	evalcmd "github.com/kvqlabs/kvq/cmd/kvq/internal/cli/eval"
	"github.com/spf13/cobra"
)

// NewCmd returns the probe command group.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Score cache formats on the probe model's abilities (passkey, copy, JSON)",
		Long: `The probe suites measure abilities that depend on remembering long context
exactly — what low-bit KV caches break first while perplexity barely moves:
passkey retrieval at several context lengths and depths, multi-key lookup,
copying, JSON records from prose, and a refusal policy stated far back in the
prompt. Examples come from the held-out eval split of kvq's own generators.
kvq probe eval is kvq eval under its earlier name. The model is trained by
the maintainers' command go run ./cmd/kvq-train (make probe-model).`,
		Example: `  kvq probe eval --tasks passkey,copy -n 5 --contexts 512 --no-text --no-speed   # seconds
  kvq probe eval -n 100 --cache fp16,fp8,int8,int4,int2 --no-text --no-speed   # about 6 minutes`,
	}
	ev := evalcmd.NewCmd(f, nil)
	ev.Short = "Alias of kvq eval (the probe abilities are its default suites)"
	cmd.AddCommand(ev)
	return cmd
}
