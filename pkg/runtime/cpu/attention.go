package cpu

import (
	"math"
	"sync"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Attention on packed tiles. A task is a block of consecutive query tokens
// of one sequence and one KV head: the scores of all its query rows (the
// block's tokens × the KV head's query heads) are computed over every
// position any of them sees with one codec call per run, so that each
// packed K/V tile is decoded once per block of queries, not once per
// query (prefill), and once per token in decode; each query row then takes
// the softmax over its own causal range, and the values are accumulated
// with weights zero outside it.

// maxQueryRows bounds a task's query rows (tokens × heads per KV head);
// the codecs' fused kernels keep up to 64 query rows on the stack.
const maxQueryRows = 64

// maxScoreFloats bounds a task's score matrix (query rows × positions),
// 4 MiB: at long contexts blocks get fewer tokens.
const maxScoreFloats = 1 << 20

// Scratch is one task's working memory.
type Scratch struct {
	scores []float32
	acc    []float32
	q      []float32 // gathered queries
	qr     []float32 // rotated queries (quant.Rotator)
	racc   []float32 // rotated value sums
	rows   []float32 // decoded pre-RoPE key rows
	exact  []float32 // an Exact step's rows of one head
}

var scratchPool = sync.Pool{New: func() any { return new(Scratch) }}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// task is a block [t0, t1) of the tokens of sequence seq and KV head h.
type task struct {
	seq, t0, t1, h int
}

// AttentionSinks implements backend.Sinks.
func (b *Backend) AttentionSinks() {}

// Attention implements backend.Backend.
func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a backend.AttnParams) {
	kv.(*Storage).attend(host(dst), host(q), host(k), host(v), layer, p, a, b.workers, b.done)
}

// Attend is Attention on host rows, on workers goroutines: k and v are the
// step's keys (after RoPE) and values, read for Exact steps. Calls on one
// storage must not run concurrently (a cache runs one step at a time).
func (s *Storage) Attend(dst, q, k, v []float32, layer int, p *kvcache.Plan, a backend.AttnParams, workers par.Workers) {
	s.attend(dst, q, k, v, layer, p, a, workers, nil)
}

// attend is Attend that, once done is closed, skips the tasks not yet
// begun (a task is at most maxScoreFloats scores: milliseconds).
func (s *Storage) attend(dst, q, k, v []float32, layer int, p *kvcache.Plan, a backend.AttnParams, workers par.Workers, done <-chan struct{}) {
	kvh := s.l.KVHeads
	nq := a.Heads / kvh
	tasks := s.tasks[:0]
	work := 0 // query-position pairs over all tasks
	rows := maxQueryRows
	if s.queryRows > 0 {
		rows = s.queryRows
	}
	for i, st := range p.Seqs {
		to := st.Pos + st.N
		qb := max(1, min(st.N, rows/nq, maxScoreFloats/(nq*to)))
		for t0 := 0; t0 < st.N; t0 += qb {
			t1 := min(st.N, t0+qb)
			for h := 0; h < kvh; h++ {
				tasks = append(tasks, task{seq: i, t0: t0, t1: t1, h: h})
			}
			work += kvh * (t1 - t0) * (st.Pos + t1)
		}
	}
	s.tasks = tasks
	// As many tasks per goroutine as make about 2^14 head_dim-sized
	// query-position products (decode over short contexts stays on one
	// goroutine).
	per := max(1, len(tasks)*(1<<14)/max(1, work*s.l.HeadDim))
	s.job = attendJob{s: s, dst: dst, q: q, k: k, v: v, layer: layer, p: p, a: a, nq: nq, done: done}
	workers.ForTask(len(tasks), 1, per, &s.job)
	s.job = attendJob{}
}

// attendJob is one attend call's work over s.tasks, kept in the Storage
// (whose calls do not run concurrently) so that a decode step's attention
// allocates nothing.
type attendJob struct {
	s            *Storage
	dst, q, k, v []float32
	layer        int
	p            *kvcache.Plan
	a            backend.AttnParams
	nq           int
	done         <-chan struct{}
}

// Run computes tasks [lo, hi), skipping them once done is closed.
func (j *attendJob) Run(lo, hi int) {
	scr := scratchPool.Get().(*Scratch)
	defer scratchPool.Put(scr)
	for _, t := range j.s.tasks[lo:hi] {
		if stopped(j.done) {
			return
		}
		j.s.attendTask(j.dst, j.q, j.k, j.v, j.layer, j.p, &j.p.Seqs[t.seq], t, j.a, j.nq, scr)
	}
}

// attendTask computes one task's attention.
func (s *Storage) attendTask(dst, q, kx, vx []float32, layer int, p *kvcache.Plan, st *kvcache.SeqStep, t task, a backend.AttnParams, nq int, scr *Scratch) {
	dim := s.l.HeadDim
	qd := a.Heads * dim
	h := t.h
	nt := t.t1 - t.t0
	rowsQ := nt * nq
	// Positions: token i of the block is at position pos0+i and sees
	// [from(i), pos0+i+1).
	pos0 := st.Pos + t.t0
	from := func(pos int) int {
		if a.Window > 0 {
			return max(0, pos+1-a.Window)
		}
		return 0
	}
	lo, hi := from(pos0), pos0+nt
	n := hi - lo
	// An Exact step reads its own positions from the activations, the
	// earlier ones from the cache.
	cached := hi
	if st.Exact {
		cached = max(lo, min(hi, st.Pos))
	}
	// The block's queries, one row per (token, query head).
	var qh []float32
	if nt == 1 {
		r := st.Row + t.t0
		qh = q[r*qd+h*nq*dim : r*qd+(h+1)*nq*dim]
	} else {
		scr.q = grow(scr.q, rowsQ*dim)
		for i := 0; i < nt; i++ {
			r := st.Row + t.t0 + i
			copy(scr.q[i*nq*dim:(i+1)*nq*dim], q[r*qd+h*nq*dim:r*qd+(h+1)*nq*dim])
		}
		qh = scr.q
	}
	scr.scores = grow(scr.scores, rowsQ*n)
	sc := scr.scores
	ks, vs := p.SideShape[layer][0], p.SideShape[layer][1]
	side := sides(s.l, layer)
	kc := s.codecs.Sides[layer][0][h]
	kr, kRot := kc.(quant.Rotator)
	var qr []float32
	if kRot {
		scr.qr = grow(scr.qr, rowsQ*dim)
		qr = scr.qr
		kr.RotateQueries(qr, qh, rowsQ)
	}
	if side[0].PreRoPE {
		scr.rows = grow(scr.rows, preRoPEChunk*dim)
		rows := scr.rows
		s.eachRun(st.Runs[ks], lo, cached, layer, 0, h, st.Window, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
			for r0 := 0; r0 < cnt; r0 += preRoPEChunk {
				m := min(preRoPEChunk, cnt-r0)
				cd.Decode(rows[:m*dim], tile, row0+r0, m)
				s.rope(rows[:m*dim], lo+off+r0)
				simd.ScoresF32(sc[off+r0:], n, qh, rowsQ, dim, rows[:m*dim], m)
			}
		})
	} else {
		s.eachRun(st.Runs[ks], lo, cached, layer, 0, h, st.Window, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
			if kRot && cd == kc {
				kr.ScoresRotated(sc[off:], n, qr, rowsQ, tile, row0, cnt)
				return
			}
			cd.Scores(sc[off:], n, qh, rowsQ, tile, row0, cnt)
		})
	}
	s.eachExact(st, cached, hi, lo, kx, h, scr, func(rows []float32, m, off int) {
		simd.ScoresF32(sc[off:], n, qh, rowsQ, dim, rows, m)
	})
	// Each query row's softmax over its own range; zero elsewhere.
	for i := 0; i < nt; i++ {
		pos := pos0 + i
		f, e := from(pos)-lo, pos+1-lo
		for k := 0; k < nq; k++ {
			row := sc[(i*nq+k)*n : (i*nq+k+1)*n]
			clear(row[:f])
			switch {
			case a.Softcap > 0 && a.Sinks != nil:
				softcap(row[f:e], a.Scale, a.Softcap)
				softmaxSink(row[f:e], 1, a.Sinks[h*nq+k])
			case a.Softcap > 0:
				softcap(row[f:e], a.Scale, a.Softcap)
				softmax(row[f:e], 1)
			case a.Sinks != nil:
				softmaxSink(row[f:e], a.Scale, a.Sinks[h*nq+k])
			default:
				softmax(row[f:e], a.Scale)
			}
			clear(row[e:])
		}
	}
	scr.acc = grow(scr.acc, rowsQ*dim)
	acc := scr.acc
	clear(acc)
	vc := s.codecs.Sides[layer][1][h]
	vr, vRot := vc.(quant.Rotator)
	var racc []float32
	if vRot {
		scr.racc = grow(scr.racc, rowsQ*dim)
		racc = scr.racc
		clear(racc)
	}
	s.eachRun(st.Runs[vs], lo, cached, layer, 1, h, st.Window, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
		if vRot && cd == vc {
			vr.AccumulateRotated(racc, sc[off:], n, rowsQ, tile, row0, cnt)
			return
		}
		cd.Accumulate(acc, sc[off:], n, rowsQ, tile, row0, cnt)
	})
	if vRot {
		vr.UnrotateAdd(acc, racc, rowsQ)
	}
	s.eachExact(st, cached, hi, lo, vx, h, scr, func(rows []float32, m, off int) {
		simd.AccumulateF32(acc, sc[off:], n, rowsQ, dim, rows, m)
	})
	for i := 0; i < nt; i++ {
		r := st.Row + t.t0 + i
		copy(dst[r*qd+h*nq*dim:r*qd+(h+1)*nq*dim], acc[i*nq*dim:(i+1)*nq*dim])
	}
}

// eachExact calls fn for chunks of positions [from, to) of an Exact step,
// head h's rows gathered from the step's activations x (rows of
// KVHeads·HeadDim, position Pos at row Row), with the chunk's offset from
// lo.
func (s *Storage) eachExact(st *kvcache.SeqStep, from, to, lo int, x []float32, h int, scr *Scratch, fn func(rows []float32, m, off int)) {
	dim, kvd := s.l.HeadDim, s.l.KVHeads*s.l.HeadDim
	for p := from; p < to; p += preRoPEChunk {
		m := min(preRoPEChunk, to-p)
		scr.exact = grow(scr.exact, m*dim)
		for i := 0; i < m; i++ {
			r := st.Row + p + i - st.Pos
			copy(scr.exact[i*dim:(i+1)*dim], x[r*kvd+h*dim:r*kvd+(h+1)*dim])
		}
		fn(scr.exact[:m*dim], m, p-lo)
	}
}

// preRoPEChunk is how many pre-RoPE key rows are decoded at a time.
const preRoPEChunk = 64

// softmax replaces x with softmax(scale·x) in place: the SIMD kernels find
// the maximum, exponentiate the shifted scores and sum them in float64.
func softmax(x []float32, scale float32) {
	if len(x) == 0 {
		return
	}
	m := simd.MaxF32(x) * scale
	if scale < 0 {
		m = minScaled(x, scale)
	}
	sum := simd.ExpShiftSum(x, scale, m)
	simd.ScaleF32(x, float32(1/sum))
}

// softmaxSink is softmax with a sink: a logit sink (not scaled) joins the
// maximum and the normaliser as a position with no value, so the weights
// left in x sum to 1 − its share.
func softmaxSink(x []float32, scale, sink float32) {
	if len(x) == 0 {
		return
	}
	m := simd.MaxF32(x) * scale
	if scale < 0 {
		m = minScaled(x, scale)
	}
	m = max(m, sink)
	sum := simd.ExpShiftSum(x, scale, m) + math.Exp(float64(sink-m))
	simd.ScaleF32(x, float32(1/sum))
}

// minScaled is the largest scale·x when scale is negative.
func minScaled(x []float32, scale float32) float32 {
	m := x[0]
	for _, v := range x {
		m = min(m, v)
	}
	return m * scale
}
