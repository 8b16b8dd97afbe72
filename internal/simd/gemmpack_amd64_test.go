//go:build amd64 && gc && !purego

package simd

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// BenchmarkMatMulPacked compares the packed prefill path with the 4×3 path
// it replaces above MatMulPackTokensF16/Q80, on one goroutine: every round
// runs the same product once each way, in alternating order, and it
// reports both GFLOP/s (medians) and "speedup", the 4×3 time over the
// packed time. This is how the thresholds were chosen:
//
//	go test -run '^$' -bench MatMulPacked -benchtime 8x ./internal/simd/
func BenchmarkMatMulPacked(b *testing.B) {
	r := newRand(b)
	for _, dt := range []string{"F16", "BF16", "Q80"} {
		for _, nt := range []int{32, 64, 128, 256, 512} {
			for _, sh := range [][2]int{{2048, 2048}, {8192, 2048}, {2048, 8192}} {
				rows, cols := sh[0], sh[1]
				if nt >= 256 && rows*cols > 2048*2048 {
					continue
				}
				b.Run(fmt.Sprintf("%s/nt=%d/%dx%d", dt, nt, rows, cols), func(b *testing.B) {
					x := randF32(r, nt*cols)
					dst := make([]float32, nt*rows)
					var call func()
					switch dt {
					case "F16", "BF16":
						w := randF16(r, rows*cols)
						call = func() { MatMulF16(dst, rows, x, nt, cols, w, 0, rows) }
						if dt == "BF16" {
							w = randBF16(r, rows*cols)
							call = func() { MatMulBF16(dst, rows, x, nt, cols, w, 0, rows) }
						}
					case "Q80":
						w := randQ80(r, rows*cols/q80BlockSize)
						call = func() { MatMulQ80(dst, rows, x, nt, cols, w, 0, rows) }
					}
					b.Cleanup(func() { packTokensF16, packTokensQ80 = MatMulPackTokensF16, MatMulPackTokensQ80 })
					secs := make([][]float64, 2) // 4×3, packed
					round := 0
					for b.Loop() {
						for k := 0; k < 2; k++ {
							i := (k + round) % 2
							packTokensF16, packTokensQ80 = math.MaxInt, math.MaxInt
							if i == 1 {
								packTokensF16, packTokensQ80 = 0, 0
							}
							t0 := time.Now()
							call()
							secs[i] = append(secs[i], time.Since(t0).Seconds())
						}
						round++
					}
					med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
					fl := 2 * float64(nt) * float64(rows*cols)
					b.ReportMetric(fl/med(secs[0])/1e9, "4x3-GFLOP/s")
					b.ReportMetric(fl/med(secs[1])/1e9, "packed-GFLOP/s")
					b.ReportMetric(med(secs[0])/med(secs[1]), "speedup")
				})
			}
		}
	}
}
