package bench

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Datasets ModelWorkload knows.
const (
	DatasetRandom   = "random"   // Random: vLLM's random dataset
	DatasetFixed    = "fixed"    // Fixed: exact lengths
	DatasetBuiltIn  = "builtin"  // BuiltIn: kvq's evaluation texts
	DatasetFile     = "file"     // FromFile: JSONL prompts or messages, or ShareGPT
	DatasetShareGPT = "sharegpt" // FromFile as well
)

// WorkloadOptions select a workload for ModelWorkload.
type WorkloadOptions struct {
	// Dataset is one of the Dataset constants.
	Dataset string
	// Path is the file of DatasetFile and DatasetShareGPT.
	Path string
	// Requests is the number of requests.
	Requests int
	// InputLen and OutputLen are the tokens of each request (random,
	// fixed; builtin takes OutputLen). For a file OutputLen 0 keeps the
	// file's own lengths.
	InputLen, OutputLen int
	// RangeRatio spreads the random dataset's lengths uniformly over
	// [L·(1−r), L·(1+r)].
	RangeRatio float64
	Seed       uint64
}

// ContextError is a workload that does not fit the model's context.
// Request is the index of the request that does not fit, with its prompt
// and output tokens; or -1 when even the shortest request the random or
// fixed lengths allow would not fit (checked before any prompt is made),
// with those shortest lengths.
type ContextError struct {
	Request        int
	Prompt, Output int
	Context        int
}

func (e *ContextError) Error() string {
	if e.Request < 0 {
		return fmt.Sprintf("bench: requests of at least %d prompt and %d output tokens exceed the model's context of %d", e.Prompt, e.Output, e.Context)
	}
	return fmt.Sprintf("bench: request %d needs %d tokens (%d prompt + %d output), the model's context is %d", e.Request, e.Prompt+e.Output, e.Prompt, e.Output, e.Context)
}

// ModelWorkload makes the requests of opts with m's tokenizer, and checks
// that each fits m's context (a *ContextError when one does not). The
// generators' errors wrap ErrWorkload.
func ModelWorkload(m *runtime.Model, opts WorkloadOptions) ([]Request, error) {
	tok := ModelTokenizer(m)
	if opts.Dataset == DatasetRandom || opts.Dataset == DatasetFixed {
		// Before the prompts are made: even the shortest request must fit
		// (the requests are checked one by one below).
		in := int(math.Floor(float64(opts.InputLen) * (1 - opts.RangeRatio)))
		out := max(1, int(math.Floor(float64(opts.OutputLen)*(1-opts.RangeRatio))))
		if c := m.MaxSeqLen(); in > c || out > c-in {
			return nil, &ContextError{Request: -1, Prompt: in, Output: out, Context: c}
		}
	}
	var reqs []Request
	var err error
	switch opts.Dataset {
	case DatasetRandom:
		reqs, err = Random(tok, opts.Requests, opts.InputLen, opts.OutputLen, opts.RangeRatio, opts.Seed)
	case DatasetFixed:
		reqs, err = Fixed(tok, opts.Requests, opts.InputLen, opts.OutputLen, opts.Seed)
	case DatasetBuiltIn:
		reqs, err = BuiltIn(tok, opts.Requests, opts.OutputLen, opts.Seed)
	case DatasetFile, DatasetShareGPT:
		reqs, err = FromFile(tok, opts.Path, opts.Requests, opts.OutputLen, opts.Seed)
	default:
		err = fmt.Errorf("%w: dataset %q", ErrWorkload, opts.Dataset)
	}
	if err != nil {
		return nil, err
	}
	if c := m.ContextLen; c > 0 {
		for _, r := range reqs {
			if n := len(r.Prompt) + r.MaxTokens; n > c {
				return nil, &ContextError{Request: r.Index, Prompt: len(r.Prompt), Output: r.MaxTokens, Context: c}
			}
		}
	}
	return reqs, nil
}

// SeqBudget is the KV memory seqs of the longest of reqs (prompt and
// output) take in a pool of spec's cache for m, prompts fed in chunks of
// chunk tokens (0: engine.DefaultChunk) as the engine feeds and admits
// them (kvcache.Layout.SeqCostChunked: sliding-window layers hold their
// window only).
func SeqBudget(m *runtime.Model, spec quant.Spec, reqs []Request, seqs, chunk int) (int64, error) {
	if chunk <= 0 {
		chunk = engine.DefaultChunk
	}
	longest := 0
	for _, r := range reqs {
		longest = max(longest, len(r.Prompt)+r.MaxTokens)
	}
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		return 0, err
	}
	cost := l.SeqCostChunked(longest, chunk)
	if cost > 0 && int64(seqs) > math.MaxInt64/cost {
		return 0, fmt.Errorf("%w: a KV budget past 2^63 bytes (%d sequences of %d tokens)", ErrBudget, seqs, longest)
	}
	return cost * int64(seqs), nil
}

// Stages of Measure, as its Progress callback names them.
const (
	// StageLoad is the load runs: every target at every load, warm-ups
	// included.
	StageLoad = "bench"
	// StageDecode is the in-process decode sweep.
	StageDecode = "decode sweep"
)

// Options configure Measure.
type Options struct {
	// Version and Model name the kvq version and the model in the report.
	Version, Model string
	// Workload describes the requests in the report (Dataset, Path, Seed);
	// Seed also seeds the arrivals and the decode sweep.
	Workload WorkloadOptions
	// Loads are the load levels each target runs, in order.
	Loads []Load
	// Percentiles are the latency percentiles the summaries report.
	Percentiles []float64
	// Goodput, when not zero, are the SLOs of the summaries' goodput and
	// of each target's capacity, met at the SLOPercentile latencies.
	Goodput       Goodput
	SLOPercentile float64
	// Threads bounds the CPU backend's goroutines (0: all); the report
	// records it.
	Threads int

	// Targets, when not empty, are the endpoints to measure (report mode
	// "endpoint"); the in-process fields below are then unused.
	Targets []Target

	// Caches are the in-process engine's pools, the baseline first.
	Caches []quant.Spec
	// Budget is the KV memory of each pool, and BudgetSource where it came
	// from (for the report).
	Budget       int64
	BudgetSource string
	// MaxSeqs and Chunk are the engine's running sequences per pool and
	// prefill chunk.
	MaxSeqs, Chunk int
	// BatchInvariant is engine.Options.BatchInvariant.
	BatchInvariant bool
	// Backend runs the model (nil: the CPU).
	Backend backend.Backend
	// Depths, when not empty, adds the decode sweep in-process:
	// DepthTokens tokens of one sequence after each depth, the median of
	// DepthReps repetitions.
	Depths                 []int
	DepthTokens, DepthReps int

	// Progress, when set, is called with the stage (StageLoad,
	// StageDecode), the work done and the total: with done 0 when a stage
	// starts, then as work is done. Calls are made one at a time.
	Progress func(stage string, done, total int)
}

// EngineError is the in-process engine refusing Options: Err is
// engine.New's error (which wraps engine.ErrOptions for bad sizes).
type EngineError struct{ Err error }

func (e *EngineError) Error() string { return e.Err.Error() }
func (e *EngineError) Unwrap() error { return e.Err }

// Measure runs reqs against every target at every load (the same
// requests and arrival seed each time), in-process on kvq's engine over m
// with one pool per cache in the same budget, or against opts.Targets;
// then the SLO capacity of each target (with Goodput) and the in-process
// decode sweep (with Depths). The report's errors: *EngineError when the
// engine refuses the caches; errors wrapping ErrOptions or ErrSweep for
// percentiles, SLOs or loads that cannot be summarized; ctx's error when
// it ends.
func Measure(ctx context.Context, m *runtime.Model, reqs []Request, opts Options) (*Report, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	rep := &Report{Schema: Schema, Version: opts.Version, Model: opts.Model, Machine: HostMachine(opts.Threads),
		Workload: WorkloadInfo{Dataset: opts.Workload.Dataset, Path: opts.Workload.Path, Requests: len(reqs), Seed: opts.Workload.Seed}, Loads: opts.Loads}
	for _, r := range reqs {
		rep.Workload.InputTokens += len(r.Prompt)
		rep.Workload.OutputTokens += r.MaxTokens
	}
	targets := opts.Targets
	var stats *poolWatch
	if len(targets) > 0 {
		rep.Mode = ModeEndpoint
	} else {
		rep.Mode = ModeInProcess
		rep.Budget, rep.BudgetSource = opts.Budget, opts.BudgetSource
		stats = &poolWatch{}
		eng, err := engine.New(m, engine.Options{Caches: opts.Caches, Budget: opts.Budget, MaxSeqs: opts.MaxSeqs, Chunk: opts.Chunk, BatchInvariant: opts.BatchInvariant, Workers: opts.Threads, Backend: opts.Backend, OnStep: stats.step})
		if err != nil {
			return nil, &EngineError{Err: err}
		}
		ectx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- eng.Run(ectx) }()
		defer func() { stop(); <-done }()
		if err := eng.WaitReady(ctx); err != nil {
			return nil, err
		}
		for _, name := range eng.Caches() {
			targets = append(targets, &EngineTarget{Engine: eng, Cache: name})
		}
	}
	if err := runLoads(ctx, rep, targets, reqs, stats, opts, progress); err != nil {
		return nil, err
	}
	if !opts.Goodput.IsZero() {
		if err := capacities(rep, opts); err != nil {
			return nil, err
		}
	}
	if len(opts.Depths) > 0 && rep.Mode == ModeInProcess {
		if err := decodeSweep(ctx, rep, m, opts, progress); err != nil {
			return nil, err
		}
	}
	rep.fill()
	return rep, nil
}

// runLoads runs every target at every load into rep.Caches.
func runLoads(ctx context.Context, rep *Report, targets []Target, reqs []Request, stats *poolWatch, opts Options, progress func(string, int, int)) error {
	total := 0
	for _, ld := range opts.Loads {
		total += len(targets) * (len(reqs) + ld.Warmups)
	}
	progress(StageLoad, 0, total)
	done := 0
	for _, t := range targets {
		name := t.Name()
		cr := CacheReport{Cache: name}
		for _, ld := range opts.Loads {
			if stats != nil {
				stats.reset(name)
			}
			base := done
			res, err := Run(ctx, t, reqs, ld, RunOptions{Seed: opts.Workload.Seed, Progress: func(d, _ int) {
				progress(StageLoad, base+d+ld.Warmups, total)
			}})
			done += len(reqs) + ld.Warmups
			if err != nil {
				return err
			}
			sum, err := Summarize(res, SummaryOptions{Percentiles: opts.Percentiles, Goodput: opts.Goodput})
			if err != nil {
				return err
			}
			pt := PointReport{Load: ld, Summary: sum, Result: res}
			if stats != nil {
				pt.Engine = stats.get(name)
			}
			cr.Points = append(cr.Points, pt)
		}
		rep.Caches = append(rep.Caches, cr)
	}
	return nil
}

// capacities sets each cache's SLO capacity over its points.
func capacities(rep *Report, opts Options) error {
	slo := SLO{TTFT: opts.Goodput.TTFT, TPOT: opts.Goodput.TPOT, E2EL: opts.Goodput.E2EL, Percentile: opts.SLOPercentile}
	for i := range rep.Caches {
		pts := make([]Point, len(rep.Caches[i].Points))
		for j, p := range rep.Caches[i].Points {
			pts[j] = Point{Load: p.Load, Result: p.Result}
		}
		c, err := Capacity(pts, slo)
		if err != nil {
			return err
		}
		rep.Caches[i].Capacity = &c
	}
	return nil
}

// decodeSweep runs DecodeDepth for every cache on a runner of its own.
func decodeSweep(ctx context.Context, rep *Report, m *runtime.Model, opts Options, progress func(string, int, int)) error {
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: opts.Threads})
	if err != nil {
		return err
	}
	defer r.Close()
	progress(StageDecode, 0, len(opts.Caches)*len(opts.Depths)*opts.DepthReps)
	for i, spec := range opts.Caches {
		pts, err := DecodeDepth(ctx, r, spec, opts.Depths, opts.DepthTokens, DepthOptions{Repetitions: opts.DepthReps, Seed: opts.Workload.Seed,
			Progress: func(d, t int) { progress(StageDecode, i*t+d, len(opts.Caches)*t) }})
		if err != nil {
			return err
		}
		rep.Caches[i].Decode = pts
	}
	return nil
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
			st.usage = append(st.usage, usageSample{t: s.Start.Add(s.Duration), usage: p.Usage(), running: p.Running, waiting: p.Waiting})
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
		t0 := st.usage[0].t
		for _, u := range st.usage {
			out.Usage = append(out.Usage, UsagePoint{Seconds: u.t.Sub(t0).Seconds(), Usage: u.usage, Running: u.running, Waiting: u.waiting})
		}
	}
	out.usage = nil
	return &out
}
