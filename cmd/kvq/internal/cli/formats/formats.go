// Package formats implements kvq formats.
package formats

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/spf13/cobra"
)

// Options are the flags of kvq formats.
type Options struct {
	IO      *cmdutil.IOStreams
	HeadDim int
	Output  string
	Wide    bool
	format  render.Format
}

// NewCmd returns the formats command.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "formats",
		Short: "List the KV-cache formats with their cost per token",
		Long: `List every KV-cache format kvq implements, with effective bits per value and
bytes per token per KV head (data plus scales, zero points, outlier slots and
norms) at the given head size, K and V separately where they differ, the fp16
window the format keeps, and what it needs.

Any listed name can be used in a cache spec (--cache): a format, optionally
with options after colons (int4:g32:channel), or K and V separately
(k=int8,v=int4), with modifiers residual=N (recent tokens in fp16), sink=N
(first tokens in fp16), L<i>=FORMAT (layer overrides, L-1 = last layer) and
sliding=FORMAT (the model's sliding-window layers, such as Gemma's local
ones: int4,sliding=fp16 keeps them unquantized, as vLLM's
--kv-cache-dtype-skip-layers sliding_window does; overrides apply in the
order given, so int4,sliding=fp16,L0=int8 puts layer 0 in int8).
A per-token group larger than the head size is cut to it: int4:g32 on a
head size of 8 stores one group of 8 values per token, as int4:g8 does (the
table at --head-dim shows the bytes it costs). A key given twice in one
spec (k=int4,k=int8 to kvq generate) is an error.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq formats
  kvq formats --wide                 # one line per format, every column
  kvq formats --head-dim 64 --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.HeadDim <= 0 || o.HeadDim > quant.MaxHeadDim {
				return cmdutil.FlagErrorf("--head-dim %d: must be 1 to %d (the largest head size the formats serve)", o.HeadDim, quant.MaxHeadDim)
			}
			ft, err := render.ParseFormat(o.Output)
			if err != nil {
				return cmdutil.FlagErrorf("--output: %w", err)
			}
			o.format = ft
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&o.HeadDim, "head-dim", 128, "head size to compute costs for")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	cmdutil.AddWideFlag(cmd.Flags(), &o.Wide)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return render.Formats(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// Run prints the table.
func (o *Options) Run(ctx context.Context) error {
	// Describing the rotated formats at a large head size that is not a
	// power of two takes seconds (quant.MaxHeadDim): Ctrl-C is not kept
	// waiting for it.
	done := make(chan []quant.Info, 1)
	go func() { done <- quant.Formats().Describe(o.HeadDim) }()
	var infos []quant.Info
	select {
	case infos = <-done:
	case <-ctx.Done():
		return fmt.Errorf("formats: describing the formats at head size %d: %w", o.HeadDim, ctx.Err())
	}
	t := render.Table{
		Title:  fmt.Sprintf("KV-cache formats at head_dim %d (bytes per token per KV head; fp16 = %d)", o.HeadDim, 2*o.HeadDim),
		Header: []string{"format", "bits/value", "K bytes", "V bytes", "fp16 window", "needs", "what"},
		Align:  []render.Align{render.Left, render.Right, render.Right, render.Right, render.Right, render.Left, render.Left},
		Notes: []string{
			"bits/value and bytes include scales, zero points, outlier slots and norms; fp16 windows (recent or not-yet-grouped tokens) are a per-sequence constant shown in tokens.",
		},
	}
	for _, in := range infos {
		if in.Error != "" {
			t.Rows = append(t.Rows, []string{in.Name, "-", "-", "-", "-", "-", "not available: " + in.Error})
			continue
		}
		win := "-"
		if in.WindowTokens > 0 {
			win = strconv.Itoa(in.WindowTokens)
		}
		needs := strings.Join(in.Needs, "; ")
		if needs == "" {
			needs = "-"
		}
		t.Rows = append(t.Rows, []string{in.Name, fmtNum(in.Bits), fmtNum(in.KBytes), fmtNum(in.VBytes), win, needs, in.Summary})
	}
	opts := render.Options{TTY: o.IO.OutTTY}
	if o.format == render.FormatTable && !o.Wide {
		// Fit the terminal: what the format needs goes into its description,
		// which wraps.
		for _, r := range t.Rows {
			if r[5] != "-" {
				r[6] += "; needs " + r[5]
			}
		}
		t = render.Fit(render.Drop(t, "needs"), o.IO.Columns(), 5, 20, opts)
	}
	return render.Write(o.IO.Out, o.format, render.Report{Tables: []render.Table{t}, Value: infos}, opts)
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
