package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// benchFormats are the formats of the decode-attention benchmark:
// defaultBenchFormats, or the comma-separated list in $KVQ_BENCH_FORMATS
// (fp16 is always added, as the baseline of the round-robin ratios).
var benchFormats = func() []string {
	env := os.Getenv("KVQ_BENCH_FORMATS")
	if env == "" {
		return defaultBenchFormats
	}
	fs := strings.Split(env, ",")
	if !slices.Contains(fs, "fp16") {
		fs = append([]string{"fp16"}, fs...)
	}
	return fs
}()

var defaultBenchFormats = []string{"fp16", "bf16", "fp32", "fp8", "fp8-e5m2", "int8", "int4", "int4:g32:channel", "int2", "kivi4", "kivi2", "quanto4",
	"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q4_0:rot", "turbo4", "turbo3", "kvquant4", "kvquant3"}

// BenchmarkAttentionStep measures one decode-attention step of one layer:
// 8 KV heads of head_dim 128, GQA group 4 (32 query heads), over a context
// of 4K, 16K or 32K tokens, on one goroutine (workers=1). SetBytes is the K/V bytes the
// step reads, so MB/s is the effective read bandwidth; compare ns/op with the
// fp16 line of the same context.
func BenchmarkAttentionStep(b *testing.B) { benchAttention(b, 1) }

// BenchmarkAttentionStepParallel is BenchmarkAttentionStep with the KV heads
// split across all CPUs, as the runtime runs attention.
func BenchmarkAttentionStepParallel(b *testing.B) { benchAttention(b, 0) }

func benchAttention(b *testing.B, workers int) {
	reg := quant.Formats()
	for _, ctx := range []int{4096, 16384, 32768} {
		for _, name := range benchFormats {
			f, err := reg.Lookup(name)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("ctx=%d/%s", ctx, name), func(b *testing.B) {
				st, err := newStepBench(f, ctx, workers)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(st.bytes)
				b.ReportAllocs()
				if workers == 1 {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
				}
				cpu0, ok := threadCPUTime()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					st.step()
				}
				if cpu1, _ := threadCPUTime(); ok && workers == 1 {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkAttentionStepRoundRobin runs the step of BenchmarkAttentionStep
// for every format in turn, b.N rounds, on one goroutine: each round times
// one step per format, back to back, so a format and fp16 are measured in
// the same few milliseconds and machine noise (other tenants, frequency)
// hits both. It reports, per format, the median over rounds of its time
// divided by fp16's in the same round ("<format>-x-fp16"), its median step
// time ("<format>-ms") and the K/V bytes one step reads ("<format>-MB"; MB
// over ms is the effective read bandwidth). Run it with -benchtime 30x or
// more.
func BenchmarkAttentionStepRoundRobin(b *testing.B) {
	for _, ctx := range []int{4096, 16384, 32768} {
		b.Run(fmt.Sprintf("ctx=%d", ctx), func(b *testing.B) {
			names, steps := stepBenches(b, ctx)
			fns := make([]func(), len(steps))
			for j, st := range steps {
				fns[j] = st.step
			}
			times := roundRobin(b, fns)
			base := times[slices.Index(names, "fp16")]
			for j, name := range names {
				b.ReportMetric(medianRatio(times[j], base), name+"-x-fp16")
				b.ReportMetric(median(times[j])/1e6, name+"-ms")
				b.ReportMetric(float64(steps[j].bytes)/1e6, name+"-MB")
			}
		})
	}
}

// benchRoPE is the runtime's rotary embedding for pre-RoPE keys
// (cpu.KeyRoPE; Hugging Face Llama's half-split layout, theta 10000), so
// that formats which rotate every cached key on every step pay for it here
// as they do in a model.
func benchRoPE(dim, ctx int) func([]float32, int) {
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = math.Pow(10000, -float64(2*i)/float64(dim))
	}
	return cpu.NewKeyRoPE(dim, inv, true, ctx).Rows
}

// roundRobin runs b.N rounds of steps, each step once a round in turn
// (interleaved, so that load changes hit every step alike), timing only
// the rounds; times[j][i] is step j's nanoseconds in round i.
func roundRobin(b *testing.B, steps []func()) [][]float64 {
	times := make([][]float64, len(steps))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, step := range steps {
			t0 := time.Now()
			step()
			times[j] = append(times[j], float64(time.Since(t0).Nanoseconds()))
		}
	}
	b.StopTimer()
	return times
}

// medianRatio is the median over rounds of a[i]/c[i].
func medianRatio(a, c []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / c[i]
	}
	return median(r)
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	if len(y) == 0 {
		return math.NaN()
	}
	return y[len(y)/2]
}

// stepBench is one decode-attention step over a filled cache: 8 KV heads
// of head_dim 128, GQA group 4, ctx tokens, on workers goroutines.
type stepBench struct {
	step  func()
	bytes int64 // K/V bytes one step reads
}

// stepBenches returns the decode steps of every format of benchFormats
// over ctx positions, on one goroutine, with their names.
func stepBenches(b *testing.B, ctx int) ([]string, []*stepBench) {
	reg := quant.Formats()
	var names []string
	var steps []*stepBench
	for _, name := range benchFormats {
		f, err := reg.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		st, err := newStepBench(f, ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		names, steps = append(names, name), append(steps, st)
	}
	return names, steps
}

// benchCache returns a fresh one-layer cache of format f (kvHeads KV heads
// of head_dim dim) with room for tokens positions, its sequence 0 added, on
// a backend of workers goroutines.
func benchCache(f quant.Format, kvHeads, dim, tokens, workers int) (*kvcache.Cache, *cpu.Backend, error) {
	l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: kvHeads, HeadDim: dim}, quant.Spec{K: f, V: f}, 0)
	if err != nil {
		return nil, nil, err
	}
	be := cpu.New(workers)
	opts := kvcache.Options{Blocks: l.BlocksFor(tokens), Storage: be}
	if l.AnyPreRoPE() {
		opts.RoPE = benchRoPE(dim, tokens)
	}
	c, err := kvcache.New(l, opts)
	if err != nil {
		return nil, nil, err
	}
	_ = c.AddSeq(0)
	return c, be, nil
}

func newStepBench(f quant.Format, ctx, workers int) (*stepBench, error) {
	const kvHeads, dim, group = 8, 128, 4
	c, be, err := benchCache(f, kvHeads, dim, ctx, workers)
	if err != nil {
		return nil, err
	}
	// ctx-1 tokens in steps of up to 1024, then a pending step of one
	// token whose attention over all ctx positions is the benchmark.
	rng := rand.New(rand.NewPCG(1, 2))
	var p *kvcache.Plan
	for n := 0; n < ctx; {
		m := min(1024, ctx-1-n)
		if m == 0 {
			m = 1
		}
		p, err = c.Reserve([]kvcache.Append{{Seq: 0, N: m}})
		if err != nil {
			return nil, err
		}
		k, v := make([]float32, m*kvHeads*dim), make([]float32, m*kvHeads*dim)
		for i := range k {
			k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		be.WriteKV(c.Storage(), 0, cpu.Wrap(k), cpu.Wrap(v), p)
		n += m
		if n < ctx {
			c.Commit(p)
		}
	}
	q := make([]float32, kvHeads*group*dim)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, len(q))
	w := par.Workers(workers)
	st := c.Stats()
	store := c.Storage().(*cpu.Storage)
	params := backend.AttnParams{Heads: kvHeads * group, Scale: 0.088}
	return &stepBench{
		bytes: st.InUse.K + st.InUse.V,
		step:  func() { store.Attend(out, q, nil, nil, 0, p, params, w) },
	}, nil
}

// prefillFormats are the formats of the prefill-attention benchmark: one of
// each family.
var prefillFormats = []string{"fp16", "fp8", "int8", "int4", "int4:g32:channel", "kivi2", "quanto4", "q8_0", "q4_0", "iq4_nl", "q4_0:rot", "turbo4", "kvquant4"}

// BenchmarkPrefillAttentionRoundRobin measures the attention of a 2K-token
// prefill of one layer (8 KV heads × head_dim 128, GQA group 4): the K/V
// writes and the causal attention of every token over the packed cache, on
// one goroutine, per format in turn within each round ("<format>-ms", and
// "<format>-x-fp16", the median over rounds of its time over fp16's), and
// the same step with one query token per task, as the runtime attended
// before query blocks ("<format>-perquery-ms", and "<format>-x-perquery",
// the median ratio of the block-tiled step to it). Run it with -benchtime
// 3x or more.
func BenchmarkPrefillAttentionRoundRobin(b *testing.B) {
	const n = 2048
	reg := quant.Formats()
	type run struct {
		name string
		step func()
	}
	var runs []run
	for _, name := range prefillFormats {
		f, err := reg.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, perQuery := range []bool{false, true} {
			step, err := newPrefillBench(f, n, perQuery)
			if err != nil {
				b.Fatal(err)
			}
			label := name
			if perQuery {
				label += "-perquery"
			}
			runs = append(runs, run{label, step})
		}
	}
	fns := make([]func(), len(runs))
	for j, r := range runs {
		fns[j] = r.step
	}
	times := roundRobin(b, fns)
	for j := 0; j < len(runs); j += 2 {
		name := runs[j].name
		b.ReportMetric(median(times[j])/1e6, name+"-ms")
		b.ReportMetric(median(times[j+1])/1e6, name+"-perquery-ms")
		b.ReportMetric(medianRatio(times[j], times[0]), name+"-x-fp16")
		b.ReportMetric(medianRatio(times[j], times[j+1]), name+"-x-perquery")
	}
}

// newPrefillBench returns one prefill step of n tokens over a fresh cache of
// format f: reserve, write the keys and values, attend, roll back.
func newPrefillBench(f quant.Format, n int, perQuery bool) (func(), error) {
	const kvHeads, dim, group = 8, 128, 4
	c, _, err := benchCache(f, kvHeads, dim, n, 1)
	if err != nil {
		return nil, err
	}
	store := c.Storage().(*cpu.Storage)
	if perQuery {
		cpu.SetQueryRows(store, group)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rows := func(m int) []float32 {
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	k, v, q := rows(n*kvHeads*dim), rows(n*kvHeads*dim), rows(n*kvHeads*group*dim)
	out := make([]float32, len(q))
	params := backend.AttnParams{Heads: kvHeads * group, Scale: 0.088}
	return func() {
		p, err := c.Reserve([]kvcache.Append{{Seq: 0, N: n}})
		if err != nil {
			panic(err)
		}
		store.Write(0, k, v, p)
		store.Attend(out, q, k, v, 0, p, params, par.Workers(1))
		c.Rollback(p)
	}, nil
}

// BenchmarkAttentionStepSets compares the kernel sets on the decode step of
// BenchmarkAttentionStep (one goroutine, 4096 positions, head_dim 128): each
// round runs every format's step once with the kernels the CPU selects and
// once with the AVX2 set (simd.ForceAVX2), in alternating order, and it
// reports per format the median over rounds of the AVX2 time over the
// default one ("<format>-speedup") and the default set's median step time.
// On a CPU without AVX-512 both are the AVX2 set and the speedups are 1.
//
//	go test -run '^$' -bench AttentionStepSets -benchtime 40x ./pkg/runtime/cpu/
func BenchmarkAttentionStepSets(b *testing.B) {
	names, steps := stepBenches(b, 4096)
	def := make([][]float64, len(steps))
	ratios := make([][]float64, len(steps))
	round := 0
	for b.Loop() {
		for j, st := range steps {
			var t [2]float64
			for k := range 2 {
				set := (k + round) % 2
				restore := func() {}
				if set == 1 {
					restore = simd.ForceAVX2()
				}
				t0 := time.Now()
				st.step()
				t[set] = float64(time.Since(t0).Nanoseconds())
				restore()
			}
			def[j] = append(def[j], t[0])
			ratios[j] = append(ratios[j], t[1]/t[0])
		}
		round++
	}
	for j, name := range names {
		b.ReportMetric(median(ratios[j]), name+"-speedup")
		b.ReportMetric(median(def[j])/1e6, name+"-ms")
	}
}

// BenchmarkPrefillProducts times the 1B benchmark model's F16 products
// (2048×2048, 512×2048, 8192×2048, 2048×8192) over 512 token rows on
// GOMAXPROCS goroutines, three ways in interleaved rounds: the packed chunks
// taken spread (par.ForTaskSpread, what matMul does), in order
// (par.ForceInOrder) and as one even share per goroutine
// (par.ForceStatic). It reports each way's median GFLOP/s and the median
// per-round ratio of the in-order time to the spread one
// ("spread-speedup").
//
//	go test -run '^$' -bench PrefillProducts -benchtime 10x -cpu 2 ./pkg/runtime/cpu/
func BenchmarkPrefillProducts(b *testing.B) {
	const nt = 512
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][2]int{{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}} {
		rows, cols := s[0], s[1]
		vals, x := normals(rng, rows*cols, 1), normals(rng, nt*cols, 1)
		be := cpu.New(0)
		m, err := be.Upload(modeltest.WeightFromF32("w", tensor.F16, rows, cols, vals))
		if err != nil {
			b.Fatal(err)
		}
		dst, src := cpu.Wrap(make([]float32, nt*rows)), cpu.Wrap(x)
		product := func(force func() func()) func() {
			return func() {
				if force != nil {
					defer force()()
				}
				be.MatMul(dst, src, nt, m)
			}
		}
		b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
			ways := []string{"spread", "inorder", "static"}
			times := roundRobin(b, []func(){product(nil), product(par.ForceInOrder), product(par.ForceStatic)})
			flop := float64(2 * rows * cols * nt)
			for j, name := range ways {
				b.ReportMetric(flop/median(times[j]), name+"-GFLOP/s")
			}
			b.ReportMetric(medianRatio(times[1], times[0]), "spread-speedup")
		})
	}
}
