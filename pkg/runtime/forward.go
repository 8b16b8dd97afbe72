package runtime

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Logits selects which positions of an entry return logits.
type Logits int

// Logit selections.
const (
	LastLogits Logits = iota // the entry's last token
	AllLogits                // every token of the entry
	NoLogits                 // none (prefill only)
)

// Entry is one sequence's share of a batch: tokens appended at the end of the
// sequence in the cache.
type Entry struct {
	Seq    kvcache.SeqID
	Tokens []int
	Logits Logits
}

// Runner evaluates a model. It holds scratch buffers and is not safe for
// concurrent use; make one Runner per goroutine (they share the Model).
type Runner struct {
	m       *Model
	be      tensor.Backend
	workers par.Workers
	buf     buffers
	scratch sync.Pool
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Backend runs the dense compute; nil means the CPU backend.
	Backend tensor.Backend
	// Workers bounds the goroutines used for attention and the CPU backend
	// (0: GOMAXPROCS).
	Workers int
}

// NewRunner makes a runner for m.
func NewRunner(m *Model, opts RunnerOptions) *Runner {
	be := opts.Backend
	if be == nil {
		be = cpu.New(opts.Workers)
	}
	r := &Runner{m: m, be: be, workers: par.Workers(opts.Workers)}
	r.scratch.New = func() any { return new(kvcache.Scratch) }
	return r
}

// Model returns the runner's model.
func (r *Runner) Model() *Model { return r.m }

// NewCache makes a cache for this model in the given layout with room for
// tokens tokens over all sequences (rounded up to whole blocks per sequence:
// pass BlocksFor-based counts for several sequences).
func (m *Model) NewCache(l *kvcache.Layout, blocks int) (*kvcache.Cache, error) {
	if g := m.Geometry(); l.Geometry != g {
		return nil, fmt.Errorf("%w: cache layout %+v does not match model %+v", kvcache.ErrGeometry, l.Geometry, g)
	}
	opts := kvcache.Options{Blocks: blocks}
	if l.AnyPreRoPE() {
		opts.RoPE = m.ropeFunc(blocks * l.BlockTokens)
	}
	return kvcache.New(l, opts)
}

// ropeFunc returns the cache's RoPE function for pre-RoPE keys (see
// cpu.KeyRoPE), with tables for positions below maxPos.
func (m *Model) ropeFunc(maxPos int) func(rows []float32, pos0 int) {
	return cpu.NewKeyRoPE(m.HeadDim, m.invFreq, m.RopeNeoX, min(maxPos, 1<<22)).Rows
}

type buffers struct {
	x, xn, q, k, v, att, o, gate, up []float32
	kpre                             []float32 // keys before RoPE, for pre-RoPE cache layers
	cos, sin                         []float32
	logits, lx                       []float32
}

func (b *buffers) ensure(c *Config, nt int) {
	g := func(s *[]float32, n int) {
		if cap(*s) < n {
			*s = make([]float32, n)
		}
		*s = (*s)[:n]
	}
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	g(&b.x, nt*c.Dim)
	g(&b.xn, nt*c.Dim)
	g(&b.q, nt*qd)
	g(&b.k, nt*kvd)
	g(&b.v, nt*kvd)
	g(&b.att, nt*qd)
	g(&b.o, nt*c.Dim)
	g(&b.gate, nt*c.Hidden)
	g(&b.up, nt*c.Hidden)
	g(&b.cos, nt*c.RopeDim/2)
	g(&b.sin, nt*c.RopeDim/2)
}

// Forward appends the entries' tokens to their sequences in cache, runs the
// model, and returns logits per entry: Vocab values for LastLogits,
// len(Tokens)·Vocab for AllLogits, nil for NoLogits. The returned slices are
// fresh allocations owned by the caller.
func (r *Runner) Forward(ctx context.Context, cache *kvcache.Cache, batch []Entry) ([][]float32, error) {
	m, c := r.m, &r.m.Config
	nt := 0
	seen := make(map[kvcache.SeqID]bool, len(batch))
	for _, e := range batch {
		if seen[e.Seq] {
			return nil, fmt.Errorf("runtime: sequence %d appears twice in one batch", e.Seq)
		}
		seen[e.Seq] = true
		if !cache.Has(e.Seq) {
			return nil, fmt.Errorf("%w: %d", kvcache.ErrNoSequence, e.Seq)
		}
		if len(e.Tokens) == 0 {
			return nil, fmt.Errorf("runtime: empty entry for sequence %d", e.Seq)
		}
		for _, t := range e.Tokens {
			if t < 0 || t >= c.Vocab {
				return nil, fmt.Errorf("runtime: token id %d outside vocabulary of %d", t, c.Vocab)
			}
		}
		nt += len(e.Tokens)
	}
	if nt == 0 {
		return nil, nil
	}
	// Reserve room first so that a full cache fails before any state changes.
	type span struct{ start, pos int }
	spans := make([]span, len(batch))
	need := 0
	for _, e := range batch {
		need += cache.Layout().BlocksFor(cache.Len(e.Seq)+len(e.Tokens)) - cache.Layout().BlocksFor(cache.Len(e.Seq))
	}
	if need > cache.FreeBlocks() {
		return nil, &kvcache.FullError{Seq: batch[0].Seq, Needed: need, Free: cache.FreeBlocks(), Total: cache.Stats().Blocks, BlockTokens: cache.Layout().BlockTokens}
	}
	start := 0
	for i, e := range batch {
		pos, err := cache.Begin(e.Seq, len(e.Tokens))
		if err != nil {
			return nil, err
		}
		spans[i] = span{start, pos}
		start += len(e.Tokens)
	}

	b := &r.buf
	b.ensure(c, nt)
	ids := make([]int, 0, nt)
	half := c.RopeDim / 2
	for i, e := range batch {
		ids = append(ids, e.Tokens...)
		for j := range e.Tokens {
			pos := float64(spans[i].pos + j)
			t := spans[i].start + j
			for k := 0; k < half; k++ {
				s, co := math.Sincos(pos * m.invFreq[k])
				b.cos[t*half+k], b.sin[t*half+k] = float32(co), float32(s)
			}
		}
	}
	be := r.be
	be.Embed(b.x, m.Embed, ids)
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	for li := range m.Layers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("runtime: forward stopped before layer %d: %w", li, err)
		}
		l := &m.Layers[li]
		be.RMSNorm(b.xn, b.x, nt, l.AttnNorm, c.RMSEps)
		be.MatMul(b.q, b.xn, nt, l.Wq)
		be.MatMul(b.k, b.xn, nt, l.Wk)
		be.MatMul(b.v, b.xn, nt, l.Wv)
		addBias(b.q, l.Bq)
		addBias(b.k, l.Bk)
		addBias(b.v, l.Bv)
		if l.QNorm != nil {
			be.RMSNorm(b.q, b.q, nt*c.Heads, l.QNorm, c.RMSEps)
		}
		if l.KNorm != nil {
			be.RMSNorm(b.k, b.k, nt*c.KVHeads, l.KNorm, c.RMSEps)
		}
		preRoPE := cache.Layout().PreRoPE(li)
		if preRoPE {
			b.kpre = append(b.kpre[:0], b.k...)
		}
		be.RoPE(b.q, nt, c.Heads, c.HeadDim, b.cos, b.sin, c.RopeNeoX)
		be.RoPE(b.k, nt, c.KVHeads, c.HeadDim, b.cos, b.sin, c.RopeNeoX)
		kput := b.k
		if preRoPE {
			kput = b.kpre
		}
		cache.Prime(li, kput[:nt*kvd], b.v[:nt*kvd])
		// Store K/V: sequences in parallel, tokens of a sequence in order.
		r.workers.For(len(batch), 1, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				e := batch[i]
				for j := range e.Tokens {
					t := spans[i].start + j
					cache.Put(li, e.Seq, spans[i].pos+j, kput[t*kvd:(t+1)*kvd], b.v[t*kvd:(t+1)*kvd])
				}
			}
		})
		// Attention: one task per (token, KV head).
		tasks := nt * c.KVHeads
		seqOf := func(t int) int {
			for i := range spans {
				if t < spans[i].start+len(batch[i].Tokens) {
					return i
				}
			}
			panic("unreachable")
		}
		r.workers.For(tasks, 1, max(1, 1<<14/(c.HeadDim*cache.Len(batch[0].Seq))), func(lo, hi int) {
			scr := r.scratch.Get().(*kvcache.Scratch)
			defer r.scratch.Put(scr)
			for task := lo; task < hi; task++ {
				t, h := task/c.KVHeads, task%c.KVHeads
				i := seqOf(t)
				pos := spans[i].pos + t - spans[i].start
				from := 0
				if c.SlidingWindow > 0 {
					from = max(0, pos+1-c.SlidingWindow)
				}
				cache.AttendHead(b.att[t*qd:(t+1)*qd], b.q[t*qd:(t+1)*qd], c.Heads, li, batch[i].Seq, h, from, pos+1, scale, scr)
			}
		})
		be.MatMul(b.o, b.att, nt, l.Wo)
		be.Add(b.x, b.o)
		be.RMSNorm(b.xn, b.x, nt, l.FFNNorm, c.RMSEps)
		be.MatMul(b.gate, b.xn, nt, l.Gate)
		be.MatMul(b.up, b.xn, nt, l.Up)
		be.SwiGLU(b.gate, b.up)
		be.MatMul(b.o, b.gate, nt, l.Down)
		be.Add(b.x, b.o)
	}
	// Logits for the selected rows.
	var rows []int
	for i, e := range batch {
		switch e.Logits {
		case LastLogits:
			rows = append(rows, spans[i].start+len(e.Tokens)-1)
		case AllLogits:
			for j := range e.Tokens {
				rows = append(rows, spans[i].start+j)
			}
		}
	}
	out := make([][]float32, len(batch))
	if len(rows) == 0 {
		return out, nil
	}
	if cap(b.lx) < len(rows)*c.Dim {
		b.lx = make([]float32, len(rows)*c.Dim)
	}
	lx := b.lx[:len(rows)*c.Dim]
	for i, t := range rows {
		copy(lx[i*c.Dim:(i+1)*c.Dim], b.x[t*c.Dim:(t+1)*c.Dim])
	}
	be.RMSNorm(lx, lx, len(rows), m.Norm, c.RMSEps)
	logits := make([]float32, len(rows)*c.Vocab)
	be.MatMul(logits, lx, len(rows), m.Output)
	k := 0
	for i, e := range batch {
		switch e.Logits {
		case LastLogits:
			out[i] = logits[k*c.Vocab : (k+1)*c.Vocab : (k+1)*c.Vocab]
			k++
		case AllLogits:
			n := len(e.Tokens)
			out[i] = logits[k*c.Vocab : (k+n)*c.Vocab : (k+n)*c.Vocab]
			k += n
		}
	}
	return out, nil
}

func addBias(x, bias []float32) {
	if bias == nil {
		return
	}
	n := len(bias)
	for t := 0; t < len(x)/n; t++ {
		row := x[t*n : (t+1)*n]
		for i, v := range bias {
			row[i] += v
		}
	}
}

// ForwardEach steps several caches over the same batch (same sequence ids
// and tokens), sharing the model's weights: an fp16 baseline and candidate
// formats, side by side. It returns Forward's logits per cache.
func (r *Runner) ForwardEach(ctx context.Context, caches []*kvcache.Cache, batch []Entry) ([][][]float32, error) {
	out := make([][][]float32, len(caches))
	for i, c := range caches {
		logits, err := r.Forward(ctx, c, batch)
		if err != nil {
			return out, fmt.Errorf("cache %d (%s): %w", i, c.Layout().Spec.String(), err)
		}
		out[i] = logits
	}
	return out, nil
}
