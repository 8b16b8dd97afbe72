//go:build cuda || cudaemu

package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// BenchDecodeAttention times one decode step's attention (the decode and
// merge kernels) over a cache of format f (K and V; fp16, bf16 or any
// quantized format SupportsKV accepts) of batch sequences of ctxLen cached
// tokens each, one new token per sequence, for one layer of headDim,
// kvHeads and heads. The cache's tiles are filled with random values on
// the device (no host copy; fp8 with scale 1); the step's write and
// metadata upload happen before the clock starts. seconds is the wall
// time per step (reps steps between two synchronizations), bytes the K
// and V bytes a step reads (batch·(ctxLen+1)·kvHeads·2 sides·the format's
// bytes per row), so that bytes/seconds compares with the device's
// measured bandwidth.
func (b *Backend) BenchDecodeAttention(ctx context.Context, f quant.Format, headDim, kvHeads, heads, ctxLen, batch, reps int) (seconds float64, bytes int64, err error) {
	kf, ferr := kvFormat(f, true, headDim)
	if ferr == nil {
		ferr = supportsKV(f)
	}
	if ferr != nil || kf.kind() == kvF32 || !decodeDim(headDim) || kf.kind() >= kvE4M3 && headDim == 96 ||
		kvHeads <= 0 || heads <= 0 || heads%kvHeads != 0 || heads/kvHeads > decodeRows ||
		ctxLen <= 0 || batch <= 0 || reps <= 0 {
		return 0, 0, fmt.Errorf("gpu: BenchDecodeAttention(%s, head size %d, %d KV heads, %d heads, %d tokens, batch %d, %d reps): no decode kernel for that",
			f.Name(), headDim, kvHeads, heads, ctxLen, batch, reps)
	}
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: kvHeads, HeadDim: headDim}, quant.Spec{K: f, V: f}, 0)
	if err != nil {
		return 0, 0, err
	}
	c, err := kvcache.New(l, kvcache.Options{Blocks: batch * l.BlocksFor(ctxLen+1), Storage: b})
	if err != nil {
		return 0, 0, err
	}
	s := c.Storage().(*Storage)
	s.path = pathDecode
	as := make([]kvcache.Append, batch)
	for i := range as {
		if err := c.AddSeq(kvcache.SeqID(i)); err != nil {
			return 0, 0, err
		}
		as[i] = kvcache.Append{Seq: kvcache.SeqID(i), Row: i * ctxLen, N: ctxLen}
	}
	// The cached tokens: blocks reserved and committed without writes,
	// then filled with random values.
	p, err := c.Reserve(as)
	if err != nil {
		return 0, 0, err
	}
	c.Commit(p)
	for j := range s.sides[0] {
		sd := &s.sides[0][j]
		rows := kvHeads * s.blocks * l.BlockTokens
		b.launch("kvq_kv_fill_random", dim3{1024, 1, 1}, dim3{256, 1, 1}, 0,
			args{}.ptr(sd.p).int(rows).int(j+1).int(sd.code).int(l.BlockTokens).int(headDim).f32(1))
	}
	for i := range as {
		as[i] = kvcache.Append{Seq: kvcache.SeqID(i), Row: i, N: 1}
	}
	if p, err = c.Reserve(as); err != nil {
		return 0, 0, err
	}
	defer c.Rollback(p)
	rng := rand.New(rand.NewPCG(uint64(ctxLen), uint64(batch)))
	rows := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	kvd, qd := kvHeads*headDim, heads*headDim
	var ts []*tensor
	defer func() {
		for _, t := range ts {
			b.Free(t)
		}
	}()
	for _, n := range []int{batch * kvd, batch * kvd, batch * qd} {
		t, err := b.UploadF32(rows(n))
		if err != nil {
			return 0, 0, err
		}
		ts = append(ts, dev(t))
	}
	out := dev(b.Alloc(batch * qd))
	ts = append(ts, out)
	k, v, q := ts[0], ts[1], ts[2]
	a := backend.AttnParams{Heads: heads, Scale: float32(1 / math.Sqrt(float64(headDim)))}
	b.WriteKV(s, 0, k, v, p)
	b.Attention(out, q, k, v, s, 0, p, a) // warm-up: kernels loaded, scratch allocated
	if err := b.syncKV(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for r := 0; r < reps; r++ {
		if err := ctx.Err(); err != nil {
			_ = b.syncKV()
			return 0, 0, fmt.Errorf("gpu: BenchDecodeAttention stopped after %d of %d steps: %w", r, reps, err)
		}
		b.Attention(out, q, k, v, s, 0, p, a)
	}
	if err := b.syncKV(); err != nil {
		return 0, 0, err
	}
	seconds = time.Since(start).Seconds() / float64(reps)
	return seconds, int64(batch) * int64(ctxLen+1) * int64(kvHeads) * int64(kf.rowBytes) * 2, nil
}

// syncKV waits for the device and returns the first failure since the
// last check.
func (b *Backend) syncKV() error {
	b.fail(b.d.sync())
	return b.takeErr()
}

// BenchDecodeAttention is Backend.BenchDecodeAttention holding the
// device's lock.
func (d *Device) BenchDecodeAttention(ctx context.Context, f quant.Format, headDim, kvHeads, heads, ctxLen, batch, reps int) (seconds float64, bytes int64, err error) {
	defer d.lock()()
	return d.b.BenchDecodeAttention(ctx, f, headDim, kvHeads, heads, ctxLen, batch, reps)
}
