package eval_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// evalCacheSets are BenchmarkRunCachesRoundRobin's cache lists: the
// baseline alone, then with 1, 2 and 4 candidates.
var evalCacheSets = []string{"fp16", "fp16,int4", "fp16,int4,fp8", "fp16,int4,fp8,int8,kivi2"}

// BenchmarkRunCachesRoundRobin times eval.Run on the built-in probe model
// (read from the repository's datasets/models/kvq-probe) with the
// baseline alone and with 1, 2 and 4 candidates, each round running the
// four in turn: one 2,048-token text chunk and the probe suites at 8
// examples each (passkey at 1K, multi-key, copy, JSON, safety), 2
// workers, no speed measurement. It reports each set's median seconds
// ("N<n>-s") and the median over rounds of its time over the baseline's
// in the same round ("N<n>-x-baseline"), whose excess divided by the
// candidates is the cost of one extra cache ("N<n>-extra-per-cache").
func BenchmarkRunCachesRoundRobin(b *testing.B) {
	m, err := runtime.Load(context.Background(), "../../datasets/models/kvq-probe", runtime.LoadOptions{})
	if err != nil {
		b.Skipf("the built-in model is not in this checkout: %v", err)
	}
	defer m.Close()
	g := datasets.New(datasets.Eval, 1)
	var text strings.Builder
	for text.Len() < 2400 {
		text.WriteString(g.Story().Answer)
	}
	suites, err := eval.BuildSuites(context.Background(), []string{eval.SuitePasskey, eval.SuiteMultiKey, eval.SuiteCopy, eval.SuiteJSON, eval.SuiteSafety},
		eval.SuiteOptions{N: 8, PasskeyContexts: []int{1024}, ModelContext: m.ContextLen})
	if err != nil {
		b.Fatal(err)
	}
	times := make([][]float64, len(evalCacheSets))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, set := range evalCacheSets {
			t0 := time.Now()
			_, err := eval.Run(context.Background(), m, eval.Options{Specs: parseSpecs(b, set), Workers: 2, Suites: suites,
				Texts: []eval.Text{{Body: text.String()}}, TextOpts: eval.TextOptions{MaxChunks: 1}})
			if err != nil {
				b.Fatal(err)
			}
			times[k] = append(times[k], time.Since(t0).Seconds())
		}
	}
	b.StopTimer()
	for k, set := range evalCacheSets {
		n := len(strings.Split(set, ","))
		name := fmt.Sprintf("N%d", n)
		rel := make([]float64, len(times[k]))
		for i := range rel {
			rel[i] = times[k][i] / times[0][i]
		}
		b.ReportMetric(med(times[k]), name+"-s")
		if n > 1 {
			b.ReportMetric(med(rel), name+"-x-baseline")
			b.ReportMetric((med(rel)-1)/float64(n-1), name+"-extra-per-cache")
		}
	}
}

func med(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}

// BenchmarkTeacherForcedSideBySide times eval.TeacherForced over one
// 256-token chunk with each of 5 caches alone (fp16, fp8, int8, int4,
// kivi2: kvq eval's default set) and with the 5 side by side, in turn each
// round, on a ~100M-parameter F16 Llama shape with a 32,000-token
// vocabulary (random weights; the test tokenizer's ids). Side by side,
// each cache's forward is its single pass less the shared first layer,
// and scoring a candidate's logits (its log-softmax and KLD against the
// baseline) costs about what the baseline's own scoring does: the 5 cost
// about the sum of the 5 alone. It reports the median seconds, wall and
// CPU, of the fp16 cache alone ("1-s", "1-cpu-s") and of the 5 side by
// side ("5-s", "5-cpu-s"), and the medians over rounds of the 5 side by
// side over fp16 alone ("5-x", "5-cpu-x") and over the sum of the 5 alone
// ("5-over-sum", "5-cpu-over-sum"; CPU time is the steadier on a shared
// machine). Run it with -benchtime 3x.
func BenchmarkTeacherForcedSideBySide(b *testing.B) {
	tiny, _ := tinyModel(b, "fp16")
	m, err := modeltest.RandomModel(runtime.Config{Arch: "llama", Dim: 1024, Hidden: 2816, Layers: 8, Heads: 16, KVHeads: 8, HeadDim: 64,
		Vocab: 32000, ContextLen: 4096, RMSEps: 1e-5, RopeTheta: 10000}, tensor.F16, 1)
	if err != nil {
		b.Fatal(err)
	}
	m.Tokenizer = tiny.Tokenizer
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{AsAlone: true})
	if err != nil {
		b.Fatal(err)
	}
	g := datasets.New(datasets.Eval, 1)
	var text strings.Builder
	for text.Len() < 2400 {
		text.WriteString(g.Story().Answer)
	}
	five := "fp16,fp8,int8,int4,kivi2"
	sets := append(strings.Split(five, ","), five) // each alone, then side by side
	times, cpu := make([][]float64, len(sets)), make([][]float64, len(sets))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, set := range sets {
			t0, c0 := time.Now(), processCPUTime()
			_, err := eval.TeacherForced(context.Background(), r, parseSpecs(b, set), []eval.Text{{Body: text.String()}}, eval.TextOptions{Ctx: 256, MaxChunks: 1})
			if err != nil {
				b.Fatal(err)
			}
			times[k] = append(times[k], time.Since(t0).Seconds())
			cpu[k] = append(cpu[k], (processCPUTime() - c0).Seconds())
		}
	}
	b.StopTimer()
	side := len(sets) - 1
	ratios := func(t [][]float64) (x, overSum []float64) {
		for i := range t[side] {
			sum := 0.0
			for k := range side {
				sum += t[k][i]
			}
			x, overSum = append(x, t[side][i]/t[0][i]), append(overSum, t[side][i]/sum)
		}
		return x, overSum
	}
	x, overSum := ratios(times)
	xc, overSumC := ratios(cpu)
	b.ReportMetric(med(times[0]), "1-s")
	b.ReportMetric(med(cpu[0]), "1-cpu-s")
	b.ReportMetric(med(times[side]), "5-s")
	b.ReportMetric(med(cpu[side]), "5-cpu-s")
	b.ReportMetric(med(x), "5-x")
	b.ReportMetric(med(xc), "5-cpu-x")
	b.ReportMetric(med(overSum), "5-over-sum")
	b.ReportMetric(med(overSumC), "5-cpu-over-sum")
}
