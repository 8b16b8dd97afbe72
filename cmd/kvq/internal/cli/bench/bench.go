// Package bench implements kvq bench over pkg/bench and the in-process
// engine.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/spf13/cobra"
)

// DefaultCaches are the caches kvq bench compares without --cache.
const DefaultCaches = "fp16,fp8,int4,kivi2"

// Options are kvq bench's flags.
type Options struct {
	// Wide keeps table output at full width (--wide).
	Wide        bool
	IO          *cmdutil.IOStreams
	Version     string
	Model       string
	Tokenizer   string
	Mmap        bool
	Cache       string
	KVBudget    string
	GPU, GPUMem string
	Utilization float64
	BudgetSeqs  int
	Dataset     string
	DatasetPath string
	NumPrompts  int
	InputLen    int
	OutputLen   int
	RangeRatio  float64
	Seed        uint64
	Rate        string
	Burstiness  float64
	Concurrency string
	Warmups     int
	Goodput     string
	SLOPct      float64
	Percentiles string
	Depths      string
	DepthTokens int
	DepthReps   int
	MaxSeqs     int
	Chunk       int
	Invariant   bool
	Threads     int
	Device      cmdutil.Device
	Output      string
	Plot        string
	Endpoints   []string
	EndpointKey string
	EndpointMdl string
	Retries     int
	Chat        bool
	Timeout     time.Duration

	outputLenSet bool
	specs        []quant.Spec
	rates        []float64
	concs        []int
	goodput      bench.Goodput
	pct          []float64
	depths       []int
	format       render.Format
	budget       int64
	ends         []cmdutil.Endpoint
	axisConc     bool
}

// NewCmd returns kvq bench.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Latency, throughput and capacity of fp16 vs quantized caches, in-process or on servers",
		Long: `kvq bench runs a request workload against each cache in turn — the same
requests, the same arrival schedule (same seed) — on kvq's in-process
continuous-batching engine, whose KV pool per cache has the same byte budget
(--kv-budget), or against OpenAI-compatible endpoints (--endpoint NAME=URL,
repeatable: a vLLM deployment with an fp16 cache and one with fp8, say). It
reports vLLM bench serve's metrics, with its names and formulas:

  ` + strings.Join(bench.Formulas(), "\n  ") + `

and, in-process, what the engine saw: the most sequences it ran at once
(the capacity answer: a smaller cache holds more in the same bytes), the
peak KV usage and preemptions. A list of --max-concurrency (or
--request-rate) values sweeps the load; with --goodput SLOs the capacity of
each cache is the largest level whose --slo-percentile latencies meet them.
--depths adds a llama-bench-style decode sweep: tokens/s of one sequence
after a prefill of each depth.

Without --model it runs on the built-in kvq-probe model (about 30 s on 2
cores with the defaults). Warm-up requests are sent first and not counted.
The first --cache spec is the baseline. The model's tokenizer makes the
prompts, for --endpoint servers too.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq bench                       # the built-in model: fp16, fp8, int4, kivi2; about 30 s
  kvq bench --cache fp16,fp8 --max-concurrency 1,4,16 --goodput ttft:500ms,tpot:50ms \
    --num-prompts 16 --depths none
  kvq bench --cache fp16,int4 --request-rate 8,32 --num-prompts 16 --depths none -o json > b.json
  kvq bench --model ./Llama-3.1-8B --kv-budget 8GiB --dataset sharegpt \
    --dataset-path sharegpt.json --num-prompts 200   # your own model and data
  kvq bench --endpoint fp16=http://vllm-a:8000 --endpoint fp8=http://vllm-b:8000 \
    --model ./Llama-3.1-8B --max-concurrency 16      # your own servers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.outputLenSet = cmd.Flags().Changed("output-len")
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
	cmdutil.AddModelFlag(fl, &o.Model)
	cmdutil.AddTokenizerFlag(fl, &o.Tokenizer)
	cmdutil.AddMmapFlag(fl, &o.Mmap)
	cmdutil.AddCachesFlag(fl, &o.Cache, DefaultCaches)
	fl.StringVar(&o.KVBudget, "kv-budget", "", "KV memory of each cache's pool, e.g. 64MiB (default: what --budget-seqs requests of the workload's longest prompt and output take in the first cache)")
	fl.StringVar(&o.GPU, "gpu", "", "with no --kv-budget: the KV budget vLLM would leave on this GPU preset for the model (kvq estimate's memory model; see kvq estimate --list-gpus)")
	fl.StringVar(&o.GPUMem, "gpu-mem", "", "with no --kv-budget: the same for a GPU of this much memory, e.g. 24GiB")
	fl.Float64Var(&o.Utilization, "gpu-memory-utilization", estimate.DefaultUtilization, "with --gpu or --gpu-mem: vLLM's fraction of GPU memory the engine may use")
	fl.IntVar(&o.BudgetSeqs, "budget-seqs", 8, "with no --kv-budget: size the budget for this many requests in the baseline cache")
	fl.StringVar(&o.Dataset, "dataset", "random", "workload: random (vLLM's random dataset: random token ids), fixed (exact lengths), file (--dataset-path: JSONL prompts/messages, or ShareGPT), builtin (kvq's evaluation texts)")
	fl.StringVar(&o.DatasetPath, "dataset-path", "", "the workload file for --dataset file (or sharegpt)")
	fl.IntVar(&o.NumPrompts, "num-prompts", 64, "requests per run")
	fl.IntVar(&o.InputLen, "input-len", 256, "prompt tokens (random, fixed)")
	fl.IntVar(&o.OutputLen, "output-len", 64, "output tokens (random, fixed, builtin; a file's own lengths unless set explicitly)")
	fl.Float64Var(&o.RangeRatio, "range-ratio", 0, "random: lengths uniform in [L·(1−r), L·(1+r)]")
	fl.Uint64Var(&o.Seed, "seed", 1, "workload and arrival seed (the same for every cache)")
	fl.StringVar(&o.Rate, "request-rate", "inf", "requests per second (inf: all at once); a comma list sweeps")
	fl.Float64Var(&o.Burstiness, "burstiness", 1, "arrival gaps are Gamma(burstiness): 1 Poisson, < 1 burstier, > 1 more regular")
	fl.StringVar(&o.Concurrency, "max-concurrency", "64", "requests in flight at most (client side); a comma list sweeps; 0: no cap")
	fl.IntVar(&o.Warmups, "warmups", 2, "warm-up requests before each run, not counted")
	fl.StringVar(&o.Goodput, "goodput", "", "SLOs for goodput and capacity, e.g. ttft:500ms,tpot:50ms,e2el:5s")
	fl.Float64Var(&o.SLOPct, "slo-percentile", 90, "the latency percentile that must meet --goodput for a load level to count toward capacity")
	fl.StringVar(&o.Percentiles, "percentiles", "50,90,99", "latency percentiles to report")
	fl.StringVar(&o.Depths, "depths", "0,512,1024", "decode sweep: prefill depths in tokens ('' or none to skip; depths past the model's context are skipped)")
	fl.IntVar(&o.DepthTokens, "depth-tokens", 32, "decode sweep: tokens generated at each depth")
	fl.IntVar(&o.DepthReps, "depth-reps", 3, "decode sweep: repetitions (the median is reported)")
	fl.IntVar(&o.MaxSeqs, "max-seqs", 256, "in-process engine: running sequences per cache at most")
	fl.IntVar(&o.Chunk, "chunk", 256, "in-process engine: prefill chunk in tokens")
	cmdutil.AddBatchInvariantFlag(fl, &o.Invariant)
	cmdutil.AddThreadsFlag(fl, &o.Threads)
	cmdutil.AddDeviceFlag(fl, &o.Device, f.BackendRegistry())
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	fl.StringVar(&o.Plot, "plot", "", "write plots (latency CDFs, throughput vs load, decode speed vs depth) as SVG and PNG into this directory")
	fl.StringArrayVar(&o.Endpoints, "endpoint", nil, "OpenAI-compatible server to benchmark instead of the in-process engine, NAME=URL or URL (repeatable)")
	fl.StringVar(&o.EndpointKey, "api-key-env", "KVQ_API_KEY", "environment variable holding the endpoints' API key")
	fl.StringVar(&o.EndpointMdl, "served-model", "", "model id to request from the endpoints (default: a /v1/models id ending in @NAME for an endpoint NAME=URL, as kvq serve lists its caches, else the first)")
	fl.BoolVar(&o.Chat, "chat", false, "endpoints: use /v1/chat/completions (prompts as one user message) instead of /v1/completions")
	fl.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "per-request timeout")
	fl.IntVar(&o.Retries, "retries", 1, "endpoints: times a request that failed to connect or got a 5xx is sent again (its timing restarts); failures after that are counted, not fatal")
	return cmd
}

// Validate checks the flags before any work.
func (o *Options) Validate() error {
	var err error
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	if len(o.Endpoints) == 0 {
		if o.specs, err = quant.Formats().ParseList(o.Cache); err != nil {
			return cmdutil.FlagErrorf("--cache: %w", err)
		}
	} else if o.ends, err = cmdutil.ParseEndpoints(o.Endpoints); err != nil {
		return err
	}
	switch o.Dataset {
	case "random", "fixed", "builtin":
	case "file", "sharegpt":
		if o.DatasetPath == "" {
			return cmdutil.FlagErrorf("--dataset %s needs --dataset-path", o.Dataset)
		}
	default:
		return cmdutil.FlagErrorf("--dataset %q (valid: random, fixed, file, sharegpt, builtin)", o.Dataset)
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--num-prompts", o.NumPrompts}, {"--input-len", o.InputLen}, {"--output-len", o.OutputLen}, {"--budget-seqs", o.BudgetSeqs}, {"--depth-tokens", o.DepthTokens}, {"--depth-reps", o.DepthReps}, {"--max-seqs", o.MaxSeqs}, {"--chunk", o.Chunk}} {
		if c.v <= 0 {
			return cmdutil.FlagErrorf("%s %d: must be positive", c.flag, c.v)
		}
	}
	// Warm-ups and decode-sweep repetitions are requests too.
	for _, c := range []struct {
		flag string
		v    int
	}{{"--warmups", o.Warmups}, {"--depth-reps", o.DepthReps}} {
		if c.v > bench.MaxPrompts {
			return cmdutil.FlagErrorf("%s %d: at most %d (requests, as --num-prompts)", c.flag, c.v, bench.MaxPrompts)
		}
	}
	if o.NumPrompts > bench.MaxPrompts {
		return cmdutil.FlagErrorf("--num-prompts %d: at most %d (the requests are built and held before the run)", o.NumPrompts, bench.MaxPrompts)
	}
	for _, c := range []struct {
		bad  bool
		flag string
		v    any
		want string
	}{
		{o.Warmups < 0, "--warmups", o.Warmups, "must be ≥ 0"},
		{o.Threads < 0, "--threads", o.Threads, "must be ≥ 0"},
		{!(o.RangeRatio >= 0 && o.RangeRatio < 1), "--range-ratio", o.RangeRatio, "must be in [0, 1)"},
		{!(o.Burstiness > 0), "--burstiness", o.Burstiness, "must be > 0"},
		{!(o.SLOPct > 0 && o.SLOPct <= 100), "--slo-percentile", o.SLOPct, "must be in (0, 100]"},
		{o.Timeout < 0, "--timeout", o.Timeout, "must be ≥ 0"},
	} {
		if c.bad {
			return cmdutil.FlagErrorf("%s %v: %s", c.flag, c.v, c.want)
		}
	}
	if err := o.Device.Check(); err != nil {
		return err
	}
	if o.Retries < 0 || o.Retries > 10 {
		return cmdutil.FlagErrorf("--retries %d: must be in 0..10", o.Retries)
	}
	if o.rates, err = floats("--request-rate", o.Rate); err != nil {
		return err
	}
	if o.concs, err = positiveInts("--max-concurrency", o.Concurrency, true); err != nil {
		return err
	}
	if len(o.rates) > 1 && len(o.concs) > 1 {
		return cmdutil.FlagErrorf("sweep one of --request-rate and --max-concurrency, not both")
	}
	o.axisConc = len(o.rates) <= 1
	if o.Goodput != "" {
		if o.goodput, err = bench.ParseGoodput(o.Goodput); err != nil {
			return cmdutil.FlagErrorf("--goodput: %w", err)
		}
	}
	if o.pct, err = bench.ParsePercentiles(o.Percentiles); err != nil {
		return cmdutil.FlagErrorf("--percentiles: %w", err)
	}
	if d := strings.TrimSpace(o.Depths); d != "" && d != "none" {
		if o.depths, err = positiveInts("--depths", d, true); err != nil {
			return err
		}
	}
	switch {
	case o.GPU != "" && o.GPUMem != "":
		return cmdutil.FlagErrorf("--gpu and --gpu-mem: give one or the other")
	case o.KVBudget != "" && (o.GPU != "" || o.GPUMem != ""):
		return cmdutil.FlagErrorf("--kv-budget with --gpu or --gpu-mem: give the budget or the GPU it comes from")
	case !(o.Utilization > 0 && o.Utilization <= 1):
		return cmdutil.FlagErrorf("--gpu-memory-utilization %v: must be in (0, 1]", o.Utilization)
	}
	if o.GPU != "" {
		if _, err := estimate.LookupGPU(o.GPU); err != nil {
			return cmdutil.FlagErrorf("--gpu: %w (see kvq estimate --list-gpus)", err)
		}
	}
	if o.GPUMem != "" {
		if b, err := estimate.ParseBytes(o.GPUMem); err != nil || b <= 0 {
			return cmdutil.FlagErrorf("--gpu-mem %q: want a positive size such as 24GiB", o.GPUMem)
		}
	}
	if o.KVBudget != "" {
		if o.budget, err = estimate.ParseBytes(o.KVBudget); err != nil || o.budget <= 0 {
			return cmdutil.FlagErrorf("--kv-budget %q: want a positive size such as 64MiB", o.KVBudget)
		}
	}
	return cmdutil.CheckOutputDir("--plot", o.Plot)
}

func floats(flag, s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p == "inf" || p == "Inf" {
			out = append(out, 0)
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, cmdutil.FlagErrorf("%s: %q is not a positive rate (or inf)", flag, p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, cmdutil.FlagErrorf("%s: no values", flag)
	}
	return out, nil
}

func positiveInts(flag, s string, zeroOK bool) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v == 0 && !zeroOK {
			return nil, cmdutil.FlagErrorf("%s: %q is not a non-negative integer", flag, p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, cmdutil.FlagErrorf("%s: no values", flag)
	}
	return out, nil
}

// loads are the sweep's load points.
func (o *Options) loads() []bench.Load {
	var out []bench.Load
	for _, r := range o.rates {
		for _, c := range o.concs {
			out = append(out, bench.Load{Rate: r, Burstiness: o.Burstiness, Concurrency: c, Warmups: o.Warmups, Timeout: o.Timeout})
		}
	}
	return out
}

// workload makes the requests with the model's tokenizer.
func (o *Options) workload(m *runtime.Model) ([]bench.Request, error) {
	w := o.workloadOptions()
	if w.Dataset == bench.DatasetFile || w.Dataset == bench.DatasetShareGPT {
		if !o.outputLenSet {
			w.OutputLen = 0 // the file's own lengths
		}
	} else if (o.Dataset == "random" || o.Dataset == "fixed") && o.InputLen <= m.MaxSeqLen() && o.InputLen > bench.MaxPromptTokens/o.NumPrompts {
		// (A request past the context is ModelWorkload's error, named first.)
		return nil, cmdutil.FlagErrorf("--num-prompts %d × --input-len %d: at most %d prompt tokens in all", o.NumPrompts, o.InputLen, bench.MaxPromptTokens)
	}
	reqs, err := bench.ModelWorkload(m, w)
	var ce *bench.ContextError
	switch {
	case errors.As(err, &ce) && ce.Request < 0:
		return nil, cmdutil.FlagErrorf("--input-len %d plus --output-len %d make %d tokens a request, more than the model's context of %d", o.InputLen, o.OutputLen, uint64(o.InputLen)+uint64(o.OutputLen), ce.Context)
	case errors.As(err, &ce):
		return nil, cmdutil.FlagErrorf("request %d needs %d tokens (%d prompt + %d output), the model's context is %d: lower --input-len/--output-len", ce.Request, ce.Prompt+ce.Output, ce.Prompt, ce.Output, ce.Context)
	case err != nil:
		return nil, cmdutil.UsageError(err)
	}
	return reqs, nil
}

func (o *Options) workloadOptions() bench.WorkloadOptions {
	return bench.WorkloadOptions{Dataset: o.Dataset, Path: o.DatasetPath, Requests: o.NumPrompts, InputLen: o.InputLen, OutputLen: o.OutputLen, RangeRatio: o.RangeRatio, Seed: o.Seed}
}

// Run benchmarks and reports.
func (o *Options) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: o.Mmap}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := cmdutil.CheckSpecLayers("--cache", m.Config.Layers, o.specs...); err != nil {
		return err
	}
	cmdutil.WarnSpecBlocks(o.IO.ErrOut, "--cache", m.Geometry(), o.specs...)
	// Up to bench.MaxPrompts requests take seconds to build, and the
	// builders take no context: Ctrl-C is not kept waiting for them.
	type built struct {
		reqs []bench.Request
		err  error
	}
	ready := make(chan built, 1)
	go func() {
		reqs, err := o.workload(m)
		ready <- built{reqs, err}
	}()
	var reqs []bench.Request
	select {
	case b := <-ready:
		if b.err != nil {
			return b.err
		}
		reqs = b.reqs
	case <-ctx.Done():
		return fmt.Errorf("bench: building the requests: %w", ctx.Err())
	}
	mo, err := o.measureOptions(ctx, m, reqs)
	if err != nil {
		return err
	}
	bars := &cmdutil.StageBars{IO: o.IO}
	mo.Progress = bars.Set
	rep, err := bench.Measure(ctx, m, reqs, mo)
	bars.Finish()
	if err != nil {
		return measureError(err)
	}
	if err := render.Write(o.IO.Out, o.format, o.IO.FitReport(view(rep, o.pct), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if o.Plot != "" {
		if err := writePlots(o.Plot, rep); err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
	}
	return nil
}

// measureOptions are Measure's options from the flags: the endpoints'
// clients, or the in-process budget and device.
func (o *Options) measureOptions(ctx context.Context, m *runtime.Model, reqs []bench.Request) (bench.Options, error) {
	mo := bench.Options{Version: o.Version, Model: cmdutil.ModelLabel(m, o.Model), Workload: o.workloadOptions(), Loads: o.loads(),
		Percentiles: o.pct, Goodput: o.goodput, SLOPercentile: o.SLOPct, Threads: o.Threads,
		Caches: o.specs, MaxSeqs: o.MaxSeqs, Chunk: o.Chunk, BatchInvariant: o.Invariant, Depths: o.depths, DepthTokens: o.DepthTokens, DepthReps: o.DepthReps}
	var err error
	if len(o.ends) > 0 {
		mo.Targets, err = o.endpointTargets(ctx, bench.ModelTokenizer(m))
		return mo, err
	}
	if mo.Budget, mo.BudgetSource, err = o.kvBudget(ctx, m, reqs); err != nil {
		return mo, err
	}
	mo.Backend, err = o.Device.Open(ctx, o.IO.ErrOut)
	return mo, err
}

// measureError maps Measure's errors to exit codes: options the engine or
// the summaries refuse are usage errors, caches the engine cannot build
// are --cache's.
func measureError(err error) error {
	var ee *bench.EngineError
	switch {
	case errors.Is(err, engine.ErrOptions), errors.Is(err, bench.ErrOptions), errors.Is(err, bench.ErrSweep):
		return cmdutil.UsageError(err)
	case errors.As(err, &ee):
		return cmdutil.FlagErrorf("--cache: %w", ee.Err)
	}
	return err
}

// kvBudget is each in-process pool's KV memory and where it comes from:
// --kv-budget, the GPU of --gpu or --gpu-mem, or --budget-seqs of the
// workload's longest request in the first cache.
func (o *Options) kvBudget(ctx context.Context, m *runtime.Model, reqs []bench.Request) (int64, string, error) {
	if o.budget > 0 {
		return o.budget, "--kv-budget " + o.KVBudget, nil
	}
	if o.GPU != "" || o.GPUMem != "" {
		budget, err := o.gpuBudget(ctx, m)
		if err != nil {
			return 0, "", err
		}
		if o.GPU == "" {
			return budget, fmt.Sprintf("--gpu-mem %s, kvq estimate's memory model at utilization %g", o.GPUMem, o.Utilization), nil
		}
		return budget, fmt.Sprintf("--gpu %s, kvq estimate's memory model at utilization %g", o.GPU, o.Utilization), nil
	}
	budget, err := bench.SeqBudget(m, o.specs[0], reqs, o.BudgetSeqs, o.Chunk)
	switch {
	case errors.Is(err, bench.ErrBudget):
		return 0, "", cmdutil.FlagErrorf("--budget-seqs %d: a KV budget past 2^63 bytes", o.BudgetSeqs)
	case err != nil:
		return 0, "", cmdutil.FlagErrorf("--cache %s: %w", o.specs[0].String(), err)
	}
	if err := cmdutil.CheckKVMemory("--budget-seqs", budget, fmt.Sprintf("%d requests", o.BudgetSeqs)); err != nil {
		return 0, "", err
	}
	return budget, fmt.Sprintf("--budget-seqs %d", o.BudgetSeqs), nil
}

// gpuBudget is the KV memory vLLM would leave for m's first cache on the
// GPU of --gpu or --gpu-mem: kvq estimate's memory model (GPU memory ×
// utilization, less weights, activations and reserves).
func (o *Options) gpuBudget(ctx context.Context, m *runtime.Model) (int64, error) {
	em, err := estimate.Load(ctx, m.Path)
	if err != nil {
		return 0, cmdutil.UsageError(fmt.Errorf("--gpu: the memory model cannot read %s: %w", m.Path, err))
	}
	p := estimate.Plan{Model: em, Caches: o.specs[:1], Utilization: o.Utilization}
	if o.GPU != "" {
		g, _ := estimate.LookupGPU(o.GPU)
		p.GPUMemory, p.GPUName = g.Memory, g.Name
	} else {
		p.GPUMemory, _ = estimate.ParseBytes(o.GPUMem)
		p.GPUName = "GPU"
	}
	res, err := estimate.Estimate(ctx, p)
	if err != nil {
		return 0, cmdutil.UsageError(fmt.Errorf("--gpu: %w", err))
	}
	if res.Memory == nil || res.Memory.KVBudgetBytes <= 0 {
		return 0, cmdutil.FlagErrorf("--gpu: the model's weights and reserves leave no KV memory on %s", p.GPUName)
	}
	return res.Memory.KVBudgetBytes, nil
}
