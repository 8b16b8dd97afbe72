package quant_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// BenchmarkAttentionStep times one decode step of attention through
// kvcache.Attend for one layer shaped like Llama-3-8B's: 8 KV heads of 128
// values and 32 query heads (GQA groups of 4), over a context of ctx tokens
// in kvcache's default 16-token pages. SetBytes is the K and V page bytes the
// step reads, so MB/s compares formats by the memory they stream. Where the
// OS reports it (Linux), cpu-ns/op is the benchmark thread's CPU time per
// step, which shared, noisy machines disturb far less than wall time.
// Compare formats at one context with
//
//	go test -run='^$' -bench='AttentionStep/ctx=16384' ./pkg/quant/
func BenchmarkAttentionStep(b *testing.B) {
	const (
		kvHeads = 8
		qHeads  = 32
		dim     = 128
	)
	formats := []string{
		"fp16", "fp8-e4m3", "fp8-e5m2",
		"q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl",
		"q8_0:rot", "q4_0:rot", "fp8-e4m3:rot",
	}
	r := quant.Formats()
	for _, ctx := range []int{4096, 16384, 32768} {
		for _, name := range formats {
			f := r.MustLookup(name)
			g := kvcache.Geometry{Layers: 1, KVHeads: kvHeads, HeadDim: dim}
			l, err := kvcache.NewLayout(g, quant.Spec{K: f, V: f}, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("ctx=%d/%s", ctx, name), func(b *testing.B) {
				c, err := kvcache.New(l, kvcache.Options{Blocks: l.BlocksFor(ctx)})
				if err != nil {
					b.Fatal(err)
				}
				if err := c.AddSeq(0); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Begin(0, ctx); err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				k := make([]float32, kvHeads*dim)
				v := make([]float32, kvHeads*dim)
				for p := 0; p < ctx; p++ {
					for i := range k {
						k[i] = float32(rng.NormFloat64())
						v[i] = float32(rng.NormFloat64())
					}
					c.Put(0, 0, p, k, v)
				}
				q := make([]float32, qHeads*dim)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, len(q))
				scr := &kvcache.Scratch{}
				b.SetBytes(int64(l.BlocksFor(ctx)) * l.BlockBytes)
				b.ReportAllocs()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0, ok := threadCPUTime()
				for b.Loop() {
					c.Attend(dst, q, qHeads, 0, 0, 0, ctx, 0.088, scr)
				}
				if cpu1, _ := threadCPUTime(); ok {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}
