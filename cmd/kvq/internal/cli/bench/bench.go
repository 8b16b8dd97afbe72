// Package bench implements kvq bench over pkg/bench and the in-process
// engine.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/spf13/cobra"
)

// DefaultCaches are the caches kvq bench compares without --cache.
const DefaultCaches = "fp16,fp8,int4,kivi2"

// Options are kvq bench's flags.
type Options struct {
	IO          *cmdutil.IOStreams
	Version     string
	Model       string
	Tokenizer   string
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
	Threads     int
	Device      string
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
	cmdutil.AddModelFlag(fl, &o.Model)
	cmdutil.AddTokenizerFlag(fl, &o.Tokenizer)
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
	cmdutil.AddThreadsFlag(fl, &o.Threads)
	cmdutil.AddDeviceFlag(fl, &o.Device)
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
	if err := cmdutil.CheckDevice(o.Device); err != nil {
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
	tok := bench.ModelTokenizer(m)
	if o.Dataset == "random" || o.Dataset == "fixed" {
		// Before the prompts are made: even the shortest request must fit
		// (the requests are checked one by one below).
		in := int(math.Floor(float64(o.InputLen) * (1 - o.RangeRatio)))
		out := max(1, int(math.Floor(float64(o.OutputLen)*(1-o.RangeRatio))))
		if c := m.MaxSeqLen(); in > c || out > c-in {
			return nil, cmdutil.FlagErrorf("--input-len %d plus --output-len %d make %d tokens a request, more than the model's context of %d", o.InputLen, o.OutputLen, uint64(o.InputLen)+uint64(o.OutputLen), c)
		}
		if o.InputLen > bench.MaxPromptTokens/o.NumPrompts {
			return nil, cmdutil.FlagErrorf("--num-prompts %d × --input-len %d: at most %d prompt tokens in all", o.NumPrompts, o.InputLen, bench.MaxPromptTokens)
		}
	}
	var reqs []bench.Request
	var err error
	switch o.Dataset {
	case "random":
		reqs, err = bench.Random(tok, o.NumPrompts, o.InputLen, o.OutputLen, o.RangeRatio, o.Seed)
	case "fixed":
		reqs, err = bench.Fixed(tok, o.NumPrompts, o.InputLen, o.OutputLen, o.Seed)
	case "builtin":
		reqs, err = bench.BuiltIn(tok, o.NumPrompts, o.OutputLen, o.Seed)
	default:
		out := 0
		if o.outputLenSet {
			out = o.OutputLen
		}
		reqs, err = bench.FromFile(tok, o.DatasetPath, o.NumPrompts, out, o.Seed)
	}
	if err != nil {
		return nil, cmdutil.UsageError(err)
	}
	if c := m.ContextLen; c > 0 {
		for _, r := range reqs {
			if n := len(r.Prompt) + r.MaxTokens; n > c {
				return nil, cmdutil.FlagErrorf("request %d needs %d tokens (%d prompt + %d output), the model's context is %d: lower --input-len/--output-len", r.Index, n, len(r.Prompt), r.MaxTokens, c)
			}
		}
	}
	return reqs, nil
}

// Run benchmarks and reports.
func (o *Options) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, o.Tokenizer, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := cmdutil.CheckSpecLayers("--cache", m.Config.Layers, o.specs...); err != nil {
		return err
	}
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
	rep := &Report{Schema: Schema, Version: o.Version, Model: modelName(m, o.Model), Machine: machine(o.Threads),
		Workload: Workload{Dataset: o.Dataset, Path: o.DatasetPath, Requests: len(reqs), Seed: o.Seed}, Loads: o.loads()}
	for _, r := range reqs {
		rep.Workload.InputTokens += len(r.Prompt)
		rep.Workload.OutputTokens += r.MaxTokens
	}
	var targets []namedTarget
	var eng *engine.Engine
	var be backend.Backend // nil: the CPU
	var stats *poolWatch
	if len(o.ends) > 0 {
		if targets, err = o.endpointTargets(ctx, bench.ModelTokenizer(m)); err != nil {
			return err
		}
		rep.Mode = "endpoint"
	} else {
		rep.Mode = "in-process"
		budget := o.budget
		rep.BudgetSource = "--kv-budget " + o.KVBudget
		if budget == 0 && (o.GPU != "" || o.GPUMem != "") {
			if budget, err = o.gpuBudget(ctx, m); err != nil {
				return err
			}
			rep.BudgetSource = fmt.Sprintf("--gpu %s, kvq estimate's memory model at utilization %g", o.GPU, o.Utilization)
			if o.GPU == "" {
				rep.BudgetSource = fmt.Sprintf("--gpu-mem %s, kvq estimate's memory model at utilization %g", o.GPUMem, o.Utilization)
			}
		}
		if budget == 0 {
			rep.BudgetSource = fmt.Sprintf("--budget-seqs %d", o.BudgetSeqs)
			longest := 0
			for _, r := range reqs {
				longest = max(longest, len(r.Prompt)+r.MaxTokens)
			}
			l, err := kvcache.NewLayout(m.Geometry(), o.specs[0], 0)
			if err != nil {
				return cmdutil.FlagErrorf("--cache %s: %w", o.specs[0].String(), err)
			}
			cost := l.SeqCost(longest)
			if cost > 0 && int64(o.BudgetSeqs) > math.MaxInt64/cost {
				return cmdutil.FlagErrorf("--budget-seqs %d: a KV budget past 2^63 bytes", o.BudgetSeqs)
			}
			budget = cost * int64(o.BudgetSeqs)
			if err := cmdutil.CheckKVMemory("--budget-seqs", budget, fmt.Sprintf("%d requests of %d tokens", o.BudgetSeqs, longest)); err != nil {
				return err
			}
		}
		rep.Budget = budget
		stats = &poolWatch{}
		if be, err = cmdutil.OpenDevice(ctx, o.Device, o.IO.ErrOut); err != nil {
			return err
		}
		eng, err = engine.New(m, engine.Options{Caches: o.specs, Budget: budget, MaxSeqs: o.MaxSeqs, Chunk: o.Chunk, Workers: o.Threads, Backend: be, OnStep: stats.step})
		if err != nil {
			if errors.Is(err, engine.ErrOptions) {
				return cmdutil.UsageError(err)
			}
			return cmdutil.FlagErrorf("--cache: %w", err)
		}
		ectx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- eng.Run(ectx) }()
		defer func() { stop(); <-done }()
		if err := eng.WaitReady(ctx); err != nil {
			return err
		}
		for _, name := range eng.Caches() {
			targets = append(targets, namedTarget{name: name, t: &bench.EngineTarget{Engine: eng, Cache: name}})
		}
	}
	loads := rep.Loads
	total := len(targets) * len(loads) * (len(reqs) + o.Warmups)
	bar := o.IO.Progress(total, "bench")
	defer bar.Finish()
	done := 0
	for _, nt := range targets {
		cr := CacheReport{Cache: nt.name}
		for _, ld := range loads {
			if stats != nil {
				stats.reset(nt.name)
			}
			base := done
			res, err := bench.Run(ctx, nt.t, reqs, ld, bench.RunOptions{Seed: o.Seed, Progress: func(d, _ int) {
				bar.Set(base+d+ld.Warmups, total)
			}})
			done += len(reqs) + ld.Warmups
			if err != nil {
				bar.Finish()
				return err
			}
			sum, err := bench.Summarize(res, bench.SummaryOptions{Percentiles: o.pct, Goodput: o.goodput})
			if err != nil {
				return cmdutil.UsageError(err)
			}
			pt := PointReport{Load: ld, Summary: sum, Result: res}
			if stats != nil {
				pt.Engine = stats.get(nt.name)
			}
			cr.Points = append(cr.Points, pt)
		}
		rep.Caches = append(rep.Caches, cr)
	}
	bar.Finish()
	if !o.goodput.IsZero() {
		slo := bench.SLO{TTFT: o.goodput.TTFT, TPOT: o.goodput.TPOT, E2EL: o.goodput.E2EL, Percentile: o.SLOPct}
		for i := range rep.Caches {
			pts := make([]bench.Point, len(rep.Caches[i].Points))
			for j, p := range rep.Caches[i].Points {
				pts[j] = bench.Point{Load: p.Load, Result: p.Result}
			}
			cap, err := bench.Capacity(pts, slo)
			if err != nil {
				return cmdutil.UsageError(err)
			}
			rep.Caches[i].Capacity = &cap
		}
	}
	if len(o.depths) > 0 && eng != nil {
		r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: be, Workers: o.Threads})
		if err != nil {
			return err
		}
		defer r.Close()
		dbar := o.IO.Progress(len(o.specs)*len(o.depths)*o.DepthReps, "decode sweep")
		defer dbar.Finish()
		for i, spec := range o.specs {
			k := i
			pts, err := bench.DecodeDepth(ctx, r, spec, o.depths, o.DepthTokens, bench.DepthOptions{Repetitions: o.DepthReps, Seed: o.Seed,
				Progress: func(d, t int) { dbar.Set(k*t+d, len(o.specs)*t) }})
			if err != nil {
				dbar.Finish()
				if errors.Is(err, bench.ErrOptions) {
					return cmdutil.UsageError(err)
				}
				return err
			}
			rep.Caches[i].Decode = pts
		}
		dbar.Finish()
	}
	rep.fill()
	if err := render.Write(o.IO.Out, o.format, view(rep, o.pct), render.Options{TTY: o.IO.OutTTY}); err != nil {
		return err
	}
	if o.Plot != "" {
		if err := writePlots(o.Plot, rep); err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
	}
	return nil
}

type namedTarget struct {
	name string
	t    bench.Target
}

// poolWatch keeps, per pool, what the engine saw during a run: the most
// sequences running at once, the peak KV usage, preemptions.
type poolWatch struct {
	mu    sync.Mutex
	cur   map[string]*EngineStats
	start map[string]int64
}

func (w *poolWatch) reset(cache string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		w.cur, w.start = map[string]*EngineStats{}, map[string]int64{}
	}
	w.cur[cache] = &EngineStats{}
	w.start[cache] = -1
}

func (w *poolWatch) step(s engine.StepInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range s.Pools {
		st := w.cur[p.Cache]
		if st == nil {
			continue
		}
		if w.start[p.Cache] < 0 {
			w.start[p.Cache] = p.Preemptions
		}
		st.RunningPeak = max(st.RunningPeak, p.Running)
		st.WaitingPeak = max(st.WaitingPeak, p.Waiting)
		st.KVUsagePeak = max(st.KVUsagePeak, p.Usage())
		st.Preemptions = p.Preemptions - w.start[p.Cache]
		st.Steps++
		if p.Running > 0 {
			st.usage = append(st.usage, UsageSample{T: s.Start.Add(s.Duration), Usage: p.Usage(), Running: p.Running, Waiting: p.Waiting})
		}
	}
}

func (w *poolWatch) get(cache string) *EngineStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.cur[cache]
	if st == nil {
		return nil
	}
	out := *st
	if len(st.usage) > 0 {
		t0 := st.usage[0].T
		for _, u := range st.usage {
			out.Usage = append(out.Usage, UsagePoint{Seconds: u.T.Sub(t0).Seconds(), Usage: u.Usage, Running: u.Running, Waiting: u.Waiting})
		}
	}
	out.usage = nil
	return &out
}

func modelName(m *runtime.Model, given string) string {
	if given == "" {
		return "built-in kvq-probe"
	}
	return m.Path
}

func machine(threads int) Machine {
	return Machine{OS: goruntime.GOOS, Arch: goruntime.GOARCH, CPUs: goruntime.NumCPU(), Threads: threads, Kernels: simd.Kernels(), Go: goruntime.Version()}
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
