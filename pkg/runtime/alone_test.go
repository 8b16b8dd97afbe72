package runtime_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// sideBySide are the caches of the AsAlone tests: an fp16 baseline and
// candidates, one of them twice.
var sideBySide = []string{"fp16", "q8_0", "q4_0", "fp32", "q4_0"}

// logitsRow is one row a step hands its LogitsFunc.
type logitsRow struct {
	e, i int
	v    []float32
}

// stream runs one step and returns the rows in the order they came.
func stream(t *testing.T, r *runtime.Runner, batch []runtime.Entry) []logitsRow {
	t.Helper()
	var rows []logitsRow
	err := r.Stream(context.Background(), batch, func(e, i int, v []float32) error {
		rows = append(rows, logitsRow{e, i, append([]float32(nil), v...)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// sameBits reports where a and b first differ in bits ("" when they do not).
func sameBits(a, b []float32) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d values, want %d", len(a), len(b))
	}
	for j := range a {
		if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
			return fmt.Sprintf("value %d is %v, want %v", j, a[j], b[j])
		}
	}
	return ""
}

// checkAlone runs steps (each a batch's tokens and logits per entry) twice:
// with every entry in one step of an AsAlone runner, and with each entry
// alone on a plain runner, over fresh caches of specs. Every logits row
// must have the same bits and come in the same order; shared is whether
// the AsAlone runner must have shared the first layer's work, whole
// how many steps must have shared every layer.
func checkAlone(t *testing.T, m *runtime.Model, specs []string, steps [][]runtime.Entry, shared bool, whole int) {
	t.Helper()
	alone, err := runtime.NewRunner(m, runtime.RunnerOptions{AsAlone: true})
	if err != nil {
		t.Fatal(err)
	}
	plain := newRunner(t, m)
	// side: in one step of the AsAlone runner; batched: in one step of
	// the plain runner (the order of the rows); single: each alone.
	side, batched, single := make([]runtime.Entry, len(specs)), make([]runtime.Entry, len(specs)), make([]runtime.Entry, len(specs))
	for i, s := range specs {
		for _, e := range []*runtime.Entry{&side[i], &batched[i], &single[i]} {
			r := plain
			if e == &side[i] {
				r = alone
			}
			e.Cache = newCache(t, r, s, 64)
			_ = e.Cache.AddSeq(0)
		}
	}
	for k, step := range steps {
		for i := range side {
			for _, e := range []*runtime.Entry{&side[i], &batched[i], &single[i]} {
				e.Tokens, e.Logits, e.Exact = step[i].Tokens, step[i].Logits, step[i].Exact
			}
		}
		got := stream(t, alone, side)
		order := stream(t, plain, batched)
		want := map[[2]int][]float32{}
		for e := range single {
			for _, row := range stream(t, plain, single[e:e+1]) {
				want[[2]int{e, row.i}] = row.v
			}
		}
		if len(got) != len(order) || len(got) != len(want) {
			t.Fatalf("step %d: %d rows, the plain runner's step %d, alone %d", k, len(got), len(order), len(want))
		}
		for j, row := range got {
			if row.e != order[j].e || row.i != order[j].i {
				t.Fatalf("step %d: row %d is entry %d's %d, want entry %d's %d", k, j, row.e, row.i, order[j].e, order[j].i)
			}
			if d := sameBits(row.v, want[[2]int{row.e, row.i}]); d != "" {
				t.Fatalf("step %d: cache %s (entry %d) row %d: %s (side by side against alone)", k, specs[row.e], row.e, row.i, d)
			}
		}
	}
	if n := alone.SharedSteps(); shared != (n > 0) {
		t.Errorf("%d steps shared their first layer's work, want shared %v", n, shared)
	}
	if n := alone.WholeSteps(); n != whole {
		t.Errorf("%d steps shared every layer, want %d", n, whole)
	}
}

// sameSteps is a prefill of n tokens with every logit, then decode steps,
// the same for each of k entries.
func sameSteps(k, n, vocab int) [][]runtime.Entry {
	var steps [][]runtime.Entry
	for s, toks := range [][]int{tokens(n, vocab, 1), {5}, {7}, {11}} {
		step := make([]runtime.Entry, k)
		for i := range step {
			step[i] = runtime.Entry{Tokens: toks, Logits: runtime.AllLogits}
			if s > 0 {
				step[i].Logits = runtime.LastLogits
			}
		}
		steps = append(steps, step)
	}
	return steps
}

// TestAsAloneMatchesAlone: caches side by side in one step (eval's
// teacher-forced text and decoding) give each cache the logits it has
// alone, bit for bit, in every family and weight type, with prompts
// below, across and above the packed products' token thresholds; and
// they share the first layer's work before its attention.
func TestAsAloneMatchesAlone(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "olmo2", "phi3"} {
		for _, dt := range []string{"F32", "F16", "BF16", "Q8_0"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "m.gguf")
				spec := modeltest.Spec{Arch: arch, Dim: 128, Hidden: 256, Heads: 4, KVHeads: 2, DType: dt, Seed: 3, Context: 1024}
				if arch == "phi3" {
					spec.RopeDim, spec.OriginalContext = 16, 256 // partial rotary, LongRoPE's q scale
				}
				if err := modeltest.WriteGGUF(p, spec); err != nil {
					t.Fatal(err)
				}
				m, err := runtime.Load(context.Background(), p, runtime.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				for _, n := range []int{3, 37, 100, 300} {
					steps := sameSteps(len(sideBySide), n, m.Vocab)
					checkAlone(t, m, sideBySide, steps, true, 0)
					// Hugging Face's prefill: the prompt reads its own
					// exact keys and values, every layer shared; the
					// decode steps read the caches.
					for i := range steps[0] {
						steps[0][i].Exact = true
					}
					checkAlone(t, m, sideBySide, steps, true, 1)
				}
			})
		}
	}
}

// TestAsAloneLogitsChunks: with a vocabulary large enough that the logits
// come in several chunks, entries of different lengths and logits (no
// sharing) still get their rows alone, in the plain runner's order.
func TestAsAloneLogitsChunks(t *testing.T) {
	m, err := modeltest.RandomModel(runtime.Config{Arch: "llama", Dim: 128, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 40000, ContextLen: 1024, RMSEps: 1e-5, RopeTheta: 10000}, tensor.F16, 1)
	if err != nil {
		t.Fatal(err)
	}
	specs := []string{"fp16", "q8_0", "q4_0", "fp16"}
	n := 250 // two chunks and a part of 104 logits rows
	steps := [][]runtime.Entry{
		{{Tokens: tokens(n, m.Vocab, 1), Logits: runtime.AllLogits}, {Tokens: tokens(n, m.Vocab, 1), Logits: runtime.AllLogits},
			{Tokens: tokens(40, m.Vocab, 2), Logits: runtime.AllLogits}, {Tokens: tokens(7, m.Vocab, 3), Logits: runtime.LastLogits}},
		{{Tokens: []int{5}, Logits: runtime.LastLogits}, {Tokens: []int{5}, Logits: runtime.NoLogits},
			{Tokens: tokens(130, m.Vocab, 4), Logits: runtime.AllLogits}, {Tokens: []int{9}, Logits: runtime.LastLogits}},
	}
	checkAlone(t, m, specs, steps, false, 0)
	checkAlone(t, m, specs, sameSteps(len(specs), n, m.Vocab), true, 0)
}

// sideConfig is the ~100M-parameter shape of the side-by-side benchmarks
// (interruptConfig's): rounds take seconds on 2 cores.
var sideConfig = interruptConfig

// sideRunners are the runners the side-by-side benchmarks compare: plain
// (caches batched as one: the 4-token decode kernel over their rows) and
// AsAlone (each cache's rows as alone, the first layer's work shared).
func sideRunners(b *testing.B, m *runtime.Model) (plain, alone *runtime.Runner) {
	alone, err := runtime.NewRunner(m, runtime.RunnerOptions{AsAlone: true})
	if err != nil {
		b.Fatal(err)
	}
	return newRunner(b, m), alone
}

// sideCaches makes one cache of each spec on r with sequence 0.
func sideCaches(b *testing.B, r *runtime.Runner, specs []string, blocks int) []runtime.Entry {
	var e []runtime.Entry
	for _, s := range specs {
		c := newCache(b, r, s, blocks)
		_ = c.AddSeq(0)
		e = append(e, runtime.Entry{Cache: c})
	}
	return e
}

// withTokens sets every entry's tokens and logits.
func withTokens(batch []runtime.Entry, toks []int, l runtime.Logits) []runtime.Entry {
	for i := range batch {
		batch[i].Tokens, batch[i].Logits = toks, l
	}
	return batch
}

// BenchmarkSideBySideDecode measures a decode step with 1 cache and with
// 5 caches side by side (fp16, fp8, int8, int4, kivi2: kvq eval's default
// set) at a depth of 512 tokens, on the ~100M-parameter F16 shape
// (vocabulary 32,000): the plain runner and the AsAlone runner eval uses.
// Each round runs 16 steps of each in turn (interleaved); it reports the
// median ms per step of each ("1-ms", "5-plain-ms", "5-alone-ms") and the
// median over rounds of the 5-cache step's time over the 1-cache one's in
// the same round ("5-plain-x", "5-alone-x"; eval's goal is at most
// 1 + 0.3·4 = 2.2). Run it with -benchtime 10x or more.
func BenchmarkSideBySideDecode(b *testing.B) {
	m, err := modeltest.RandomModel(sideConfig, tensor.F16, 1)
	if err != nil {
		b.Fatal(err)
	}
	const depth, steps = 512, 16
	plain, alone := sideRunners(b, m)
	five := []string{"fp16", "fp8", "int8", "int4", "kivi2"}
	blocks := 2 * ((depth+steps)/16 + 2)
	type setup struct {
		name    string
		r       *runtime.Runner
		batch   []runtime.Entry
		ms, cpu []float64
	}
	sets := []*setup{{name: "1", r: plain, batch: sideCaches(b, plain, five[:1], blocks)},
		{name: "5-plain", r: plain, batch: sideCaches(b, plain, five, blocks)},
		{name: "5-alone", r: alone, batch: sideCaches(b, alone, five, blocks)}}
	ctx := context.Background()
	prompt := tokens(depth, m.Vocab, 1)
	for _, s := range sets {
		if err := s.r.Stream(ctx, withTokens(s.batch, prompt, runtime.NoLogits), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sets {
			// Forks of the prompt, dropped after the round: the depth stays.
			for k := range s.batch {
				c := s.batch[k].Cache
				_ = c.Remove(1)
				if err := c.Fork(1, 0); err != nil {
					b.Fatal(err)
				}
				s.batch[k].Seq = 1
			}
			t0, c0 := time.Now(), cpuNow()
			pprof.Do(ctx, pprof.Labels("set", s.name), func(ctx context.Context) {
				for st := 0; st < steps; st++ {
					if _, err := s.r.Forward(ctx, withTokens(s.batch, []int{(i*steps + st) % m.Vocab}, runtime.LastLogits)); err != nil {
						b.Fatal(err)
					}
				}
			})
			s.ms = append(s.ms, time.Since(t0).Seconds()*1e3/steps)
			s.cpu = append(s.cpu, (cpuNow()-c0).Seconds()*1e3/steps)
		}
	}
	b.StopTimer()
	for _, s := range sets {
		reportSide(b, s.name, s.ms, s.cpu, sets[0].ms, sets[0].cpu)
	}
}

// BenchmarkSideBySidePrefill measures a 256-token prefill with every
// logit (a teacher-forced text chunk) with 1 cache and with 5 side by
// side, on BenchmarkSideBySideDecode's model, runners and caches, the
// three in turn each round. It reports the median ms of each and the
// median over rounds of the 5-cache prefill's time over the 1-cache one's
// ("5-plain-x", "5-alone-x": 5 less the first layer's shared work, a
// few hundredths, when nothing else costs per cache).
func BenchmarkSideBySidePrefill(b *testing.B) {
	m, err := modeltest.RandomModel(sideConfig, tensor.F16, 1)
	if err != nil {
		b.Fatal(err)
	}
	const n = 256
	plain, alone := sideRunners(b, m)
	five := []string{"fp16", "fp8", "int8", "int4", "kivi2"}
	type setup struct {
		name    string
		r       *runtime.Runner
		specs   []string
		ms, cpu []float64
	}
	sets := []*setup{{name: "1", r: plain, specs: five[:1]}, {name: "5-plain", r: plain, specs: five}, {name: "5-alone", r: alone, specs: five}}
	ctx := context.Background()
	ids := tokens(n, m.Vocab, 2)
	var sink float32
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sets {
			batch := withTokens(sideCaches(b, s.r, s.specs, n/16+2), ids, runtime.AllLogits)
			t0, c0 := time.Now(), cpuNow()
			var err error
			pprof.Do(ctx, pprof.Labels("set", s.name), func(ctx context.Context) {
				err = s.r.Stream(ctx, batch, func(e, i int, v []float32) error {
					sink += v[0]
					return nil
				})
			})
			if err != nil {
				b.Fatal(err)
			}
			s.ms = append(s.ms, time.Since(t0).Seconds()*1e3)
			s.cpu = append(s.cpu, (cpuNow()-c0).Seconds()*1e3)
		}
	}
	b.StopTimer()
	for _, s := range sets {
		reportSide(b, s.name, s.ms, s.cpu, sets[0].ms, sets[0].cpu)
	}
	_ = sink
}

// reportSide reports a set's median wall and CPU milliseconds and, beside
// the 1-cache set (ms1, cpu1), the medians of the per-round ratios.
func reportSide(b *testing.B, name string, ms, cpu, ms1, cpu1 []float64) {
	b.ReportMetric(median(ms), name+"-ms")
	b.ReportMetric(median(cpu), name+"-cpu-ms")
	if name == "1" {
		return
	}
	x, xc := make([]float64, len(ms)), make([]float64, len(ms))
	for i := range x {
		x[i], xc[i] = ms[i]/ms1[i], cpu[i]/cpu1[i]
	}
	b.ReportMetric(median(x), name+"-x")
	b.ReportMetric(median(xc), name+"-cpu-x")
}

// cpuNow is the process's CPU time (0 where it cannot be read).
func cpuNow() time.Duration {
	d, _ := processCPUTime()
	return d
}

// TestAsAloneOptionalOps: families whose blocks ask the backend for an
// optional interface (Gemma's SoftcapOps, the experts' backend.MoE) run
// side by side unshared, and still give each cache its logits alone.
func TestAsAloneOptionalOps(t *testing.T) {
	for _, spec := range []modeltest.Spec{
		{Arch: "gemma2", HeadDim: 32, SlidingWindow: 8, AttnSoftcap: 4, FinalSoftcap: 10, Seed: 7},
		{Arch: "gemma3", Layers: 7, HeadDim: 32, SlidingWindow: 8, Seed: 8},
		{Arch: "mixtral", HeadDim: 32, Experts: 4, ExpertsUsed: 2, Seed: 9},
	} {
		t.Run(spec.Arch, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := modeltest.WriteGGUF(p, spec); err != nil {
				t.Fatal(err)
			}
			m, err := runtime.Load(context.Background(), p, runtime.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkAlone(t, m, sideBySide, sameSteps(len(sideBySide), 37, m.Vocab), false, 0)
		})
	}
}
