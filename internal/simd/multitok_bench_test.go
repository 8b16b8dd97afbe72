package simd

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkMatMulEach measures the side-by-side decode product of
// MatMulEach* on one goroutine, weights streaming from DRAM (a ring of
// 2048×2048 matrices, 256 MiB in all, one matrix a call): each round runs,
// in an order that rotates from round to round, "one" (MatMul* of one
// token row, a single cache's step), "each" (MatMulEach* of nt token rows,
// the multi-token kernels) and "loop" (the nt rows one after another per
// chunk of 32 weight rows, as pkg/runtime/cpu did before: the chunk read
// from DRAM once, then from L2) and "batch" (MatMul* of the nt rows in one
// call, the engine's batched decode of nt sequences). It reports the
// median ms of each and the medians over rounds of each/one, loop/one
// (eval's goal for 5 caches: at most 1 + 0.3·4 = 2.2) and batch/one. Run
// it with -benchtime 100x or so.
func BenchmarkMatMulEach(b *testing.B) {
	const rows, cols, ringBytes = 2048, 2048, 256 << 20
	for _, dt := range []string{"F16", "Q80"} {
		for _, nt := range []int{3, 4, 5} {
			b.Run(fmt.Sprintf("%s/nt=%d", dt, nt), func(b *testing.B) {
				r := newRand(b)
				var one, each func(m int, dst, x []float32, nt, lo, hi int)
				var copies int
				switch dt {
				case "F16":
					ring := cloneRing(randF16(r, rows*cols), ringBytes/(2*rows*cols))
					copies = len(ring)
					one = func(m int, dst, x []float32, nt, lo, hi int) { MatMulF16(dst, rows, x, nt, cols, ring[m], lo, hi) }
					each = func(m int, dst, x []float32, nt, lo, hi int) { MatMulEachF16(dst, rows, x, nt, cols, ring[m], lo, hi) }
				case "Q80":
					mBytes := rows * cols / q80BlockSize * q80BlockBytes
					ring := cloneRing(randQ80(r, rows*cols/q80BlockSize), ringBytes/mBytes)
					copies = len(ring)
					one = func(m int, dst, x []float32, nt, lo, hi int) { MatMulQ80(dst, rows, x, nt, cols, ring[m], lo, hi) }
					each = func(m int, dst, x []float32, nt, lo, hi int) { MatMulEachQ80(dst, rows, x, nt, cols, ring[m], lo, hi) }
				}
				x := randF32(r, nt*cols)
				dst := make([]float32, nt*rows)
				runs := []func(m int){
					func(m int) { one(m, dst, x, 1, 0, rows) },
					func(m int) { each(m, dst, x, nt, 0, rows) },
					func(m int) {
						for lo := 0; lo < rows; lo += 32 {
							for t := 0; t < nt; t++ {
								one(m, dst[t*rows:], x[t*cols:(t+1)*cols], 1, lo, lo+32)
							}
						}
					},
					func(m int) { one(m, dst, x, nt, 0, rows) },
				}
				names := []string{"one", "each", "loop", "batch"}
				secs := make([][]float64, len(runs))
				var eachX, loopX, batchX []float64
				round, m := 0, 0
				for b.Loop() {
					for k := range runs {
						i := (k + round) % len(runs)
						t0 := time.Now()
						runs[i](m % copies)
						secs[i] = append(secs[i], time.Since(t0).Seconds())
						m++
					}
					eachX = append(eachX, secs[1][round]/secs[0][round])
					loopX = append(loopX, secs[2][round]/secs[0][round])
					batchX = append(batchX, secs[3][round]/secs[0][round])
					round++
				}
				med := func(v []float64) float64 {
					v = slices.Clone(v)
					slices.Sort(v)
					return v[len(v)/2]
				}
				for i, name := range names {
					b.ReportMetric(med(secs[i])*1e3, name+"-ms")
				}
				b.ReportMetric(med(eachX), "each/one")
				b.ReportMetric(med(loopX), "loop/one")
				b.ReportMetric(med(batchX), "batch/one")
			})
		}
	}
}
