// Package plan implements kvq plan over pkg/plan.
package plan

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/plan"
	"github.com/spf13/cobra"
)

// Options are kvq plan's flags.
type Options struct {
	// Wide keeps table output at full width (--wide).
	Wide          bool
	IO            *cmdutil.IOStreams
	Model         string
	Engine        string
	EngineVersion string
	GPU           string
	GPUMem        string
	KVBudget      string
	TP, PP        int
	MaxModelLen   int64
	Endpoint      string
	Scrape        time.Duration
	Interval      time.Duration
	APIKeyEnv     string
	Trace         string
	InputLen      int
	OutputLen     int
	From          string
	GatesOut      string
	Output        string

	format render.Format
	engine string
}

// NewCmd returns kvq plan.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "A KV-cache rollout as a checklist: KV-bound?, which cache, flags, checks, fallback",
		Long: `kvq plan turns a KV-cache rollout into a checklist a team can act on:

  1. Is the service KV-bound? With --endpoint it samples the serving engine's
     Prometheus /metrics for --scrape (vLLM, SGLang, kvq serve and llama-server
     names) and/or reads request lengths from --trace, and says whether the KV
     cache limits the service (high usage with requests waiting, preemptions,
     long inputs) or not (low usage, short requests: the benefit is diluted).
  2. Which cache to try: each format the engine offers, FP8 first, then INT8,
     then 4-bit, with its memory and capacity on the GPU (kvq estimate's
     accounting) and a compatibility table (GPU, attention backends, tensor
     and pipeline parallelism, prefix caching, sliding windows, speculative
     decoding), each fact with its source, unknowns said as unknown.
  3. The exact engine invocation of each candidate, and the kvq commands
     that check it: calibrate, audit, eval with generated gates (--gates-out),
     bench at the service's load; a canary and the one-switch fallback.

--from DIR reads earlier kvq calibrate, audit, eval and bench JSON outputs
(written with --output json into DIR) and marks the items they settle, so
the plan becomes the go/no-go record.

` + cmdutil.ExitCodesHelp("") + `
An endpoint that cannot be scraped is a runtime failure.`,
		Example: `  kvq plan                                      # the built-in model, no GPU: the checklist
  kvq plan --model llama-3.1-8b --gpu h100 --input-len 8000 --output-len 500 --gates-out g.yaml
  kvq plan --model ./Llama-3.1-8B --gpu h100 --endpoint http://vllm:8000 --scrape 10m   # your own
  kvq plan --model llama-3.1-8b --gpu a100 --engine sglang --trace requests.jsonl \
    --output markdown > rollout.md     # your own trace
  kvq plan --model llama-3.1-8b --gpu h100 --from results/ --gates-out kvq-gates.yaml   # your own`,
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
	cmdutil.AddWideFlag(fl, &o.Wide)
	cmdutil.AddModelRefFlag(fl, &o.Model)
	fl.StringVar(&o.Engine, "engine", "vllm", "serving engine: "+strings.Join(plan.Engines(), ", "))
	fl.StringVar(&o.EngineVersion, "engine-version", "", "vLLM version for the memory model (default: kvq estimate's)")
	fl.StringVar(&o.GPU, "gpu", "", "GPU preset (kvq estimate --list-gpus), e.g. h100, a100, l4")
	fl.StringVar(&o.GPUMem, "gpu-mem", "", "GPU memory as the engine sees it, e.g. 80GiB (instead of --gpu; no GPU facts)")
	fl.StringVar(&o.KVBudget, "kv-budget", "", "KV memory per rank, e.g. 40GiB (instead of the GPU memory model)")
	fl.IntVar(&o.TP, "tp", 1, "tensor-parallel size")
	fl.IntVar(&o.PP, "pp", 1, "pipeline-parallel size")
	fl.Int64Var(&o.MaxModelLen, "max-model-len", 0, "longest request (default: the model's maximum)")
	fl.StringVar(&o.Endpoint, "endpoint", "", "the running service's base URL (or its /metrics URL) to scrape")
	fl.DurationVar(&o.Scrape, "scrape", 30*time.Second, "how long to sample --endpoint's metrics")
	fl.DurationVar(&o.Interval, "interval", time.Second, "time between scrapes")
	fl.StringVar(&o.APIKeyEnv, "api-key-env", "KVQ_API_KEY", "environment variable holding the endpoint's API key (sent as a bearer token when set)")
	fl.StringVar(&o.Trace, "trace", "", "request lengths: JSON Lines with input/output token counts, kvq bench JSON, or vLLM bench --save-detailed JSON")
	fl.IntVar(&o.InputLen, "input-len", 0, "typical (P95) input tokens, when there is no trace or scrape")
	fl.IntVar(&o.OutputLen, "output-len", 0, "typical output tokens, with --input-len")
	fl.StringVar(&o.From, "from", "", "directory of earlier kvq calibrate/audit/eval/bench --output json results")
	fl.StringVar(&o.GatesOut, "gates-out", "", "write the plan's gates as a kvq eval --gates file")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	return cmd
}

// Validate checks the flags before any work.
func (o *Options) Validate() error {
	var err error
	if o.engine, err = plan.ParseEngine(o.Engine); err != nil {
		return cmdutil.FlagErrorf("--engine: %w", err)
	}
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	switch {
	case o.TP < 1 || o.PP < 1:
		return cmdutil.FlagErrorf("--tp %d, --pp %d: must be at least 1", o.TP, o.PP)
	case o.MaxModelLen < 0:
		return cmdutil.FlagErrorf("--max-model-len %d: must be ≥ 0", o.MaxModelLen)
	case o.InputLen < 0 || o.OutputLen < 0:
		return cmdutil.FlagErrorf("--input-len and --output-len must be ≥ 0")
	case o.OutputLen > 0 && o.InputLen == 0:
		return cmdutil.FlagErrorf("--output-len needs --input-len")
	case o.GPU != "" && o.GPUMem != "":
		return cmdutil.FlagErrorf("--gpu and --gpu-mem: give one or the other")
	case o.Scrape <= 0 || o.Interval <= 0 || o.Interval > o.Scrape:
		return cmdutil.FlagErrorf("--scrape %v, --interval %v: both positive, interval at most the scrape", o.Scrape, o.Interval)
	}
	if o.EngineVersion != "" && o.engine == plan.EngineVLLM {
		if _, err := estimate.CheckVLLMVersion(o.EngineVersion); err != nil {
			return cmdutil.FlagErrorf("--engine-version %s: %w", o.EngineVersion, err)
		}
	}
	if o.Trace != "" {
		if _, err := os.Stat(o.Trace); err != nil {
			return cmdutil.FlagErrorf("--trace %s: %w", o.Trace, err)
		}
	}
	if o.From != "" {
		if st, err := os.Stat(o.From); err != nil || !st.IsDir() {
			return cmdutil.FlagErrorf("--from %s: not a directory", o.From)
		}
	}
	return cmdutil.CheckOutputFile("--gates-out", o.GatesOut)
}

// Run builds and prints the plan.
func (o *Options) Run(ctx context.Context) error {
	ref, err := cmdutil.ResolveModel(strings.TrimSpace(o.Model), o.IO.ErrOut)
	if err != nil {
		return err
	}
	m, err := estimate.Load(ctx, ref)
	if err != nil {
		return cmdutil.UsageError(fmt.Errorf("--model %s: %w", ref, err))
	}
	opts, err := o.planOptions(m, ref)
	if err != nil {
		return err
	}
	ev := plan.Evidence{Trace: o.Trace, Results: o.From,
		Scrape: plan.ScrapeOptions{Duration: o.Scrape, Interval: o.Interval, APIKey: os.Getenv(o.APIKeyEnv)}}
	if o.InputLen > 0 {
		ev.Lengths = &plan.Traffic{Source: "--input-len/--output-len", InputMean: float64(o.InputLen), InputP95: float64(o.InputLen), OutputMean: float64(o.OutputLen), OutputP95: float64(o.OutputLen)}
	}
	finish := func() {}
	if o.Endpoint != "" {
		bar := o.IO.Progress(int(o.Scrape/o.Interval)+1, "scrape")
		ev.Scrape.Progress, finish = func(done, total int) { bar.Set(done, total) }, bar.Finish
	}
	p, err := plan.Assemble(ctx, opts, ev)
	finish()
	if err != nil {
		return err
	}
	if o.GatesOut != "" {
		if err := atomicfile.Write(o.GatesOut, func(w io.Writer) error { _, err := w.Write(plan.GatesYAML(p.Gates)); return err }); err != nil {
			return fmt.Errorf("--gates-out %s: %w", o.GatesOut, err)
		}
	}
	return render.Write(o.IO.Out, o.format, o.IO.FitReport(view(p, o.GatesOut), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY})
}

// planOptions maps the flags that need the model (--max-model-len against
// its maximum, --gpu, --gpu-mem, --kv-budget) to the library's options.
func (o *Options) planOptions(m estimate.Model, ref string) (plan.Options, error) {
	if lim := m.MaxModelLen(); lim > 0 && o.MaxModelLen > lim {
		return plan.Options{}, cmdutil.FlagErrorf("--max-model-len %d is greater than the model's maximum of %d (%s), which the engine refuses", o.MaxModelLen, lim, m.MaxModelLenSource())
	}
	// A request is at most the model's context (--max-model-len when
	// given); each rank holds at least one attention head and one layer.
	ctxLen, ctxWhat := m.MaxModelLen(), "the model's maximum of"
	if o.MaxModelLen > 0 {
		ctxLen, ctxWhat = int64(o.MaxModelLen), "--max-model-len"
	}
	if ctxLen > 0 && (int64(o.InputLen) > ctxLen || int64(o.OutputLen) > ctxLen-int64(o.InputLen)) {
		return plan.Options{}, cmdutil.FlagErrorf("--input-len %d plus --output-len %d: more than %s %d tokens a request", o.InputLen, o.OutputLen, ctxWhat, ctxLen)
	}
	if m.Heads > 0 && o.TP > m.Heads {
		return plan.Options{}, cmdutil.FlagErrorf("--tp %d: more than the model's %d attention heads (at most %d)", o.TP, m.Heads, m.Heads)
	}
	if m.Layers > 0 && o.PP > m.Layers {
		return plan.Options{}, cmdutil.FlagErrorf("--pp %d: more than the model's %d layers (at most %d)", o.PP, m.Layers, m.Layers)
	}
	opts := plan.Options{Model: m, ModelRef: ref, Engine: o.engine, EngineVersion: o.EngineVersion, TP: o.TP, PP: o.PP,
		MaxModelLen: o.MaxModelLen, Endpoint: o.Endpoint}
	if o.Model == "" {
		opts.ModelRef, opts.BuiltIn = "kvq-probe", true
	}
	if o.GPU != "" {
		g, err := estimate.LookupGPU(o.GPU)
		if err != nil {
			return plan.Options{}, cmdutil.FlagErrorf("--gpu: %w (see kvq estimate --list-gpus)", err)
		}
		opts.GPU = &g
	}
	for _, s := range []struct {
		flag, v string
		dst     func(int64)
	}{{"gpu-mem", o.GPUMem, func(b int64) { opts.GPU = &estimate.GPU{Name: "GPU", Memory: b} }}, {"kv-budget", o.KVBudget, func(b int64) { opts.KVBudget = b }}} {
		if s.v == "" {
			continue
		}
		b, err := estimate.ParseBytes(s.v)
		if err != nil || b <= 0 {
			return plan.Options{}, cmdutil.FlagErrorf("--%s %q: want a positive size such as 40GiB", s.flag, s.v)
		}
		s.dst(b)
	}
	return opts, nil
}

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

func num(x float64) string {
	if x == 0 || math.IsNaN(x) {
		return "-"
	}
	if x >= 100 {
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// view lays the plan out: step 1, candidates, commands, checklist,
// compatibility of the first candidate, fallback.
func view(p *plan.Plan, gatesFile string) render.Report {
	r := render.Report{Value: p}
	setting := fmt.Sprintf("Model %s, engine %s", p.Model, p.Engine)
	if p.EngineVersion != "" {
		setting += " " + p.EngineVersion
	}
	if p.GPU != "" {
		setting += ", GPU " + p.GPU
	}
	if p.KVBudget > 0 {
		setting += fmt.Sprintf(", KV budget %s per rank (kvq estimate's memory model)", gib(p.KVBudget))
	}
	setting += fmt.Sprintf(", TP %d, max_model_len %d", p.TP, p.MaxModelLen)
	r.Preamble = append(r.Preamble, setting)
	s1 := render.Table{Title: "Step 1: is the service KV-bound? " + strings.ToUpper(p.Step1.Verdict), Header: []string{"EVIDENCE"}}
	for _, e := range p.Step1.Evidence {
		s1.Rows = append(s1.Rows, []string{e})
	}
	r.Tables = append(r.Tables, s1)
	conc := "MAX CONC @ " + strconv.FormatInt(p.MaxModelLen, 10)
	ct := render.Table{Key: 2, Title: "Step 2: candidates (FP8 first, then INT8, then 4-bit; capacity from kvq estimate's accounting)",
		Header: []string{"#", "FORMAT", "GPU", "KVQ SPEC", "BYTES/TOKEN", "VS FP16", "TOKENS", conc, "CONC @ TRAFFIC", "EVAL"},
		Align:  []render.Align{render.Right, render.Left, render.Left, render.Left, render.Right, render.Right, render.Right, render.Right, render.Right, render.Left}}
	b := p.Baseline
	ct.Rows = append(ct.Rows, []string{"-", "baseline (model dtype)", "", "fp16", num(b.BytesPerToken), "1.00", num(float64(b.Tokens)), num(b.MaxConcurrency), num(b.TrafficConcurrency), ""})
	for _, c := range p.Candidates {
		spec := c.Format.KVQ
		if spec == "" {
			spec = "(none)"
		}
		ev := c.Verdict
		if ev == "" {
			ev = "to run"
		}
		ct.Rows = append(ct.Rows, []string{strconv.Itoa(c.Order), c.Format.Name, c.GPU.Status, spec, num(c.Capacity.BytesPerToken), num(c.Capacity.Compression),
			num(float64(c.Capacity.Tokens)), num(c.Capacity.MaxConcurrency), num(c.Capacity.TrafficConcurrency), ev})
	}
	ct.Notes = append(ct.Notes, "GPU: yes (runs, computes natively), partial (stores without native compute), no, unknown. A spec in brackets has no kvq codec: its bytes are not modelled.")
	r.Tables = append(r.Tables, ct)
	cmds := render.Table{Title: "Engine commands", Header: []string{"#", "FORMAT", "COMMAND", "SCALES"}}
	for _, c := range p.Candidates {
		cmds.Rows = append(cmds.Rows, []string{strconv.Itoa(c.Order), c.Format.Name, c.Command, c.Format.Scales})
	}
	r.Tables = append(r.Tables, cmds)
	cl := render.Table{Key: 2, Title: "Checklist", Header: []string{"STEP", "ITEM", "STATUS", "DETAIL", "COMMAND"}}
	for _, it := range p.Checklist {
		step := strconv.Itoa(it.Step)
		if it.Step == 0 {
			step = "-"
		}
		cl.Rows = append(cl.Rows, []string{step, it.Title, strings.ToUpper(it.Status), it.Detail, it.Command})
	}
	gates := "Gates for kvq eval: "
	for i, g := range p.Gates {
		if i > 0 {
			gates += ", "
		}
		gates += g.Metric
		if g.Suite != "" {
			gates += "[" + g.Suite + "]"
		}
		if g.Max != nil {
			gates += fmt.Sprintf(" <= %g", *g.Max)
		}
		if g.Min != nil {
			gates += fmt.Sprintf(" >= %g", *g.Min)
		}
	}
	if gatesFile != "" {
		gates += " (written to " + gatesFile + ")"
	} else {
		gates += " (write them with --gates-out kvq-gates.yaml)"
	}
	cl.Notes = append(cl.Notes, gates)
	r.Tables = append(r.Tables, cl)
	fb := render.Table{Title: "Fallback", Header: []string{"COMMAND"}}
	for _, f := range p.Fallback {
		fb.Rows = append(fb.Rows, []string{f})
	}
	r.Tables = append(r.Tables, fb)
	r.Flat = &cl
	return r
}
