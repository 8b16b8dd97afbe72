package calibrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/spf13/cobra"
)

// AuditOptions are kvq calibrate audit's flags.
type AuditOptions struct {
	// Wide keeps table output at full width (--wide).
	Wide bool
	IO   *cmdutil.IOStreams
	DataFlags
	Scales    string
	DType     string
	NoMeasure bool
	Texts     []string
	Ctx       int
	Chunks    int
	Output    string

	kind   quant.FP8Kind
	format render.Format
}

func newAuditCmd(f *cmdutil.Factory, runF func(context.Context, *AuditOptions) error) *cobra.Command {
	o := &AuditOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the KV scales a checkpoint ships (missing, zero, 1.0, clipping) and their effect",
		Long: `kvq calibrate audit reads the fp8 KV scales the checkpoint in --model ships,
in every spelling vLLM loads (llm-compressor's self_attn.k_scale/v_scale per
tensor or per head, the remapped self_attn.attn.k_scale, ModelOpt's
k_proj.k_scale, fused qkv_proj.k_scale, Quark's k_proj.output_scale, the
deprecated kv_scale, 0-d scalars), with config.json's kv_cache_scheme and
hf_quant_config.json — or the scales file given with --scales (kvq's JSON,
the legacy --quantization-param-path JSON, or safetensors) — and reports:

  error    missing layers, zero, negative (−1 placeholders), NaN/Inf, every
           scale 1.0, scales vLLM ignores (no quantization_config, a file the
           index does not list), a scheme that does not match the tensors,
           scales that clip more than 0.1% of the calibration data
  warning  a layer at exactly 1.0, K identical to V everywhere, a layer 10×
           off the others, scales that clip a little, scales so large that
           most values fall among fp8's subnormals
  info     a legacy kv_scale, no q_scale

It then measures the effect on held-out text: KL divergence against fp16
with the shipped scales (as vLLM would run them: missing layers at 1.0),
with freshly calibrated ones (dataset:minmax), and with 1.0 (--no-measure
skips running the model). On the built-in model the measurement takes about
10 s on 2 cores.

` + cmdutil.ExitCodesHelp("an error-level finding (so CI can run it)"),
		Example: `  kvq calibrate audit --scales kvq-calibration/kv_scales.safetensors  # after kvq calibrate
  kvq calibrate audit --model ./Llama-3.1-8B-FP8-KV                   # your own checkpoint
  kvq calibrate audit --model ./Llama-3.1-8B --scales kv_cache_scales.json   # your own files`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.run(cmd.Context())
		},
	}
	o.DataFlags.bind(cmd, f.BackendRegistry())
	fl := cmd.Flags()
	cmdutil.AddWideFlag(fl, &o.Wide)
	fl.StringVar(&o.Scales, "scales", "", "audit this scales file against --model instead of the checkpoint's own scales")
	fl.StringVar(&o.DType, "dtype", "e4m3", "fp8 encoding the scales are for: e4m3 or e5m2")
	fl.BoolVar(&o.NoMeasure, "no-measure", false, "only read and check the scales: no calibration data, no KLD")
	fl.StringArrayVar(&o.Texts, "text", nil, "held-out text file for the effect measurement (repeatable; default: built-in evaluation stories)")
	fl.IntVar(&o.Ctx, "ctx", 0, "chunk size of the effect measurement in tokens (default: the model's context, at most 2048)")
	fl.IntVar(&o.Chunks, "chunks", 0, "score at most this many chunks (0: all)")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	return cmd
}

func (o *AuditOptions) validate() error {
	if err := o.DataFlags.validate(); err != nil {
		return err
	}
	var err error
	if o.kind, err = parseKind(o.DType); err != nil {
		return err
	}
	if o.Scales != "" {
		if _, err := os.Stat(o.Scales); err != nil {
			return cmdutil.FlagErrorf("--scales %s: %w", o.Scales, err)
		}
	}
	for _, t := range o.Texts {
		if _, err := os.Stat(t); err != nil {
			return cmdutil.FlagErrorf("--text %s: %w", t, err)
		}
	}
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	return nil
}

func (o *AuditOptions) run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: o.Mmap}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	sh, err := o.shipped(m)
	if err != nil {
		return err
	}
	aopts := calibrate.AuditOptions{Kind: o.kind, Text: eval.TextOptions{Ctx: o.Ctx, MaxChunks: o.Chunks}, Workers: o.Threads}
	if !o.NoMeasure {
		seqLen := o.SeqLen
		if m.ContextLen > 0 {
			seqLen = min(seqLen, m.ContextLen)
		}
		if aopts.Data, err = calibrate.LoadData(ctx, m, calibrate.DataOptions{Paths: o.Data, Samples: o.Samples, SeqLen: seqLen, Seed: o.Seed}); err != nil {
			return cmdutil.UsageError(err)
		}
		warnShortData(o.IO.ErrOut, o.Data, aopts.Data, o.Samples, seqLen)
		if aopts.Backend, err = o.backend(ctx, o.IO); err != nil {
			return err
		}
		if aopts.Texts, _, err = heldOut(o.Texts, o.Seed); err != nil {
			return err
		}
	}
	bars := &cmdutil.StageBars{IO: o.IO}
	aopts.Progress = bars.Set
	a, err := calibrate.RunAudit(ctx, m, sh, aopts)
	bars.Finish()
	switch {
	case errors.Is(err, eval.ErrOptions):
		return cmdutil.UsageError(err)
	case err != nil:
		return err
	}
	if err := render.Write(o.IO.Out, o.format, o.IO.FitReport(auditView(a), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if a.Errors > 0 {
		for _, f := range a.Findings {
			if f.Level == calibrate.LevelError {
				fmt.Fprintf(o.IO.ErrOut, "kvq: audit error: %s\n", f.Message)
			}
		}
		return &cmdutil.GateError{Failed: a.Errors, What: "audit check(s)"}
	}
	return nil
}

// shipped reads the scales to audit: --scales, or the checkpoint's own.
func (o *AuditOptions) shipped(m *runtime.Model) (*calibrate.Shipped, error) {
	var sh *calibrate.Shipped
	var err error
	switch {
	case o.Scales != "":
		sh, err = calibrate.ReadScalesFile(o.Scales, m.Config.Layers, m.Config.KVHeads)
	case m.Format == "safetensors":
		sh, err = calibrate.ReadCheckpointScales(m.Path, m.Config.Layers, m.Config.KVHeads)
	default:
		return nil, cmdutil.FlagErrorf("%s is a %s model, which carries no fp8 KV scales; give the scales file with --scales", m.Path, m.Format)
	}
	if err != nil {
		return nil, cmdutil.UsageError(err)
	}
	if o.Model == "" && o.Scales == "" {
		sh.Source = "built-in kvq-probe"
	}
	return sh, nil
}
