package runtime_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/internal/testutil"
	kvrt "github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// syntheticConfig has realistic shapes for a ~1B-parameter Llama: dim 2048,
// 16 layers, 32 heads, 8 KV heads, head_dim 64.
var syntheticConfig = kvrt.Config{Dim: 2048, Hidden: 5632, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 32000, ContextLen: 4096}

var (
	synthOnce  sync.Once
	synthModel *kvrt.Model
	bwOnce     sync.Once
	bandwidth  float64
)

func synthetic(b *testing.B) *kvrt.Model {
	synthOnce.Do(func() {
		m, err := modeltest.RandomModel(syntheticConfig, tensor.F16, 1)
		if err != nil {
			b.Fatal(err)
		}
		synthModel = m
	})
	return synthModel
}

// memBandwidth measures streaming read bandwidth with all cores, once.
func memBandwidth() float64 {
	bwOnce.Do(func() { bandwidth = simd.MeasureBandwidthParallel(512<<20, runtime.GOMAXPROCS(0)) })
	return bandwidth
}

// BenchmarkDecode reports decode tokens/s and how close one decode step comes
// to the weight-streaming limit (weight bytes ÷ measured bandwidth).
func BenchmarkDecode(b *testing.B) {
	b.Run("synthetic-1B-F16", func(b *testing.B) { benchDecode(b, synthetic(b), 128) })
	b.Run("stories260K", func(b *testing.B) { benchDecode(b, stories(b), 32) }) // 32 + 64 tokens of its 128-token context
}

// BenchmarkPrefill reports prefill tokens/s and matmul GFLOP/s.
func BenchmarkPrefill(b *testing.B) {
	b.Run("synthetic-1B-F16/256", func(b *testing.B) { benchPrefill(b, synthetic(b), 256) })
	b.Run("stories260K/128", func(b *testing.B) { benchPrefill(b, stories(b), 128) }) // its whole context
}

func stories(b *testing.B) *kvrt.Model {
	_, _, gguf := testutil.Stories260K(b)
	m, err := kvrt.Load(context.Background(), gguf, kvrt.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// benchDecode measures single-sequence decode steps at a context of ctxLen to
// ctxLen+64 tokens: it prefills ctxLen tokens once, then decodes in forks of
// that prefix that are dropped every 64 steps, so the context stays fixed.
func benchDecode(b *testing.B, m *kvrt.Model, ctxLen int) {
	const run = 64
	r := newRunner(b, m)
	c := newCache(b, r, "fp16", 2*((ctxLen+run)/16+2))
	_ = c.AddSeq(0)
	ctx := context.Background()
	if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: tokens(ctxLen, m.Vocab, 1), Logits: kvrt.NoLogits}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%run == 0 {
			_ = c.Remove(1)
			if err := c.Fork(1, 0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 1, Tokens: []int{i % m.Vocab}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	perTok := b.Elapsed().Seconds() / float64(b.N)
	// Bytes a decode step must stream: every layer weight and the output
	// head; of the embedding only one row.
	wb := float64(m.WeightBytes())
	if !m.TiedEmbeddings {
		wb -= float64(m.Embed.Bytes())
	}
	bw := memBandwidth()
	b.ReportMetric(1/perTok, "tok/s")
	b.ReportMetric(wb/1e6, "MB-weights/tok")
	b.ReportMetric(bw/1e9, "GB/s-mem")
	b.ReportMetric(perTok/(wb/bw), "x-of-limit")
}

func benchPrefill(b *testing.B, m *kvrt.Model, n int) {
	r := newRunner(b, m)
	ids := tokens(n, m.Vocab, 2)
	ctx := context.Background()
	l, err := kvcache.NewLayout(m.Geometry(), mustSpec(b, "fp16"), 0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(n)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = c.Remove(0)
		_ = c.AddSeq(0)
		if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: ids}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := b.Elapsed().Seconds() / float64(b.N)
	// Matmul FLOPs: 2 per layer weight per token, plus one row of logits.
	var w float64
	for _, l := range m.Layers {
		for _, x := range []*tensor.Weight{l.Wq, l.Wk, l.Wv, l.Wo, l.Gate, l.Up, l.Down} {
			w += float64(x.Rows) * float64(x.Cols)
		}
	}
	flops := 2*w*float64(n) + 2*float64(m.Vocab*m.Dim)
	b.ReportMetric(float64(n)/per, "tok/s")
	b.ReportMetric(flops/per/1e9, "GFLOP/s")
}

// multiCacheSets are the caches of BenchmarkMultiCacheRoundRobin: an fp16
// baseline and candidates, as kvq eval runs them.
var multiCacheSets = [][]string{{"fp16"}, {"fp16", "int4"}, {"fp16", "fp8", "int4", "kivi2"}}

// BenchmarkMultiCacheRoundRobin measures what each extra cache costs when
// N caches advance over the same tokens in one forward per step (N = 1, 2,
// 4: fp16, then int4, then fp8 and kivi2 beside it): a 1K-token prefill and
// 64 teacher-forced decode steps on the synthetic 1B-shape model. Each
// round runs the three sets back to back; it reports per set the median
// seconds of the prefill and of the decode steps ("N<n>-prefill-s",
// "N<n>-decode-s") and the median over rounds of (time(N)/time(1) − 1)/(N−1),
// the cost of one extra cache as a fraction of a single-cache pass
// ("N<n>-extra-per-cache", for the prefill, the decode and the whole run).
// It takes several minutes a round on 2 cores: run it with -benchtime 2x.
func BenchmarkMultiCacheRoundRobin(b *testing.B) {
	m := synthetic(b)
	r := newRunner(b, m)
	const prompt, steps = 1024, 64
	ids := tokens(prompt+steps, m.Vocab, 3)
	ctx := context.Background()
	type times struct{ prefill, decode []float64 }
	t := make([]times, len(multiCacheSets))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, set := range multiCacheSets {
			var caches []*kvcache.Cache
			for _, spec := range set {
				c := newCache(b, r, spec, 2*(prompt+steps)/16+8)
				_ = c.AddSeq(0)
				caches = append(caches, c)
			}
			batch := func(tok []int) []kvrt.Entry {
				var e []kvrt.Entry
				for _, c := range caches {
					e = append(e, kvrt.Entry{Cache: c, Seq: 0, Tokens: tok})
				}
				return e
			}
			t0 := time.Now()
			if _, err := r.Forward(ctx, batch(ids[:prompt])); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			for s := 0; s < steps; s++ {
				if _, err := r.Forward(ctx, batch(ids[prompt+s:prompt+s+1])); err != nil {
					b.Fatal(err)
				}
			}
			t[k].prefill = append(t[k].prefill, t1.Sub(t0).Seconds())
			t[k].decode = append(t[k].decode, time.Since(t1).Seconds())
		}
	}
	b.StopTimer()
	extra := func(a, one []float64, n int) float64 {
		x := make([]float64, len(a))
		for i := range a {
			x[i] = (a[i]/one[i] - 1) / float64(n-1)
		}
		return median(x)
	}
	for k, set := range multiCacheSets {
		n := len(set)
		name := fmt.Sprintf("N%d", n)
		b.ReportMetric(median(t[k].prefill), name+"-prefill-s")
		b.ReportMetric(median(t[k].decode), name+"-decode-s")
		if n > 1 {
			total := func(x times) []float64 {
				s := make([]float64, len(x.prefill))
				for i := range s {
					s[i] = x.prefill[i] + x.decode[i]
				}
				return s
			}
			b.ReportMetric(extra(t[k].prefill, t[0].prefill, n), name+"-prefill-extra-per-cache")
			b.ReportMetric(extra(t[k].decode, t[0].decode, n), name+"-decode-extra-per-cache")
			b.ReportMetric(extra(total(t[k]), total(t[0]), n), name+"-extra-per-cache")
		}
	}
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}

// interruptConfig is a ~100M-parameter Llama shape: prefills of 512
// tokens take a second or two on 2 cores, so that rounds are cheap.
var interruptConfig = kvrt.Config{Dim: 1024, Hidden: 2816, Layers: 8, Heads: 16, KVHeads: 8, HeadDim: 64, Vocab: 32000, ContextLen: 4096}

// BenchmarkPrefillInterruptRoundRobin measures what makes a prefill
// stoppable within a layer: each round runs the same prefill (512 or 2048
// tokens, F16 weights, fp16 cache) with context.Background — no Done
// channel, so the plain backend — and with a cancellable context, which
// runs the backend's interruptible view (matrix products in runs that look
// at the channel, attention tasks that do) and the context checks inside
// each layer; the order alternates between rounds. It reports the median
// of each, in wall time and in the process's CPU time (which other
// processes on a loaded machine disturb less), and the medians over rounds
// of their ratios ("interruptible/plain", 1.01 = 1% slower). Run it with
// -benchtime 20x or more.
func BenchmarkPrefillInterruptRoundRobin(b *testing.B) {
	m, err := modeltest.RandomModel(interruptConfig, tensor.F16, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{512, 2048} {
		b.Run(fmt.Sprintf("prompt=%d", n), func(b *testing.B) { benchPrefillInterrupt(b, m, n) })
	}
}

func benchPrefillInterrupt(b *testing.B, m *kvrt.Model, n int) {
	r := newRunner(b, m)
	ids := tokens(n, m.Vocab, 2)
	c := newCache(b, r, "fp16", n/16+1)
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	type sample struct{ wall, cpu float64 }
	prefill := func(ctx context.Context) sample {
		_ = c.Remove(0)
		_ = c.AddSeq(0)
		c0, _ := processCPUTime()
		t0 := time.Now()
		if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: ids}}); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(t0).Seconds()
		c1, _ := processCPUTime()
		return sample{wall, (c1 - c0).Seconds()}
	}
	prefill(context.Background()) // warm up
	var plain, intr, ratio, plainCPU, intrCPU, ratioCPU []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var p, q sample
		if i%2 == 0 {
			p, q = prefill(context.Background()), prefill(cancellable)
		} else {
			q, p = prefill(cancellable), prefill(context.Background())
		}
		plain, intr, ratio = append(plain, p.wall), append(intr, q.wall), append(ratio, q.wall/p.wall)
		if p.cpu > 0 {
			plainCPU, intrCPU, ratioCPU = append(plainCPU, p.cpu), append(intrCPU, q.cpu), append(ratioCPU, q.cpu/p.cpu)
		}
	}
	b.StopTimer()
	b.ReportMetric(median(plain), "plain-s")
	b.ReportMetric(median(intr), "interruptible-s")
	b.ReportMetric(median(ratio), "interruptible/plain")
	if len(ratioCPU) > 0 {
		b.ReportMetric(median(plainCPU), "plain-cpu-s")
		b.ReportMetric(median(intrCPU), "interruptible-cpu-s")
		b.ReportMetric(median(ratioCPU), "interruptible/plain-cpu")
	}
}
