package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// DepthOptions control DecodeDepth.
type DepthOptions struct {
	// Repetitions per depth; 0 means 3.
	Repetitions int
	// PrefillChunk is the most tokens of the untimed depth prefill sent in
	// one forward step; 0 means 512 (llama-bench's default micro-batch).
	PrefillChunk int
	// NoWarmup skips the one-token decode run before the first measurement
	// (llama-bench's --no-warmup).
	NoWarmup bool
	// Seed seeds the random token ids of prefills and decodes.
	Seed uint64
	// Progress, when set, is called after each repetition with the number
	// done and the number to do.
	Progress func(done, total int)
}

// Defaults of DepthOptions.
const (
	DefaultRepetitions  = 3
	DefaultPrefillChunk = 512
)

// DepthPoint is the decode speed at one depth, with llama-bench's JSON
// names where it has them (n_depth, n_gen, samples_ns, samples_ts,
// avg_ts, stddev_ts).
type DepthPoint struct {
	Depth  int `json:"n_depth"`
	Tokens int `json:"n_gen"`
	// Skipped says why the depth was not measured; "" when it was.
	Skipped string `json:"skipped,omitempty"`
	// Samples is the time of the Tokens decode steps, per repetition, and
	// TokensPerS is Tokens over each.
	Samples    []time.Duration `json:"samples_ns"`
	TokensPerS []float64       `json:"samples_ts"`
	// Median, Mean and Std (sample standard deviation, as llama-bench's
	// stddev_ts) summarize TokensPerS.
	Median float64 `json:"median_ts"`
	Mean   float64 `json:"avg_ts"`
	Std    float64 `json:"stddev_ts"`
	// Prefill is the last repetition's (untimed) depth prefill.
	Prefill time.Duration `json:"prefill_ns"`
	// KVBytes is the cache memory holding the sequence's Depth+Tokens
	// tokens (kvcache.Stats.InUse.Total).
	KVBytes int64 `json:"kv_bytes"`
}

// DecodeDepth measures, like llama-bench's "tg n @ d depth", the decode
// speed of one sequence in a cache of spec: for each depth, in each
// repetition, a fresh sequence is prefilled with depth random token ids
// (untimed, in chunks of PrefillChunk), then n single-token forward steps
// of random ids (the logits computed, no sampling) are timed. Depths for
// which depth+n exceeds the model's context are not run and say so in
// Skipped. One cache, sized for the largest depth run, serves every
// depth. Timings are wall-clock measurements for the caller to report.
// Errors in the options wrap ErrOptions; when ctx ends DecodeDepth
// returns the points with what was measured and the error.
func DecodeDepth(ctx context.Context, r *runtime.Runner, spec quant.Spec, depths []int, n int, opts DepthOptions) ([]DepthPoint, error) {
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: no runner", ErrOptions)
	case n < 1:
		return nil, fmt.Errorf("%w: %d decode tokens", ErrOptions, n)
	case len(depths) == 0:
		return nil, fmt.Errorf("%w: no depths", ErrOptions)
	case opts.Repetitions < 0 || opts.PrefillChunk < 0:
		return nil, fmt.Errorf("%w: %d repetitions, prefill chunk %d", ErrOptions, opts.Repetitions, opts.PrefillChunk)
	}
	for _, d := range depths {
		if d < 0 {
			return nil, fmt.Errorf("%w: depth %d", ErrOptions, d)
		}
	}
	reps := opts.Repetitions
	if reps == 0 {
		reps = DefaultRepetitions
	}
	chunk := opts.PrefillChunk
	if chunk == 0 {
		chunk = DefaultPrefillChunk
	}
	m := r.Model()
	points := make([]DepthPoint, len(depths))
	most, todo := 0, 0
	for i, d := range depths {
		points[i] = DepthPoint{Depth: d, Tokens: n}
		if ctxLen := m.ContextLen; ctxLen > 0 && d+n > ctxLen {
			points[i].Skipped = fmt.Sprintf("depth %d + %d tokens exceeds the model's context of %d", d, n, ctxLen)
			continue
		}
		most = max(most, d+n)
		todo += reps
	}
	if todo == 0 {
		return points, nil
	}
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		return points, fmt.Errorf("bench: cache %s: %w", spec.String(), err)
	}
	cache, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(most)})
	if err != nil {
		return points, fmt.Errorf("bench: cache %s: %w", spec.String(), err)
	}
	d := depthRun{r: r, cache: cache, rng: rand.New(rand.NewPCG(opts.Seed, streamDepth)), vocab: m.Vocab, chunk: chunk}
	if !opts.NoWarmup {
		if _, _, err := d.run(ctx, 0, 1); err != nil {
			return points, fmt.Errorf("bench: warmup: %w", err)
		}
	}
	done := 0
	for i := range points {
		p := &points[i]
		if p.Skipped != "" {
			continue
		}
		for rep := range reps {
			prefill, decode, err := d.run(ctx, p.Depth, n)
			if err != nil {
				return points, fmt.Errorf("bench: depth %d, repetition %d of %d: %w", p.Depth, rep+1, reps, err)
			}
			p.Prefill = prefill
			p.Samples = append(p.Samples, decode)
			p.TokensPerS = append(p.TokensPerS, float64(n)/max(decode.Seconds(), 1e-9))
			done++
			if opts.Progress != nil {
				opts.Progress(done, todo)
			}
		}
		p.KVBytes = cache.Stats().InUse.Total
		p.Median = percentile(sortedCopy(p.TokensPerS), 50)
		p.Mean = mean(p.TokensPerS)
		p.Std = stdSample(p.TokensPerS)
	}
	return points, nil
}

// depthRun is DecodeDepth's state: one cache, reused by every run.
type depthRun struct {
	r     *runtime.Runner
	cache *kvcache.Cache
	rng   *rand.Rand
	vocab int
	chunk int
}

const depthSeq kvcache.SeqID = 0

func discardLogits(int, int, []float32) error { return nil }

// run prefills a fresh sequence with depth random ids, then times steps
// single-token decode steps. The sequence stays in the cache (for its
// Stats) until the next run.
func (d *depthRun) run(ctx context.Context, depth, steps int) (prefill, decode time.Duration, err error) {
	if d.cache.Has(depthSeq) {
		if err := d.cache.Remove(depthSeq); err != nil {
			return 0, 0, err
		}
	}
	if err := d.cache.AddSeq(depthSeq); err != nil {
		return 0, 0, err
	}
	ids := make([]int, depth+steps)
	for i := range ids {
		ids[i] = d.rng.IntN(d.vocab)
	}
	t0 := time.Now()
	for at := 0; at < depth; at += d.chunk {
		e := runtime.Entry{Cache: d.cache, Seq: depthSeq, Tokens: ids[at:min(depth, at+d.chunk)], Logits: runtime.NoLogits}
		if err := d.r.Stream(ctx, []runtime.Entry{e}, nil); err != nil {
			return 0, 0, fmt.Errorf("prefill at %d: %w", at, err)
		}
	}
	prefill = time.Since(t0)
	t1 := time.Now()
	for i := range steps {
		e := runtime.Entry{Cache: d.cache, Seq: depthSeq, Tokens: ids[depth+i : depth+i+1]}
		if err := d.r.Stream(ctx, []runtime.Entry{e}, discardLogits); err != nil {
			return prefill, 0, fmt.Errorf("decode step %d: %w", i, err)
		}
	}
	return prefill, time.Since(t1), nil
}
