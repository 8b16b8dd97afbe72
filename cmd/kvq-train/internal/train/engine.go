package train

import (
	"context"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Fixed task sizes. They cut every operation into the same tasks whatever
// the number of workers (see pool).
const (
	rowBlock  = 128 // token rows per task of the row-wise ops and products
	gradBlock = 32  // weight-gradient rows per task (a multiple of 4)
	normBlock = 256 // token rows per partial sum of a norm's weight gradient
	attnBlock = 64  // query rows per attention block
	gradChunk = 512 // token rows per partial weight gradient
)

// layerActs is what one block's forward pass keeps for its backward pass.
// Token-major tensors hold nt rows; head-major ones hold, per head, nt rows
// of HeadDim values ([head][token][d]).
type layerActs struct {
	x, xn1  []float32 // block input, attention norm output
	r1      []float32 // attention norm 1/rms per token
	q, k, v []float32 // after RoPE, head-major
	o       []float32 // attention output, head-major
	lse     []float32 // log-sum-exp of each query's scores, [head][token]
	att     []float32 // attention output, token-major (the o projection's input)
	x2, xn2 []float32 // residual after attention, MLP norm output
	r2      []float32
	gu      []float32 // gate and up projections, 2·Hidden per token
	sig     []float32 // σ(gate)
	h       []float32 // SwiGLU output
}

// scratch is one worker's private buffers; every use overwrites what it
// reads, so their contents never leak into results.
type scratch struct {
	s, p, dp, t []float32 // attention blocks: attnBlock × Context
	dyT, xT     []float32 // a chunk of a linear layer's dy and x, transposed
}

// engine runs the forward and backward passes of one model over batches.
// It keeps the activations of the last forward pass and the gradients of
// the last backward pass.
type engine struct {
	cfg   Config
	lay   *layout
	pool  pool
	w, wt []float32 // parameters; transposes of the linear layers at the same offsets
	g     []float32 // gradients, same layout as w
	cos   []float32 // RoPE tables, Context × HeadDim/2
	sin   []float32
	scale float32 // 1/sqrt(HeadDim)

	nt     int
	layers []layerActs
	xf     []float32 // final residual
	rf     []float32
	xnf    []float32
	logits []float32 // logits, or their loss gradient after a training forward

	// backward buffers
	dx, dxn, dh, dgu, datt, dqkv, qkv []float32
	dq, dk, dv, do                    []float32
	part                              []float32 // partial weight gradients, one per token chunk
	normPart                          []float64
	scr                               []*scratch
}

func newEngine(cfg Config, lay *layout, w []float32) *engine {
	e := &engine{cfg: cfg, lay: lay, pool: newPool(cfg.Workers), w: w}
	e.wt = make([]float32, len(w))
	e.g = make([]float32, len(w))
	e.cos, e.sin = ropeTables(cfg.Context, cfg.HeadDim, cfg.RopeTheta)
	e.scale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	e.layers = make([]layerActs, cfg.Layers)
	e.scr = make([]*scratch, e.pool.n)
	for i := range e.scr {
		e.scr[i] = &scratch{}
	}
	e.syncWeights()
	return e
}

// syncWeights refreshes the transposed copies of the linear layers; call
// it after every change to w.
func (e *engine) syncWeights() {
	var ms []span
	for _, s := range e.lay.all {
		if s.matrix {
			ms = append(ms, s)
		}
	}
	e.pool.run(len(ms), func(_, i int) {
		s := ms[i]
		simd.TransposeF32(s.of(e.wt), s.rows, s.of(e.w), s.cols, s.rows, s.cols)
	})
}

// ensure sizes the activation and gradient buffers for nt tokens.
func (e *engine) ensure(nt int) {
	c := &e.cfg
	D, H, qd, kvd := c.Dim, c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	e.nt = nt
	for i := range e.layers {
		a := &e.layers[i]
		a.x, a.xn1, a.r1 = grow(a.x, nt*D), grow(a.xn1, nt*D), grow(a.r1, nt)
		a.q, a.k, a.v, a.o = grow(a.q, nt*qd), grow(a.k, nt*kvd), grow(a.v, nt*kvd), grow(a.o, nt*qd)
		a.lse, a.att = grow(a.lse, nt*c.Heads), grow(a.att, nt*qd)
		a.x2, a.xn2, a.r2 = grow(a.x2, nt*D), grow(a.xn2, nt*D), grow(a.r2, nt)
		a.gu, a.sig, a.h = grow(a.gu, 2*nt*H), grow(a.sig, nt*H), grow(a.h, nt*H)
	}
	e.xf, e.rf, e.xnf = grow(e.xf, nt*D), grow(e.rf, nt), grow(e.xnf, nt*D)
	e.logits = grow(e.logits, nt*c.Vocab)
	e.qkv = grow(e.qkv, nt*c.qkvRows())
}

func (e *engine) ensureBackward(nt int) {
	c := &e.cfg
	D, H, qd, kvd := c.Dim, c.Hidden, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	e.dx, e.dxn, e.dh, e.dgu = grow(e.dx, nt*D), grow(e.dxn, nt*D), grow(e.dh, nt*H), grow(e.dgu, 2*nt*H)
	e.datt, e.dqkv = grow(e.datt, nt*qd), grow(e.dqkv, nt*c.qkvRows())
	e.dq, e.dk, e.dv, e.do = grow(e.dq, nt*qd), grow(e.dk, nt*kvd), grow(e.dv, nt*kvd), grow(e.do, nt*qd)
	biggest := 0
	for _, s := range e.lay.all {
		biggest = max(biggest, s.n())
	}
	e.part = grow(e.part, (nt+gradChunk-1)/gradChunk*biggest)
	e.normPart = grow64(e.normPart, (nt+normBlock-1)/normBlock*D)
}

func grow64(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// matmul sets y = x·wᵀ for nt token rows: y is nt×rows (stride rows), x is
// nt×cols, w is rows×cols. Tasks own fixed blocks of token rows.
func (e *engine) matmul(y []float32, x []float32, nt, cols int, w []float32, rows int) {
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		simd.MatMulF32(y[lo*rows:], rows, x[lo*cols:], hi-lo, cols, w, 0, rows)
	})
}

// matmulAdd sets y = base + x·wᵀ (the residual connections).
func (e *engine) matmulAdd(y, base []float32, x []float32, nt, cols int, w []float32, rows int) {
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		simd.MatMulF32(y[lo*rows:], rows, x[lo*cols:], hi-lo, cols, w, 0, rows)
		yr, br := y[lo*rows:hi*rows], base[lo*rows:hi*rows]
		for i, v := range br {
			yr[i] += v
		}
	})
}

// linearBack computes the gradients of y = x·wᵀ over nt tokens (x is
// nt×in, w out×in, wt its in×out transpose): dx = dy·w (skipped when dx is
// nil) and dw = dyᵀ·x. Tasks own fixed chunks of gradChunk tokens: each
// transposes its rows of dy and x (so that the sum over tokens is the
// inner dimension of one product, kept short enough to stay in cache),
// writes its partial dw and its rows of dx. The partials are then added in
// chunk order.
func (e *engine) linearBack(dx, dw, dy []float32, out int, x []float32, in int, wt []float32, nt int) {
	nc := (nt + gradChunk - 1) / gradChunk
	part := e.part[:nc*out*in]
	if nc == 1 {
		part = dw
	}
	e.pool.run(nc, func(w, c int) {
		lo, hi := c*gradChunk, min(nt, (c+1)*gradChunk)
		n := hi - lo
		sc := e.scr[w]
		sc.dyT, sc.xT = grow(sc.dyT, out*n), grow(sc.xT, in*n)
		simd.TransposeF32(sc.dyT, n, dy[lo*out:], out, n, out)
		simd.TransposeF32(sc.xT, n, x[lo*in:], in, n, in)
		simd.MatMulF32(part[c*out*in:], in, sc.dyT, out, n, sc.xT, 0, in)
		if dx != nil {
			simd.MatMulF32(dx[lo*in:], in, dy[lo*out:], n, out, wt, 0, in)
		}
	})
	if nc == 1 {
		return
	}
	e.pool.blocks(out*in, optBlock, func(_, lo, hi int) {
		d := dw[lo:hi]
		copy(d, part[lo:hi])
		for c := 1; c < nc; c++ {
			simd.AxpyF32(d, 1, part[c*out*in+lo:c*out*in+hi])
		}
	})
}

// rmsNorm runs rmsNormRows over all tokens.
func (e *engine) rmsNorm(y, inv, x, g []float32, nt int) {
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		rmsNormRows(y, inv, x, g, e.cfg.RMSEps, lo, hi)
	})
}

// rmsNormBack adds the norm's input gradient to dx and writes its weight
// gradient to dg: per-block float64 partial sums, added in block order.
func (e *engine) rmsNormBack(dx, dg, dy, x, inv, g []float32, nt int) {
	D := len(g)
	part := e.normPart[:(nt+normBlock-1)/normBlock*D]
	clear(part)
	e.pool.blocks(nt, normBlock, func(_, lo, hi int) {
		rmsNormBackRows(dx, part[lo/normBlock*D:(lo/normBlock+1)*D], dy, x, inv, g, lo, hi)
	})
	for i := range dg {
		var s float64
		for b := 0; b < len(part)/D; b++ {
			s += part[b*D+i]
		}
		dg[i] = float32(s)
	}
}

// ropeScatter rotates q and k of every token by its position and writes
// q, k and v head-major.
func (e *engine) ropeScatter(a *layerActs, qkv []float32, pos []int32) {
	c := &e.cfg
	hd, half, nt, R := c.HeadDim, c.HeadDim/2, e.nt, c.qkvRows()
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			p := int(pos[t])
			cs, sn := e.cos[p*half:(p+1)*half], e.sin[p*half:(p+1)*half]
			row := qkv[t*R : (t+1)*R]
			for h := 0; h < c.Heads; h++ {
				rope(a.q[(h*nt+t)*hd:(h*nt+t+1)*hd], row[h*hd:(h+1)*hd], cs, sn)
			}
			kb, vb := c.Heads*hd, (c.Heads+c.KVHeads)*hd
			for h := 0; h < c.KVHeads; h++ {
				rope(a.k[(h*nt+t)*hd:(h*nt+t+1)*hd], row[kb+h*hd:kb+(h+1)*hd], cs, sn)
				copy(a.v[(h*nt+t)*hd:(h*nt+t+1)*hd], row[vb+h*hd:vb+(h+1)*hd])
			}
		}
	})
}

// ropeGather is ropeScatter's backward: it un-rotates dq and dk and writes
// dq, dk and dv token-major into dqkv.
func (e *engine) ropeGather(dqkv []float32, pos []int32) {
	c := &e.cfg
	hd, half, nt, R := c.HeadDim, c.HeadDim/2, e.nt, c.qkvRows()
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			p := int(pos[t])
			cs, sn := e.cos[p*half:(p+1)*half], e.sin[p*half:(p+1)*half]
			row := dqkv[t*R : (t+1)*R]
			for h := 0; h < c.Heads; h++ {
				ropeBack(row[h*hd:(h+1)*hd], e.dq[(h*nt+t)*hd:(h*nt+t+1)*hd], cs, sn)
			}
			kb, vb := c.Heads*hd, (c.Heads+c.KVHeads)*hd
			for h := 0; h < c.KVHeads; h++ {
				ropeBack(row[kb+h*hd:kb+(h+1)*hd], e.dk[(h*nt+t)*hd:(h*nt+t+1)*hd], cs, sn)
				copy(row[vb+h*hd:vb+(h+1)*hd], e.dv[(h*nt+t)*hd:(h*nt+t+1)*hd])
			}
		}
	})
}

// headsToTokens copies a head-major tensor (heads × nt × hd) to token-major
// (nt × heads·hd); tokensToHeads is the reverse.
func (e *engine) headsToTokens(dst, src []float32, heads int) {
	hd, nt := e.cfg.HeadDim, e.nt
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < heads; h++ {
				copy(dst[(t*heads+h)*hd:(t*heads+h+1)*hd], src[(h*nt+t)*hd:(h*nt+t+1)*hd])
			}
		}
	})
}

func (e *engine) tokensToHeads(dst, src []float32, heads int) {
	hd, nt := e.cfg.HeadDim, e.nt
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < heads; h++ {
				copy(dst[(h*nt+t)*hd:(h*nt+t+1)*hd], src[(t*heads+h)*hd:(t*heads+h+1)*hd])
			}
		}
	})
}

func (s *scratch) ensure(n int) {
	s.s, s.p, s.dp, s.t = grow(s.s, n), grow(s.p, n), grow(s.dp, n), grow(s.t, n)
}

// attention computes causal softmax attention inside each document for
// every query head, writing a.o and a.lse. Query head h reads KV head
// h/(Heads/KVHeads), as Hugging Face's repeat_kv does.
//
// Queries go in blocks of attnBlock rows against all the document's keys
// up to the block's last row: S = Q·Kᵀ (MatMulF32), a masked softmax in
// place, O = P·V (AccumulateF32). Only the log-sum-exp of each row is
// kept; the backward pass recomputes P.
func (e *engine) attention(a *layerActs, docs []doc, tasks []attnTask) {
	c := &e.cfg
	hd, nt, group := c.HeadDim, e.nt, c.Heads/c.KVHeads
	e.pool.run(len(tasks), func(w, ti int) {
		sc := e.scr[w]
		d, g := docs[tasks[ti].doc], tasks[ti].kvHead
		sc.ensure(attnBlock * d.n)
		kh := a.k[(g*nt+d.start)*hd : (g*nt+d.start+d.n)*hd]
		vh := a.v[(g*nt+d.start)*hd : (g*nt+d.start+d.n)*hd]
		for h := g * group; h < (g+1)*group; h++ {
			for i0 := 0; i0 < d.n; i0 += attnBlock {
				i1 := min(i0+attnBlock, d.n)
				bq := i1 - i0
				q := a.q[(h*nt+d.start+i0)*hd : (h*nt+d.start+i1)*hd]
				s := sc.s[:bq*i1]
				simd.MatMulF32(s, i1, q, bq, hd, kh, 0, i1)
				lse := a.lse[h*nt+d.start+i0 : h*nt+d.start+i1]
				for r := 0; r < bq; r++ {
					lse[r] = softmaxRow(s[r*i1:(r+1)*i1], i0+r+1, e.scale)
				}
				o := a.o[(h*nt+d.start+i0)*hd : (h*nt+d.start+i1)*hd]
				clear(o)
				simd.AccumulateF32(o, s, i1, bq, hd, vh, i1)
			}
		}
	})
}

// softmaxRow replaces row[:n] by softmax(scale·row[:n]), zeroes row[n:],
// and returns the log-sum-exp of the scaled scores.
func softmaxRow(row []float32, n int, scale float32) float32 {
	valid := row[:n]
	m := simd.MaxF32(valid) * scale
	simd.ExpShiftTaylor(valid, valid, scale, m)
	var sum float64
	for _, p := range valid {
		sum += float64(p)
	}
	simd.ScaleF32(valid, float32(1/sum))
	clear(row[n:])
	return m + float32(math.Log(sum))
}

// attentionBack computes dq, dk and dv (head-major, after RoPE) from do
// (head-major), recomputing each block's probabilities from the kept
// log-sum-exp:
//
//	P = exp(scale·Q·Kᵀ − lse), dP = dO·Vᵀ, D_i = dO_i·O_i,
//	dS = scale·P⊙(dP − D), dQ = dS·K, dK += dSᵀ·Q, dV += Pᵀ·dO.
//
// A task owns one document and KV head, so dK and dV sum the group's query
// heads and blocks in a fixed order.
func (e *engine) attentionBack(a *layerActs, docs []doc, tasks []attnTask) {
	c := &e.cfg
	hd, nt, group := c.HeadDim, e.nt, c.Heads/c.KVHeads
	e.pool.run(len(tasks), func(w, ti int) {
		sc := e.scr[w]
		d, g := docs[tasks[ti].doc], tasks[ti].kvHead
		sc.ensure(attnBlock * d.n)
		kv := func(buf []float32) []float32 { return buf[(g*nt+d.start)*hd : (g*nt+d.start+d.n)*hd] }
		kh, vh, dk, dv := kv(a.k), kv(a.v), kv(e.dk), kv(e.dv)
		clear(dk)
		clear(dv)
		for h := g * group; h < (g+1)*group; h++ {
			for i0 := 0; i0 < d.n; i0 += attnBlock {
				i1 := min(i0+attnBlock, d.n)
				bq := i1 - i0
				rows := func(buf []float32) []float32 {
					return buf[(h*nt+d.start+i0)*hd : (h*nt+d.start+i1)*hd]
				}
				q, o, do, dq := rows(a.q), rows(a.o), rows(e.do), rows(e.dq)
				lse := a.lse[h*nt+d.start+i0 : h*nt+d.start+i1]
				p, dp := sc.p[:bq*i1], sc.dp[:bq*i1]
				simd.MatMulF32(p, i1, q, bq, hd, kh, 0, i1)
				simd.MatMulF32(dp, i1, do, bq, hd, vh, 0, i1)
				for r := 0; r < bq; r++ {
					n := i0 + r + 1
					pr, dpr := p[r*i1:r*i1+n], dp[r*i1:r*i1+n]
					l := lse[r]
					dd := simd.DotF32(do[r*hd:(r+1)*hd], o[r*hd:(r+1)*hd])
					simd.ExpShiftTaylor(pr, pr, e.scale, l)
					for j, pv := range pr {
						dpr[j] = e.scale * pv * (dpr[j] - dd)
					}
					clear(p[r*i1+n : (r+1)*i1])
					clear(dp[r*i1+n : (r+1)*i1])
				}
				clear(dq)
				simd.AccumulateF32(dq, dp, i1, bq, hd, kh, i1)
				t := sc.t[:i1*bq]
				simd.TransposeF32(t, bq, dp, i1, bq, i1)
				simd.AccumulateF32(dk[:i1*hd], t, bq, i1, hd, q, bq)
				simd.TransposeF32(t, bq, p, i1, bq, i1)
				simd.AccumulateF32(dv[:i1*hd], t, bq, i1, hd, do, bq)
			}
		}
	})
}

// forward runs the model over b. With targets it returns the weighted mean
// cross-entropy and leaves its gradient with respect to the logits in
// e.logits; without (b.wsum == 0) it leaves the logits there. It checks
// ctx between layers and between the large ops in them.
func (e *engine) forward(ctx context.Context, b *batch) (float64, error) {
	c := &e.cfg
	nt := b.nt()
	e.ensure(nt)
	D, qd, H := c.Dim, c.Heads*c.HeadDim, c.Hidden
	emb := e.lay.embed.of(e.w)
	x0 := e.layers[0].x
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) { embedRows(x0, emb, b.ids, D, lo, hi) })
	tasks := b.attnTasks(c.KVHeads)
	for li := range e.layers {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("train: forward stopped before layer %d: %w", li, err)
		}
		a, l := &e.layers[li], &e.lay.layers[li]
		e.rmsNorm(a.xn1, a.r1, a.x, l.attnNorm.of(e.w), nt)
		e.matmul(e.qkv, a.xn1, nt, D, l.wqkv.of(e.w), c.qkvRows())
		e.ropeScatter(a, e.qkv, b.pos)
		e.attention(a, b.docs, tasks)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("train: forward stopped in layer %d: %w", li, err)
		}
		e.headsToTokens(a.att, a.o, c.Heads)
		e.matmulAdd(a.x2, a.x, a.att, nt, qd, l.wo.of(e.w), D)
		e.rmsNorm(a.xn2, a.r2, a.x2, l.ffnNorm.of(e.w), nt)
		e.matmul(a.gu, a.xn2, nt, D, l.w13.of(e.w), 2*H)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("train: forward stopped in layer %d: %w", li, err)
		}
		e.pool.blocks(nt, rowBlock, func(_, lo, hi int) { swigluRows(a.h, a.sig, a.gu, H, lo, hi) })
		next := e.xf
		if li+1 < len(e.layers) {
			next = e.layers[li+1].x
		}
		e.matmulAdd(next, a.x2, a.h, nt, H, l.w2.of(e.w), D)
	}
	e.rmsNorm(e.xnf, e.rf, e.xf, e.lay.norm.of(e.w), nt)
	V := c.Vocab
	head := e.lay.head.of(e.w)
	if b.wsum == 0 {
		e.matmul(e.logits, e.xnf, nt, D, head, V)
		return 0, nil
	}
	nb := (nt + rowBlock - 1) / rowBlock
	part := make([]float64, nb)
	norm := 1 / b.wsum
	e.pool.blocks(nt, rowBlock, func(_, lo, hi int) {
		simd.MatMulF32(e.logits[lo*V:], V, e.xnf[lo*D:], hi-lo, D, head, 0, V)
		part[lo/rowBlock] = crossEntropyRows(e.logits, V, b.targets, b.weights, norm, lo, hi)
	})
	var loss float64
	for _, v := range part {
		loss += v
	}
	return loss * norm, nil
}

// backward fills e.g with the gradient of the loss of the last forward
// pass (which must have had targets). It checks ctx between layers and
// between the large ops in them.
func (e *engine) backward(ctx context.Context, b *batch) error {
	c := &e.cfg
	nt := e.nt
	e.ensureBackward(nt)
	D, qd, H, V := c.Dim, c.Heads*c.HeadDim, c.Hidden, c.Vocab
	lay := e.lay
	// Output head and final norm.
	e.linearBack(e.dxn, lay.head.of(e.g), e.logits, V, e.xnf, D, lay.head.of(e.wt), nt)
	clear(e.dx)
	e.rmsNormBack(e.dx, lay.norm.of(e.g), e.dxn, e.xf, e.rf, lay.norm.of(e.w), nt)
	tasks := b.attnTasks(c.KVHeads)
	for li := len(e.layers) - 1; li >= 0; li-- {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train: backward stopped at layer %d: %w", li, err)
		}
		a, l := &e.layers[li], &lay.layers[li]
		// MLP: out = x2 + h·W2ᵀ, e.dx holds d(out).
		e.linearBack(e.dh, l.w2.of(e.g), e.dx, D, a.h, H, l.w2.of(e.wt), nt)
		e.pool.blocks(nt, rowBlock, func(_, lo, hi int) { swigluBackRows(e.dgu, e.dh, a.gu, a.sig, H, lo, hi) })
		e.linearBack(e.dxn, l.w13.of(e.g), e.dgu, 2*H, a.xn2, D, l.w13.of(e.wt), nt)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train: backward stopped in layer %d: %w", li, err)
		}
		e.rmsNormBack(e.dx, l.ffnNorm.of(e.g), e.dxn, a.x2, a.r2, l.ffnNorm.of(e.w), nt)
		// Attention: x2 = x + att·Woᵀ, e.dx holds d(x2).
		e.linearBack(e.datt, l.wo.of(e.g), e.dx, D, a.att, qd, l.wo.of(e.wt), nt)
		e.tokensToHeads(e.do, e.datt, c.Heads)
		e.attentionBack(a, b.docs, tasks)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("train: backward stopped in layer %d: %w", li, err)
		}
		e.ropeGather(e.dqkv, b.pos)
		e.linearBack(e.dxn, l.wqkv.of(e.g), e.dqkv, c.qkvRows(), a.xn1, D, l.wqkv.of(e.wt), nt)
		e.rmsNormBack(e.dx, l.attnNorm.of(e.g), e.dxn, a.x, a.r1, l.attnNorm.of(e.w), nt)
	}
	de := lay.embed.of(e.g)
	clear(de)
	embedBack(de, e.dx, b.ids, D)
	return nil
}

// embedRows sets x[t] = emb[ids[t]] for rows [lo, hi).
func embedRows(x, emb []float32, ids []int32, d, lo, hi int) {
	for t := lo; t < hi; t++ {
		id := int(ids[t])
		copy(x[t*d:(t+1)*d], emb[id*d:(id+1)*d])
	}
}

// embedBack adds dx[t] to row ids[t] of demb: a scatter-add in token
// order, on one goroutine (a few million additions) so that rows hit by
// several tokens always sum in the same order.
func embedBack(demb, dx []float32, ids []int32, d int) {
	for t, id := range ids {
		simd.AxpyF32(demb[int(id)*d:(int(id)+1)*d], 1, dx[t*d:(t+1)*d])
	}
}
