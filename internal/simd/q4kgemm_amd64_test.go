//go:build amd64 && gc && !purego

package simd

import (
	"fmt"
	"testing"
)

// BenchmarkMatMulQ4KQ8KFew times, in interleaved rounds, DotQ4KQ8KRows
// per token row (what MatMulQ4KQ8K takes below q4kgMinTokens and on the
// other sets) and the tile GEMM (q4kgPanels) over a few token rows, on
// three copies of 8192×2048 q4_K weights in turn (from DRAM), then the
// same for q5_K (DotQ5KQ8K per row) and q6_K (DotQ6KQ8KRows), reporting each one's median GB/s of
// weights ("rows", "tile") and "speedup", the median over rounds of the
// rows time over the tile time.
func BenchmarkMatMulQ4KQ8KFew(b *testing.B) {
	for _, typ := range []int{4, 5, 6} {
		benchKQ8KFew(b, typ)
	}
}

func benchKQ8KFew(b *testing.B, typ int) {
	const rows, cols = 8192, 2048
	r := newRand(b)
	nb := cols / kBlockSize
	bb, at, rowsDot, name := q4KBlockBytes, 0, DotQ4KQ8KRows, "q4K"
	switch typ {
	case 5:
		bb, at, name = q5KBlockBytes, 0, "q5K"
		rowsDot = func(dst []float32, w, q []byte) {
			for i := range dst {
				dst[i] = DotQ5KQ8K(w[i*len(w)/len(dst):(i+1)*len(w)/len(dst)], q)
			}
		}
	case 6:
		bb, at, rowsDot, name = q6KBlockBytes, 208, DotQ6KQ8KRows, "q6K"
	}
	rb, qb := nb*bb, nb*Q8KBlockBytes
	ring := make([][]byte, 3)
	for i := range ring {
		ring[i] = randKBlocks(r, rows*nb, bb, at)
	}
	for _, nt := range []int{1, 2, 3, 4, 6, 8, 16} {
		x := randF32(r, nt*cols)
		q := make([]byte, nt*qb)
		for t := 0; t < nt; t++ {
			QuantizeQ8K(q[t*qb:(t+1)*qb], x[t*cols:(t+1)*cols])
		}
		dst := make([]float32, nt*rows)
		b.Run(fmt.Sprintf("%s/nt=%d", name, nt), func(b *testing.B) {
			if !useAVX512 || !useVNNI {
				b.Skip("the tile GEMM needs AVX-512 VNNI")
			}
			m := 0
			secs := q4kgRounds(b, []func(){
				func() {
					w := ring[m%len(ring)]
					m++
					for t := 0; t < nt; t++ {
						rowsDot(dst[t*rows:(t+1)*rows], w, q[t*qb:(t+1)*qb])
					}
				},
				func() {
					w := ring[m%len(ring)]
					m++
					q4kgPanels(dst, rows, q, nt, nb, w, 0, rows, typ)
				},
			})
			ratios := make([]float64, len(secs[0]))
			for i := range ratios {
				ratios[i] = secs[0][i] / secs[1][i]
			}
			b.ReportMetric(float64(rows*rb)/q4kgMedian(secs[0])/1e9, "rows-GB/s")
			b.ReportMetric(float64(rows*rb)/q4kgMedian(secs[1])/1e9, "tile-GB/s")
			b.ReportMetric(q4kgMedian(ratios), "speedup")
		})
	}
}
