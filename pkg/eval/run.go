package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Options configure Run.
type Options struct {
	// Specs are the caches; the first is the baseline.
	Specs []quant.Spec
	// Texts are scored teacher-forced with TextOptions (none: skipped).
	Texts    []Text
	TextOpts TextOptions
	// Suites are the generation tasks.
	Suites []Suite
	// Speed measures each cache's decode speed after a prompt of
	// SpeedDepth tokens (default 512), SpeedTokens decode steps (default
	// 32) a round, SpeedRounds rounds (default 3).
	Speed                                bool
	SpeedDepth, SpeedTokens, SpeedRounds int
	// Gates decide the verdicts.
	Gates []Gate
	// Refusal detects refusals for suites without their own detector
	// (nil: DefaultRefusalPhrases in prefix mode).
	Refusal *RefusalDetector
	// Workers evaluates tasks in parallel, each with its own single-thread
	// runner (0: all CPUs).
	Workers int
	// Backend runs the model (nil: a CPU backend per runner). A device
	// backend is shared by every runner: it must be safe for concurrent
	// use (gpu.Device is).
	Backend backend.Backend
	// Store, when set, keeps every scored item and text chunk and skips
	// those it already holds (resume).
	Store *Store
	// Progress, when set, is called as work completes, one call at a time:
	// stage "text", "tasks" or "speed", with counts.
	Progress func(stage string, done, total int)
	// LogSamples keeps every item under every cache in Report.Samples.
	LogSamples bool
	// ExactPrefill makes every prompt attend to its own exact K/V
	// (GenItem.Exact); the texts take TextOpts.Exact.
	ExactPrefill bool
	// F32Activations multiplies quantized weights with float32
	// activations on the default CPU backend
	// (runtime.RunnerOptions.F32Activations).
	F32Activations bool
	// BootstrapIters is the number of bootstrap resamples (default 2000).
	BootstrapIters int
	Seed           uint64
}

// Run evaluates every cache of opts on m: it checks every spec first (a
// spec the model or backend cannot run is an error before any work), then
// scores the texts, runs the suites, measures speed, applies the gates.
func Run(ctx context.Context, m *runtime.Model, opts Options) (*Report, error) {
	if len(opts.Specs) == 0 {
		return nil, fmt.Errorf("%w: no caches to evaluate", ErrOptions)
	}
	layouts := make([]*kvcache.Layout, len(opts.Specs))
	for i, s := range opts.Specs {
		l, err := kvcache.NewLayout(m.Geometry(), s, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: cache %s: %w", ErrOptions, s.String(), err)
		}
		layouts[i] = l
	}
	// The texts and the speed run on one runner with every worker (its
	// matrix products split across them); the tasks run on one
	// single-thread runner per worker. Each runner gives every cache of a
	// step the bits it has alone (runtime.RunnerOptions.AsAlone): the
	// caches side by side score as each would in a run of its own.
	probe, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: opts.Workers, AsAlone: true, F32Activations: opts.F32Activations})
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	for i, l := range layouts {
		// Make one cache of each spec: the backend's support, pre-RoPE
		// keys, scale files of the right shape are checked here.
		if _, err := probe.NewCache(l, kvcache.Options{Blocks: 1}); err != nil {
			return nil, fmt.Errorf("%w: cache %s: %w", ErrOptions, opts.Specs[i].String(), err)
		}
	}
	if err := prepare(m, opts.Suites); err != nil {
		return nil, err
	}
	rep := &Report{Schema: Schema}
	for i, l := range layouts {
		rep.Caches = append(rep.Caches, cacheInfo(opts.Specs[i], l, i == 0, layouts[0], m.MaxSeqLen()))
	}
	progress := func(stage string) func(int, int) {
		if opts.Progress == nil {
			return nil
		}
		return func(d, t int) { opts.Progress(stage, d, t) }
	}
	if len(opts.Texts) > 0 {
		to := opts.TextOpts
		to.Progress = progress("text")
		to.Store = opts.Store
		res, err := TeacherForced(ctx, probe, opts.Specs, opts.Texts, to)
		if err != nil {
			return nil, err
		}
		rep.Text = res
	}
	if len(opts.Suites) > 0 {
		names := make([]string, len(opts.Specs))
		for i, s := range opts.Specs {
			names[i] = s.String()
		}
		local := func() (generator, func(), error) {
			r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: 1, AsAlone: true, F32Activations: opts.F32Activations})
			if err != nil {
				return nil, nil, err
			}
			gen := func(ctx context.Context, t *Task, gi GenItem) ([]GenOutput, error) {
				gi.Exact = opts.ExactPrefill
				if t.mc != nil {
					return scoreMC(ctx, r, layouts, t.mc, gi.Exact)
				}
				return Generate(ctx, r, layouts, gi)
			}
			return gen, r.Close, nil
		}
		if err := runSuites(ctx, m, names, local, opts, rep); err != nil {
			return nil, err
		}
	}
	if opts.Speed {
		sp, err := measureSpeed(ctx, probe, layouts, opts, progress("speed"))
		if err != nil {
			return nil, err
		}
		rep.Speed = sp
	}
	applyGates(rep, opts.Gates)
	return rep, nil
}

// cacheInfo is a spec's memory from its layout.
func cacheInfo(s quant.Spec, l *kvcache.Layout, baseline bool, base *kvcache.Layout, context int) CacheInfo {
	perTok := float64(l.BlockBytes) / float64(l.BlockTokens)
	values := float64(2 * len(l.Layers) * l.KVHeads * l.HeadDim)
	var ctxTokens int
	var ctxBytes, ctxFull int64
	if l.Sliding() {
		// Window-only storage: what one request of the model's context
		// holds at most, fed in the engine's chunks, and what it would
		// hold if the sliding layers kept every position.
		ctxTokens = context
		ctxBytes = l.SeqCostChunked(context, kvcache.DefaultChunk) + l.StateBytes
		ctxFull = int64(l.BlocksFor(context))*l.BlockBytes + l.SeqBytes + l.StateBytes
	}
	return CacheInfo{
		ContextTokens: ctxTokens, ContextBytes: ctxBytes, ContextBytesFull: ctxFull,
		Spec: s.String(), Baseline: baseline,
		BytesPerToken: perTok, RequestBytes: l.SeqBytes, StateBytes: l.StateBytes,
		BitsPerValue: perTok * 8 / values,
		Compression:  float64(base.BlockBytes) / float64(base.BlockTokens) / perTok,
	}
}

// itemResult is one task's outputs and scores under every cache.
type itemResult struct {
	outputs []GenOutput
	scores  [][]Score // [metric][cache]
}

// generator decodes one task under every cache (the baseline first).
type generator func(ctx context.Context, t *Task, gi GenItem) ([]GenOutput, error)

// runSuites decodes every task under the caches names with generators
// made by newGen (one per worker, released by the func it returns) and
// aggregates the rows.
func runSuites(ctx context.Context, m *runtime.Model, names []string, newGen func() (generator, func(), error), opts Options, rep *Report) error {
	type ref struct{ s, t int }
	var items []ref
	for si, s := range opts.Suites {
		for ti := range s.Tasks {
			items = append(items, ref{si, ti})
		}
	}
	results := make([]itemResult, len(items))
	var mu sync.Mutex // guards done, firstErr, the store and Progress
	var firstErr error
	done := 0
	if opts.Progress != nil {
		opts.Progress("tasks", 0, len(items)) // the stage starts: a reporter can time it
	}
	w := par.Workers(opts.Workers)
	w.For(len(items), 1, 1, func(lo, hi int) {
		gen, release, err := newGen()
		if err != nil {
			mu.Lock()
			firstErr = cmp(firstErr, err)
			mu.Unlock()
			return
		}
		defer release()
		for k := lo; k < hi; k++ {
			if ctx.Err() != nil {
				return
			}
			suite := &opts.Suites[items[k].s]
			task := &suite.Tasks[items[k].t]
			key := taskKey(task)
			var outs []GenOutput
			if opts.Store != nil {
				mu.Lock()
				outs = opts.Store.Item(key)
				mu.Unlock()
			}
			if outs == nil {
				outs, err = gen(ctx, task, genItem(m, task))
				if err != nil {
					mu.Lock()
					if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						firstErr = cmp(firstErr, fmt.Errorf("eval: %s item %d: %w", task.Suite, task.Index, err))
					}
					mu.Unlock()
					return
				}
				if opts.Store != nil {
					mu.Lock()
					err := opts.Store.PutItem(key, outs)
					mu.Unlock()
					if err != nil {
						mu.Lock()
						firstErr = cmp(firstErr, err)
						mu.Unlock()
						return
					}
				}
			}
			res, err := scoreItem(suite, task, outs, opts.Refusal)
			if err != nil {
				mu.Lock()
				firstErr = cmp(firstErr, fmt.Errorf("eval: %s item %d: %w", task.Suite, task.Index, err))
				mu.Unlock()
				return
			}
			results[k] = res
			mu.Lock()
			done++
			if opts.Progress != nil {
				opts.Progress("tasks", done, len(items))
			}
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("eval: stopped after %d of %d items: %w", done, len(items), err)
	}
	if firstErr != nil {
		return firstErr
	}
	// One row per (task group, metric), in the order they first appear.
	type rowKey struct {
		label  string
		metric Metric
	}
	type row struct {
		suite  *Suite
		lower  bool
		values [][]float64 // [cache][item]
		pass   [][]bool
	}
	rows := map[rowKey]*row{}
	var order []rowKey
	var samples []Sample
	addRow := func(rk rowKey, suite *Suite, task *Task, scores []Score) {
		r := rows[rk]
		if r == nil {
			r = &row{suite: suite, lower: task.Lower, values: make([][]float64, len(names)), pass: make([][]bool, len(names))}
			rows[rk] = r
			order = append(order, rk)
		}
		for c := range names {
			r.values[c] = append(r.values[c], scores[c].Value)
			r.pass[c] = append(r.pass[c], scores[c].Pass)
		}
	}
	// One row per task group and metric, then the suite's group rows
	// (Task.Groups) in its Groups order, then in order of appearance;
	// suite by suite (items are in suite order).
	for si := range opts.Suites {
		suite := &opts.Suites[si]
		for k, it := range items {
			if it.s != si {
				continue
			}
			task := &suite.Tasks[it.t]
			for mi, metric := range task.Metrics {
				label := task.Suite
				if l, ok := suite.Labels[metric]; ok {
					label = l
				}
				addRow(rowKey{label, metric}, suite, task, results[k].scores[mi])
				// Every item's samples are kept for the flips, which need
				// both caches' outputs; Report.Samples only with LogSamples.
				for c, o := range results[k].outputs {
					sc := results[k].scores[mi][c]
					samples = append(samples, Sample{Suite: label, Index: task.Index, Cache: names[c], Prompt: task.Prompt, Reference: task.Reference,
						Output: o.Text, Metric: string(metric), Value: sc.Value, Pass: sc.Pass, Diverge: o.Diverge})
				}
			}
		}
		labels := slices.Clone(suite.Groups)
		for _, t := range suite.Tasks {
			for _, g := range t.Groups {
				if !slices.Contains(labels, g) {
					labels = append(labels, g)
				}
			}
		}
		for _, g := range labels {
			// A group of tasks scored differently (RULER's average over
			// string-match-all and -part tasks) is one "mean" row.
			var first []Metric
			mixed := false
			for _, t := range suite.Tasks {
				if slices.Contains(t.Groups, g) {
					if first == nil {
						first = t.Metrics
					}
					mixed = mixed || !slices.Equal(first, t.Metrics)
				}
			}
			for k, it := range items {
				if it.s != si {
					continue
				}
				task := &suite.Tasks[it.t]
				if !slices.Contains(task.Groups, g) {
					continue
				}
				for mi, metric := range task.Metrics {
					if mixed {
						metric = MetricMean
					}
					addRow(rowKey{g, metric}, suite, task, results[k].scores[mi])
				}
			}
		}
	}
	rep.Flips = append(rep.Flips, Flips(samples, names[0])...)
	if opts.LogSamples {
		markFlips(samples, names[0])
		rep.Samples = append(rep.Samples, samples...)
	}
	iters := opts.BootstrapIters
	if iters == 0 {
		iters = 2000
	}
	for _, rk := range order {
		r := rows[rk]
		sr := SuiteResult{Name: rk.label, Kind: r.suite.Kind, Metric: string(rk.metric), N: len(r.values[0]), HigherIsBetter: !r.lower}
		for c := range names {
			sr.Caches = append(sr.Caches, suiteScore(names[c], r.values[c], r.pass[c], r.values[0], r.pass[0], iters, opts.Seed))
		}
		rep.Suites = append(rep.Suites, sr)
	}
	var cells []gridItem
	for k, it := range items {
		suite := &opts.Suites[it.s]
		task := &suite.Tasks[it.t]
		if suite.Name != SuiteGrid || len(results[k].scores) == 0 {
			continue
		}
		n, err1 := strconv.Atoi(task.Meta["context"])
		d, err2 := strconv.ParseFloat(task.Meta["depth"], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		gi := gridItem{context: n, depth: d}
		for _, sc := range results[k].scores[0] {
			gi.pass = append(gi.pass, sc.Pass)
		}
		cells = append(cells, gi)
	}
	rep.Grid = grid(cells, names)
	return nil
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// taskKey names a task in the store.
func taskKey(t *Task) string { return t.Suite + "#" + strconv.Itoa(t.Index) }

// genItem is a task's generation settings.
func genItem(m *runtime.Model, t *Task) GenItem {
	prompt := t.ids
	if prompt == nil {
		prompt = m.Tokenizer.Encode(t.Prompt, true)
	}
	n := t.MaxTokens
	if n <= 0 {
		n = max(16, len(m.Tokenizer.Encode(t.Reference, false))+8)
		if t.Line {
			n = len(m.Tokenizer.Encode(t.Reference, false)) + 8
		}
	}
	return GenItem{Prompt: prompt, MaxTokens: n, Line: t.Line, Until: t.Until}
}

// scoreItem scores every cache's output with every metric of the task.
func scoreItem(s *Suite, t *Task, outs []GenOutput, refusal *RefusalDetector) (itemResult, error) {
	if t.mc != nil {
		return t.mc.scoreItem(t.Metrics, outs)
	}
	so := ScoreOptions{Refusal: refusal, Schema: t.Schema, Classes: t.Classes, FirstLine: t.FirstLine}
	if s.Refusal != nil {
		so.Refusal = s.Refusal
	}
	res := itemResult{outputs: outs}
	for _, metric := range t.Metrics {
		row := make([]Score, len(outs))
		for c, o := range outs {
			sc, err := ScoreOutput(metric, o.Text, t.Reference, so)
			if err != nil {
				return res, err
			}
			row[c] = sc
		}
		res.scores = append(res.scores, row)
	}
	return res, nil
}

// suiteScore compares one cache's item values with the baseline's.
func suiteScore(cache string, v []float64, pass []bool, base []float64, basePass []bool, iters int, seed uint64) SuiteScore {
	n := len(v)
	ss := SuiteScore{Cache: cache}
	var sum float64
	for _, x := range v {
		sum += x
	}
	ss.Score = 100 * sum / float64(max(1, n))
	ss.Stderr = 100 * StdErrRate(sum/float64(max(1, n)), n)
	for i := range v {
		switch {
		case basePass[i] && !pass[i]:
			ss.PassToFail++
		case !basePass[i] && pass[i]:
			ss.FailToPass++
		}
	}
	ss.McNemarP = McNemarExact(ss.PassToFail, ss.FailToPass)
	mean, lo, hi := BootstrapPairedDiff(base, v, iters, seed, 0.95)
	ss.Diff, ss.DiffLo, ss.DiffHi = 100*mean, 100*lo, 100*hi
	return ss
}

// gridItem is a grid task's cell and pass under each cache.
type gridItem struct {
	context int
	depth   float64
	pass    []bool
}

// grid aggregates the long-context suite into its context × depth table.
func grid(items []gridItem, names []string) *GridResult {
	if len(items) == 0 {
		return nil
	}
	var ctxs []int
	var depths []float64
	for _, it := range items {
		if !slices.Contains(ctxs, it.context) {
			ctxs = append(ctxs, it.context)
		}
		if !slices.Contains(depths, it.depth) {
			depths = append(depths, it.depth)
		}
	}
	sort.Ints(ctxs)
	sort.Float64s(depths)
	g := &GridResult{Contexts: ctxs, Depths: depths}
	for c, name := range names {
		gc := GridCache{Cache: name, Accuracy: make([][]float64, len(ctxs))}
		count := make([][]int, len(ctxs))
		for i := range ctxs {
			gc.Accuracy[i] = make([]float64, len(depths))
			count[i] = make([]int, len(depths))
		}
		for _, it := range items {
			i, j := slices.Index(ctxs, it.context), slices.Index(depths, it.depth)
			count[i][j]++
			if it.pass[c] {
				gc.Accuracy[i][j]++
			}
		}
		for i := range ctxs {
			for j := range depths {
				if count[i][j] > 0 {
					gc.Accuracy[i][j] = 100 * gc.Accuracy[i][j] / float64(count[i][j])
					gc.N = count[i][j]
				}
			}
		}
		g.Caches = append(g.Caches, gc)
	}
	return g
}

// measureSpeed times single-sequence decode per cache in interleaved
// rounds and reports each cache's median time per token relative to the
// baseline's in the same round.
func measureSpeed(ctx context.Context, r *runtime.Runner, layouts []*kvcache.Layout, opts Options, progress func(int, int)) ([]SpeedResult, error) {
	m := r.Model()
	depth, steps, rounds := opts.SpeedDepth, opts.SpeedTokens, opts.SpeedRounds
	if depth <= 0 {
		depth = 512
	}
	if steps <= 0 {
		steps = 32
	}
	if rounds <= 0 {
		rounds = 3
	}
	if m.ContextLen > 0 {
		depth = min(depth, m.ContextLen-steps-1)
	}
	if depth < 1 {
		return nil, fmt.Errorf("%w: the model's context of %d tokens is too short to time decoding", ErrOptions, m.ContextLen)
	}
	prompt := make([]int, depth)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % m.Vocab
	}
	per := make([][]float64, len(layouts)) // seconds per token, per round
	for round := 0; round < rounds; round++ {
		for i, l := range layouts {
			c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(depth + steps)})
			if err != nil {
				return nil, err
			}
			_ = c.AddSeq(0)
			if _, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: prompt, Logits: runtime.NoLogits}}); err != nil {
				return nil, err
			}
			t0 := time.Now()
			for s := 0; s < steps; s++ {
				if _, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{(s*31 + 7) % m.Vocab}}}); err != nil {
					return nil, err
				}
			}
			per[i] = append(per[i], time.Since(t0).Seconds()/float64(steps))
			if progress != nil {
				progress(round*len(layouts)+i+1, rounds*len(layouts))
			}
		}
	}
	out := make([]SpeedResult, len(layouts))
	for i := range layouts {
		rel := make([]float64, rounds)
		for k := range rel {
			rel[k] = per[i][k] / per[0][k]
		}
		out[i] = SpeedResult{Cache: opts.Specs[i].String(), TokensPerSec: 1 / median(per[i]), Relative: median(rel), Depth: depth}
	}
	return out, nil
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	if len(y) == 0 {
		return math.NaN()
	}
	return y[len(y)/2]
}
