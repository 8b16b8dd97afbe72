package runtime_test

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	kvrt "github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// BenchmarkDecodeGGUF measures single-sequence decode of the GGUF file named
// by KVQ_BENCH_GGUF (skipped when unset), for example the random-weight
// 1B-shape file, or the mixture of experts of shape moe, of
//
//	go run ./scripts/benchmodel -shape 1b -o /tmp/bench-1b.gguf
//	KVQ_BENCH_GGUF=/tmp/bench-1b.gguf go test -run '^$' -bench DecodeGGUF -benchtime 15x -cpu 1,2 ./pkg/runtime/
//	GOMEMLIMIT=3GiB go run ./scripts/benchmodel -shape moe -o /tmp/bench-moe.gguf
//	KVQ_BENCH_GGUF=/tmp/bench-moe.gguf go test -run '^$' -bench DecodeGGUF -benchtime 15x -cpu 1,2 ./pkg/runtime/
//
// as llama-bench -p 0 -n 8 does: every round decodes 8 tokens once with
// each variant (the order alternates between rounds), so that the variants
// see the same machine load. GOMAXPROCS (-cpu) sets the threads. The
// variants are the kernel sets the CPU runs (avx512 where it has AVX-512,
// then avx2; on an AMD Zen 4 or Zen 5 its choice, avx512-zen4 or
// avx512-zen5, then avx512; with KVQ_BENCH_ZEN4 on another CPU with
// AVX-512, avx512 then avx512-zen4); with
// KVQ_BENCH_PAR the chunked and the static row split (par.ForceStatic);
// with KVQ_BENCH_SPIN the workers polling between products and parking at
// once (par.ForceNoSpin); with KVQ_BENCH_MMAP the weights as loaded by
// default ("default": read into transparent huge pages where the machine
// has them, mmap.Weights) and mapped from the file in place
// (LoadOptions.Mmap, a second copy of the model); with KVQ_BENCH_F32ACT
// the backend's decode products and "f32act", a runner on
// cpu.Backend.F32Activations (float32 activations where the default
// quantizes them, as kvq did before: Q8_0 weights' decode products, for
// one); with KVQ_BENCH_LOAD=1 the default set "idle"
// and "loaded", the same decode while another process (this test binary,
// re-executed to spin on one thread) holds one core.
//
// KVQ_BENCH_CACHE picks the cache spec (default fp16) and KVQ_BENCH_DEPTH
// the context the tokens are decoded at (default 0): that many tokens are
// prefilled once, and every decode runs in a fork of them that is dropped
// afterwards (llama-batched-bench's S_TG at -npp depth -ntg 8 -npl 1);
// that one prefill's tokens/s is reported too (its S_PP).
//
// It reports each variant's median tokens/s, "speedup" (the median over
// rounds of the second variant's time over the first's; for the load
// variants "loaded-of-idle", its inverse) and "<variant>-of-limit":
// tokens/s over the weight-streaming limit, the read bandwidth divided by
// the weight bytes a token streams (of a mixture of experts, the active
// weights: the dense matrices and ExpertsUsed of Experts experts per
// layer; MB-weights/tok). The bandwidth (GB/s-mem, the median
// over rounds) is measured in every round too, between the variants, by
// simd.MeasureBandwidthParallel over 1 GiB with GOMAXPROCS workers.
func BenchmarkDecodeGGUF(b *testing.B) {
	m := benchGGUF(b, false)
	const run = 8
	depth := envInt(b, "KVQ_BENCH_DEPTH", 0)
	spec := cmp.Or(os.Getenv("KVQ_BENCH_CACHE"), "fp16")
	ctx := context.Background()
	var depthSecs float64
	// decoder returns the decode of run tokens in a fork of a sequence
	// at depth on runner r.
	decoder := func(r *kvrt.Runner) func() time.Duration {
		m := r.Model()
		c := newCache(b, r, spec, 2*((depth+run)/16+3))
		if err := c.AddSeq(0); err != nil {
			b.Fatal(err)
		}
		if depth > 0 {
			t0 := time.Now()
			if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: tokens(depth, m.Vocab, 3), Logits: kvrt.NoLogits}}); err != nil {
				b.Fatal(err)
			}
			depthSecs = time.Since(t0).Seconds()
		}
		return func() time.Duration {
			if err := c.Fork(1, 0); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			for i := 0; i < run; i++ {
				if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 1, Tokens: []int{(i*31 + 7) % m.Vocab}}}); err != nil {
					b.Fatal(err)
				}
			}
			d := time.Since(t0)
			if err := c.Remove(1); err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	decode := decoder(newRunner(b, m))
	type variant struct {
		name   string
		force  func() func()
		decode func() time.Duration // nil: decode
	}
	none := func() func() { return func() {} }
	vs := []variant{{simd.Kernels(), none, nil}}
	load := os.Getenv("KVQ_BENCH_LOAD") != ""
	switch {
	case load:
		vs = []variant{{"idle", none, nil}, {"loaded", func() func() { return startSpinner(b) }, nil}}
	case os.Getenv("KVQ_BENCH_MMAP") != "":
		vs = []variant{{"default", none, nil}, {"mmap", none, decoder(newRunner(b, benchGGUF(b, true)))}}
	case os.Getenv("KVQ_BENCH_PAR") != "":
		vs = append(vs, variant{"static", par.ForceStatic, nil})
	case os.Getenv("KVQ_BENCH_SPIN") != "":
		vs = append(vs, variant{"nospin", par.ForceNoSpin, nil})
	case os.Getenv("KVQ_BENCH_F32ACT") != "":
		r2, err := kvrt.NewRunner(m, kvrt.RunnerOptions{Backend: cpu.New(0).F32Activations()})
		if err != nil {
			b.Fatal(err)
		}
		vs = append(vs, variant{"f32act", none, decoder(r2)})
	case simd.Kernels() == "avx512-zen4", simd.Kernels() == "avx512-zen5":
		vs = append(vs, variant{"avx512", simd.ForceAVX512, nil})
	case simd.Kernels() == "avx512" && os.Getenv("KVQ_BENCH_ZEN4") != "":
		vs = append(vs, variant{"avx512-zen4", simd.ForceZen4, nil})
	case simd.Kernels() == "avx512":
		vs = append(vs, variant{"avx2", simd.ForceAVX2, nil})
	}
	for _, v := range vs {
		if v.decode != nil {
			v.decode() // warm up
		}
	}
	decode() // warm up: page the weights in
	wb := float64(activeWeightBytes(m))
	secs := make([][]float64, len(vs))
	var bws []float64
	var ratios []float64
	round := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for k := range vs {
			i := (k + round) % len(vs)
			restore := vs[i].force()
			dec := decode
			if vs[i].decode != nil {
				dec = vs[i].decode
			}
			secs[i] = append(secs[i], dec().Seconds()/run)
			restore()
			if k == 0 {
				b.StopTimer() // its 1 GiB buffer is not the decode's
				bws = append(bws, simd.MeasureBandwidthParallel(1<<30, runtime.GOMAXPROCS(0)))
				b.StartTimer()
			}
		}
		if len(vs) > 1 {
			ratios = append(ratios, secs[1][round]/secs[0][round])
		}
		round++
	}
	b.StopTimer()
	bw := median(bws)
	limit := bw / wb
	for i, v := range vs {
		b.ReportMetric(1/median(secs[i]), v.name+"-tok/s")
		b.ReportMetric(1/median(secs[i])/limit, v.name+"-of-limit")
	}
	switch {
	case len(ratios) > 0 && load:
		b.ReportMetric(1/median(ratios), "loaded-of-idle")
	case len(ratios) > 0:
		b.ReportMetric(median(ratios), "speedup")
	}
	if depth > 0 {
		b.ReportMetric(float64(depth)/depthSecs, "depth-prefill-tok/s") // one run, as S_PP
	}
	b.ReportMetric(bw/1e9, "GB/s-mem")
	b.ReportMetric(wb/1e6, "MB-weights/tok")
}

// BenchmarkPrefillGGUF measures the prefill of a KVQ_BENCH_PROMPT-token
// prompt (default 512) into an empty KVQ_BENCH_CACHE cache (default fp16)
// on the GGUF file of KVQ_BENCH_GGUF, as llama-bench -p N -n 0 does, and
// reports the median prompt tokens/s over rounds:
//
//	KVQ_BENCH_GGUF=/tmp/bench-1b.gguf KVQ_BENCH_PROMPT=2048 go test -run '^$' -bench PrefillGGUF -benchtime 3x -cpu 2 ./pkg/runtime/
//
// With KVQ_BENCH_F32ACT every round prefills on a second runner too, on
// cpu.Backend.F32Activations (float32 activations where the default
// quantizes them: Q8_0 weights' prefill, whose packed fp32 GEMM the int8
// one of simd.MatMulQ80Q80 replaced), the order alternating between
// rounds; it reports "f32act-prompt-tok/s" and "speedup" (the median over
// rounds of the f32act time over the default's). KVQ_BENCH_AVX2 runs
// both on the avx2 set (simd.ForceAVX2).
func BenchmarkPrefillGGUF(b *testing.B) {
	if os.Getenv("KVQ_BENCH_AVX2") != "" {
		defer simd.ForceAVX2()()
	}
	m := benchGGUF(b, false)
	n := envInt(b, "KVQ_BENCH_PROMPT", 512)
	spec := cmp.Or(os.Getenv("KVQ_BENCH_CACHE"), "fp16")
	ctx := context.Background()
	prompt := tokens(n, m.Vocab, 5)
	prefiller := func(r *kvrt.Runner) func() float64 {
		c := newCache(b, r, spec, 2*(n/16+2))
		return func() float64 {
			if err := c.AddSeq(0); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if _, err := r.Forward(ctx, []kvrt.Entry{{Cache: c, Seq: 0, Tokens: prompt, Logits: kvrt.NoLogits}}); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0).Seconds()
			if err := c.Remove(0); err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	runs := []func() float64{prefiller(newRunner(b, m))}
	if os.Getenv("KVQ_BENCH_F32ACT") != "" {
		r2, err := kvrt.NewRunner(m, kvrt.RunnerOptions{Backend: cpu.New(0).F32Activations()})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, prefiller(r2))
	}
	secs := make([][]float64, len(runs))
	var ratios []float64
	round := 0
	b.ReportAllocs()
	for b.Loop() {
		for k := range runs {
			i := (k + round) % len(runs)
			secs[i] = append(secs[i], runs[i]())
		}
		if len(runs) > 1 {
			ratios = append(ratios, secs[1][round]/secs[0][round])
		}
		round++
	}
	b.ReportMetric(float64(n)/median(secs[0]), "prompt-tok/s")
	if len(runs) > 1 {
		b.ReportMetric(float64(n)/median(secs[1]), "f32act-prompt-tok/s")
		b.ReportMetric(median(ratios), "speedup")
	}
}

// activeWeightBytes are the weight bytes one decoded token streams: every
// matrix but the embedding (unless tied to the output head), and of a
// mixture of experts' expert matrices only the ExpertsUsed of Experts a
// token is routed to.
func activeWeightBytes(m *kvrt.Model) int64 {
	n := m.WeightBytes()
	if !m.TiedEmbeddings {
		n -= m.Embed.Bytes()
	}
	if m.Experts == 0 {
		return n
	}
	var exp int64
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, ws := range [][]*tensor.Weight{l.ExpGate, l.ExpUp, l.ExpDown} {
			for _, w := range ws {
				if w != nil {
					exp += w.Bytes()
				}
			}
		}
	}
	return n - exp + exp*int64(m.ExpertsUsed)/int64(m.Experts)
}

// benchGGUF loads the model of KVQ_BENCH_GGUF, skipping when it is unset.
func benchGGUF(b *testing.B, mapOnly bool) *kvrt.Model {
	path := os.Getenv("KVQ_BENCH_GGUF")
	if path == "" {
		b.Skip("KVQ_BENCH_GGUF is not set (go run ./scripts/benchmodel -shape 1b -o /tmp/bench-1b.gguf)")
	}
	m, err := kvrt.Load(context.Background(), path, kvrt.LoadOptions{Mmap: mapOnly})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// envInt is the integer in environment variable name, or def when unset.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		b.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return v
}

// spinnerEnv makes the test binary a spinner (TestMain): one thread that
// computes until it is killed, the "other process" of KVQ_BENCH_LOAD.
const spinnerEnv = "KVQ_BENCH_SPINNER"

// startSpinner starts a spinner process and waits until it runs; the
// function it returns kills it.
func startSpinner(b *testing.B) func() {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinnerEnv+"=1", "GOMAXPROCS=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 1)); err != nil { // it writes one byte once spinning
		b.Fatal(err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// spin computes forever on the calling thread, after telling its parent.
func spin() {
	os.Stdout.Write([]byte{'\n'})
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			os.Stdout.Write([]byte{'\n'}) // never: keeps x live
		}
	}
}

// TestMain runs the tests, or spins when started as a spinner.
func TestMain(m *testing.M) {
	if os.Getenv(spinnerEnv) != "" {
		spin()
	}
	os.Exit(m.Run())
}
