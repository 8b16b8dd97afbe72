// Package probe implements kvq probe: the ability suites of kvq's probe
// model (passkey, multi-key, copying, JSON, refusals, perplexity) scored per
// KV-cache format.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/progressbar"
	"github.com/kvqlabs/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/spf13/cobra"
)

// NewCmd returns the probe command group.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Train kvq's probe model; score KV-cache formats on its abilities (passkey, copy, JSON, refusals)",
		Long: `The probe suites measure abilities that depend on remembering long context
exactly — what low-bit KV caches break first while perplexity barely moves:
passkey retrieval at several context lengths and depths, multi-key lookup,
copying, JSON records from prose, and a refusal policy stated far back in the
prompt. Examples come from the held-out eval split of kvq's own generators.`,
	}
	cmd.AddCommand(newEvalCmd(f, nil), newTrainCmd(f, nil))
	return cmd
}

// EvalOptions are the flags of kvq probe eval.
type EvalOptions struct {
	IO       *cmdutil.IOStreams
	Model    string
	Cache    string
	N        int
	Seed     uint64
	Contexts string
	Threads  int
	Output   string
	// LogSamples is a JSON Lines file for every example's prompt, target
	// and output per cache ("" for none).
	LogSamples string
	Tasks      string

	specs    []quant.Spec
	tasks    []string
	contexts []int
	format   render.Format
}

func newEvalCmd(f *cmdutil.Factory, runF func(context.Context, *EvalOptions) error) *cobra.Command {
	o := &EvalOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "eval --model PATH",
		Short: "Score cache formats on the probe abilities",
		Example: `  kvq probe eval --model ./kvq-probe --cache fp16,fp8,int8,int4,int2
  kvq probe eval --model ./kvq-probe -n 100 --contexts 1024,2048 --output json
  kvq probe eval --cache fp16,int4 --log-samples samples.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Model, "model", "m", "", "model: a Hugging Face directory, a .gguf file, or a llama2.c .bin (default: the built-in kvq-probe model)")
	fl.StringVar(&o.Cache, "cache", "fp16,fp8,int8,int4,int2", "cache specs to score; the first is the baseline")
	fl.IntVarP(&o.N, "n", "n", 40, "examples per ability")
	fl.Uint64Var(&o.Seed, "seed", 1, "selects the eval examples")
	fl.StringVar(&o.Contexts, "contexts", "1024,2048", "passkey filler lengths in tokens")
	fl.IntVar(&o.Threads, "threads", 0, "examples evaluated in parallel (0: all CPUs)")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	fl.StringVar(&o.Tasks, "tasks", "", "only these tasks, comma-separated: "+strings.Join(datasets.Tasks(), ", ")+" (default: all)")
	fl.StringVar(&o.LogSamples, "log-samples", "", "write every example's prompt, target and output per cache to this JSON Lines file")
	return cmd
}

// Validate checks flags.
func (o *EvalOptions) Validate() error {
	if o.N <= 0 {
		return cmdutil.FlagErrorf("-n %d: must be positive", o.N)
	}
	if o.Threads < 0 {
		return cmdutil.FlagErrorf("--threads %d: must be ≥ 0", o.Threads)
	}
	specs, err := quant.Formats().ParseList(o.Cache)
	if err != nil {
		return cmdutil.FlagErrorf("--cache: %w", err)
	}
	o.specs = specs
	o.contexts = nil
	for _, c := range strings.Split(o.Contexts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n <= 0 {
			return cmdutil.FlagErrorf("--contexts: %q is not a positive token count", c)
		}
		o.contexts = append(o.contexts, n)
	}
	o.tasks = nil
	if o.Tasks != "" {
		for _, t := range strings.Split(o.Tasks, ",") {
			t = strings.TrimSpace(t)
			if err := datasets.CheckTask(t); err != nil {
				return cmdutil.FlagErrorf("--tasks: %w", err)
			}
			o.tasks = append(o.tasks, t)
		}
	}
	if o.LogSamples != "" {
		// Checked before the run, not after it.
		if st, err := os.Stat(filepath.Dir(o.LogSamples)); err != nil || !st.IsDir() {
			return cmdutil.FlagErrorf("--log-samples %s: directory %s does not exist", o.LogSamples, filepath.Dir(o.LogSamples))
		}
	}
	ft, err := render.ParseFormat(o.Output)
	if err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	o.format = ft
	return nil
}

// Run evaluates and prints the ability × format table.
func (o *EvalOptions) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, "", o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	bar := progressbar.New(o.IO.ErrOut, o.IO.ErrTTY, 1, "probe eval")
	res, err := eval.RunProbe(ctx, m, eval.ProbeOptions{N: o.N, Seed: o.Seed, PasskeyContexts: o.contexts, Specs: o.specs, Workers: o.Threads, Progress: bar.Set, LogSamples: o.LogSamples != "", Tasks: o.tasks})
	bar.Finish()
	if errors.Is(err, eval.ErrOptions) {
		return cmdutil.UsageError(err)
	}
	if err != nil {
		return err
	}
	name := m.Path
	if o.Model == "" {
		name = "the built-in kvq-probe model"
	}
	if err := render.Write(o.IO.Out, o.format, Report(res, name, o.N), render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if o.LogSamples != "" {
		return writeSamples(o.LogSamples, res.Samples)
	}
	return nil
}

// writeSamples writes one JSON object per line, atomically.
func writeSamples(path string, samples []eval.Sample) error {
	err := atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for i := range samples {
			if err := enc.Encode(&samples[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--log-samples %s: %w", path, err)
	}
	return nil
}

// Report renders a probe result: one row per ability, one column per format
// with its difference from the baseline (the first format).
func Report(res *eval.ProbeResult, model string, n int) render.Report {
	t := render.Table{
		Title:  fmt.Sprintf("Probe abilities of %s (%d examples each; %% exact, perplexity on stories)", model, n),
		Header: append([]string{"ability"}, res.Specs...),
		Align:  []render.Align{render.Left},
		Notes: []string{"in brackets: the difference from the first (baseline) format",
			"±: the baseline's standard error, sqrt(p(1-p)/(n-1)); formats are scored on the same examples, so their differences vary less"},
	}
	for range res.Specs {
		t.Align = append(t.Align, render.Right)
	}
	for _, a := range res.Abilities {
		row := []string{a.Name}
		for i, v := range a.Values {
			cell := strconv.FormatFloat(v, 'f', 1, 64)
			if a.Unit == "ppl" {
				cell = strconv.FormatFloat(v, 'f', 3, 64)
			} else if i == 0 && len(a.Stderr) > 0 {
				cell += fmt.Sprintf(" ±%.1f", a.Stderr[0])
			}
			if i > 0 {
				d := v - a.Values[0]
				if a.Unit == "ppl" {
					cell += fmt.Sprintf(" (%+.3f)", d)
				} else {
					cell += fmt.Sprintf(" (%+.1f)", d)
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return render.Report{Tables: []render.Table{t}, Value: res}
}
