package runtime_test

import (
	"context"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	kvrt "github.com/kvqlabs/kvq/pkg/runtime"
)

// BenchmarkDecodeGGUF measures single-sequence decode of the GGUF file named
// by KVQ_BENCH_GGUF (skipped when unset), for example the random-weight
// 1B-shape file of
//
//	go run ./scripts/benchmodel -shape 1b -o /tmp/bench-1b.gguf
//	KVQ_BENCH_GGUF=/tmp/bench-1b.gguf go test -run '^$' -bench DecodeGGUF -benchtime 15x -cpu 1,2 ./pkg/runtime/
//
// as llama-bench -p 0 -n 8 does: every round decodes 8 tokens from an
// empty fp16 cache once with each kernel set the CPU runs (avx512 where it
// has AVX-512, then avx2; the order alternates between rounds), so that
// the sets see the same machine load. GOMAXPROCS (-cpu) sets the threads.
// It reports each set's median tokens/s, "speedup" (the median over rounds
// of the avx2 time over the avx512 time) and "<set>-of-limit": tokens/s
// over the weight-streaming limit, the read bandwidth divided by the weight
// bytes a token streams. The bandwidth (GB/s-mem, the median over rounds)
// is measured in every round too, between the sets, by
// simd.MeasureBandwidthParallel over 1 GiB with GOMAXPROCS workers.
func BenchmarkDecodeGGUF(b *testing.B) {
	path := os.Getenv("KVQ_BENCH_GGUF")
	if path == "" {
		b.Skip("KVQ_BENCH_GGUF is not set (go run ./scripts/benchmodel -shape 1b -o /tmp/bench-1b.gguf)")
	}
	m, err := kvrt.Load(context.Background(), path, kvrt.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	const run = 8
	r := newRunner(b, m)
	c := newCache(b, r, "fp16", 2*(run/16+2))
	ctx := context.Background()
	decode := func() time.Duration {
		_ = c.Remove(0)
		_ = c.AddSeq(0)
		t0 := time.Now()
		for i := 0; i < run; i++ {
			if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: []int{(i*31 + 7) % m.Vocab}}}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	type set struct {
		name  string
		force func() func()
	}
	sets := []set{{simd.Kernels(), func() func() { return func() {} }}}
	switch {
	case os.Getenv("KVQ_BENCH_PAR") != "":
		sets = append(sets, set{"static", par.ForceStatic})
	case simd.Kernels() == "avx512":
		sets = append(sets, set{"avx2", simd.ForceAVX2})
	}
	decode() // warm up: page the weights in
	wb := float64(m.WeightBytes())
	if !m.TiedEmbeddings {
		wb -= float64(m.Embed.Bytes())
	}
	secs := make([][]float64, len(sets))
	var bws []float64
	var ratios []float64
	round := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for k := range sets {
			i := (k + round) % len(sets)
			restore := sets[i].force()
			secs[i] = append(secs[i], decode().Seconds()/run)
			restore()
			if k == 0 {
				b.StopTimer() // its 1 GiB buffer is not the decode's
				bws = append(bws, simd.MeasureBandwidthParallel(1<<30, runtime.GOMAXPROCS(0)))
				b.StartTimer()
			}
		}
		if len(sets) > 1 {
			ratios = append(ratios, secs[1][round]/secs[0][round])
		}
		round++
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	bw := med(bws)
	limit := bw / wb
	for i, s := range sets {
		b.ReportMetric(1/med(secs[i]), s.name+"-tok/s")
		b.ReportMetric(1/med(secs[i])/limit, s.name+"-of-limit")
	}
	if len(ratios) > 0 {
		b.ReportMetric(med(ratios), "speedup")
	}
	b.ReportMetric(bw/1e9, "GB/s-mem")
	b.ReportMetric(wb/1e6, "MB-weights/tok")
}
