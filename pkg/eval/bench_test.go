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
