package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// BenchmarkDecodeQ80 times one-token products of Q8_0 matrices (2048 and
// 8192 rows of 2048 columns) on the backend's quantized activations
// (simd.QuantizeQ80, DotQ80Q80Rows) and with F32Activations (simd.MatMulQ80
// on float32 activations), on GOMAXPROCS workers: every round runs 16
// products with each variant, the order alternating between rounds, and it
// reports each variant's median µs a product and "speedup", the median
// over rounds of the fp32 time over the quantized one.
func BenchmarkDecodeQ80(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const cols, reps = 2048, 16
	for _, rows := range []int{2048, 8192} {
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(r.NormFloat64() * 0.05)
		}
		be := cpu.New(0)
		m, err := be.Upload(modeltest.WeightFromF32("w", tensor.Q80, rows, cols, vals))
		if err != nil {
			b.Fatal(err)
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		dst := make([]float32, rows)
		vs := []backend.Backend{be, be.F32Activations()}
		b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
			run := func(v backend.Backend) float64 {
				t0 := time.Now()
				for range reps {
					v.MatMul(cpu.Wrap(dst), cpu.Wrap(x), 1, m)
				}
				return time.Since(t0).Seconds() / reps
			}
			run(vs[0])
			run(vs[1])
			var secs [2][]float64
			var ratios []float64
			round := 0
			for b.Loop() {
				for k := range vs {
					i := (k + round) % 2
					secs[i] = append(secs[i], run(vs[i]))
				}
				ratios = append(ratios, secs[1][round]/secs[0][round])
				round++
			}
			b.ReportMetric(median(secs[0])*1e6, "q8-µs")
			b.ReportMetric(median(secs[1])*1e6, "f32-µs")
			b.ReportMetric(median(ratios), "speedup")
		})
	}
}
