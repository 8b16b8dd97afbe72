package simd

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkMatMulQ80Q80 times, in interleaved rounds on the same Q8_0
// weights and float32 token rows, MatMulQ80 (float32 activations, the
// packed fp32 GEMM at these token counts) and QuantizeQ80 of the rows plus
// MatMulQ80Q80 (the int8 path, quantization included), on the default set
// and under ForceAVX2; it reports each one's median GFLOP/s (2·nt·rows·cols
// a call; "fp32", "int8") and "speedup", the median over rounds of the
// fp32 time over the int8 time.
func BenchmarkMatMulQ80Q80(b *testing.B) {
	for _, shape := range [][2]int{{2048, 2048}, {8192, 2048}} {
		rows, cols := shape[0], shape[1]
		r := newRand(b)
		rb := cols / 32 * Q80BlockBytes
		w := randKBlocks(r, rows*cols/32, Q80BlockBytes, 0)
		for _, nt := range []int{32, 64, 128, 512} {
			x := randF32(r, nt*cols)
			q := make([]byte, nt*rb)
			dst := make([]float32, nt*rows)
			for _, set := range []string{"default", "avx2"} {
				b.Run(fmt.Sprintf("%dx%d/nt=%d/%s", rows, cols, nt, set), func(b *testing.B) {
					if set == "avx2" {
						defer ForceAVX2()()
					}
					runs := []func(){
						func() { MatMulQ80(dst, rows, x, nt, cols, w, 0, rows) },
						func() {
							for t := 0; t < nt; t++ {
								QuantizeQ80(q[t*rb:(t+1)*rb], x[t*cols:(t+1)*cols])
							}
							MatMulQ80Q80(dst, rows, q, nt, cols, w, 0, rows)
						},
					}
					secs := make([][]float64, len(runs))
					var ratios []float64
					round := 0
					for b.Loop() {
						for k := range runs {
							i := (k + round) % len(runs)
							t0 := time.Now()
							runs[i]()
							secs[i] = append(secs[i], time.Since(t0).Seconds())
						}
						ratios = append(ratios, secs[0][round]/secs[1][round])
						round++
					}
					med := func(v []float64) float64 {
						v = slices.Clone(v)
						slices.Sort(v)
						return v[len(v)/2]
					}
					flop := 2 * float64(nt) * float64(rows) * float64(cols)
					b.ReportMetric(flop/med(secs[0])/1e9, "fp32-GFLOP/s")
					b.ReportMetric(flop/med(secs[1])/1e9, "int8-GFLOP/s")
					b.ReportMetric(med(ratios), "speedup")
				})
			}
		}
	}
}

// BenchmarkMatMulQ80Q80Few times, in interleaved rounds, MatMulQ80Q80 and
// DotQ80Q80Rows per token row (what it takes below q8gMinTokens and on the
// other sets) over a few token rows, on three copies of 8192×2048 Q8_0
// weights in turn (from DRAM), reporting each one's median GB/s of weights
// ("rows", "tile") and "speedup", the median over rounds of the rows time
// over the tile time.
func BenchmarkMatMulQ80Q80Few(b *testing.B) {
	const rows, cols = 8192, 2048
	r := newRand(b)
	rb := cols / 32 * Q80BlockBytes
	ring := make([][]byte, 3)
	for i := range ring {
		ring[i] = randKBlocks(r, rows*cols/32, Q80BlockBytes, 0)
	}
	for _, nt := range []int{2, 3, 4, 8, 16} {
		x := randF32(r, nt*cols)
		q := make([]byte, nt*rb)
		for t := 0; t < nt; t++ {
			QuantizeQ80(q[t*rb:(t+1)*rb], x[t*cols:(t+1)*cols])
		}
		dst := make([]float32, nt*rows)
		b.Run(fmt.Sprintf("nt=%d", nt), func(b *testing.B) {
			runs := []func(w []byte){
				func(w []byte) {
					for t := 0; t < nt; t++ {
						DotQ80Q80Rows(dst[t*rows:(t+1)*rows], w, q[t*rb:(t+1)*rb])
					}
				},
				func(w []byte) { MatMulQ80Q80(dst, rows, q, nt, cols, w, 0, rows) },
			}
			secs := make([][]float64, len(runs))
			var ratios []float64
			round, m := 0, 0
			for b.Loop() {
				for k := range runs {
					i := (k + round) % len(runs)
					t0 := time.Now()
					runs[i](ring[m%len(ring)])
					secs[i] = append(secs[i], time.Since(t0).Seconds())
					m++
				}
				ratios = append(ratios, secs[0][round]/secs[1][round])
				round++
			}
			med := func(v []float64) float64 {
				v = slices.Clone(v)
				slices.Sort(v)
				return v[len(v)/2]
			}
			b.ReportMetric(float64(rows*rb)/med(secs[0])/1e9, "rows-GB/s")
			b.ReportMetric(float64(rows*rb)/med(secs[1])/1e9, "tile-GB/s")
			b.ReportMetric(med(ratios), "speedup")
		})
	}
}
