package simd

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// kDecoder decodes q4_K or q6_K rows for MatMulDecoded, as
// pkg/runtime/cpu's rowDecoder does.
type kDecoder struct {
	w      []byte
	rb, bb int // bytes of a row, of a super-block
	decode func(dst []float32, src []byte)
}

func (d kDecoder) DecodeRow(dst []float32, r, c0 int) {
	off := r*d.rb + c0/kBlockSize*d.bb
	d.decode(dst, d.w[off:off+len(dst)/kBlockSize*d.bb])
}

// q4kgMedian returns the median of v.
func q4kgMedian(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// q4kgRounds runs runs in interleaved rounds under b.Loop (each round
// starting with another one) and returns each one's seconds by round.
func q4kgRounds(b *testing.B, runs []func()) [][]float64 {
	secs := make([][]float64, len(runs))
	round := 0
	for b.Loop() {
		for k := range runs {
			i := (k + round) % len(runs)
			t0 := time.Now()
			runs[i]()
			secs[i] = append(secs[i], time.Since(t0).Seconds())
		}
		round++
	}
	return secs
}

// BenchmarkMatMulQ4KQ8K times, in interleaved rounds on the same q4_K
// (then q5_K, q6_K) weights and float32 token rows, MatMulDecoded with the row
// decoder (the packed fp32 GEMM pkg/runtime/cpu runs for prefill) and
// QuantizeQ8K of the rows plus MatMulQ4KQ8K (MatMulQ5KQ8K, MatMulQ6KQ8K; the int8 path,
// quantization included), on the default set and under ForceAVX2; it
// reports each one's median GFLOP/s (2·nt·rows·cols a call; "fp32",
// "int8") and "speedup", the median over rounds of the fp32 time over the
// int8 time.
func BenchmarkMatMulQ4KQ8K(b *testing.B) {
	for _, k := range []struct {
		name   string
		bb, at int
		decode func(dst []float32, src []byte)
		matMul func(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int)
	}{
		{"q4K", q4KBlockBytes, 0, Q4KToF32, MatMulQ4KQ8K},
		{"q5K", q5KBlockBytes, 0, Q5KToF32, MatMulQ5KQ8K},
		{"q6K", q6KBlockBytes, 208, Q6KToF32, MatMulQ6KQ8K},
	} {
		for _, shape := range [][2]int{{2048, 2048}, {8192, 2048}} {
			rows, cols := shape[0], shape[1]
			r := newRand(b)
			nb := cols / kBlockSize
			rb, qb := nb*k.bb, nb*Q8KBlockBytes
			w := randKBlocks(r, rows*nb, k.bb, k.at)
			for _, nt := range []int{32, 128, 512} {
				x := randF32(r, nt*cols)
				q := make([]byte, nt*qb)
				dst := make([]float32, nt*rows)
				for _, set := range []string{"default", "avx2"} {
					b.Run(fmt.Sprintf("%s/%dx%d/nt=%d/%s", k.name, rows, cols, nt, set), func(b *testing.B) {
						if set == "avx2" {
							defer ForceAVX2()()
						}
						secs := q4kgRounds(b, []func(){
							func() { MatMulDecoded(dst, rows, x, nt, cols, kDecoder{w, rb, k.bb, k.decode}, 0, rows) },
							func() {
								for t := 0; t < nt; t++ {
									QuantizeQ8K(q[t*qb:(t+1)*qb], x[t*cols:(t+1)*cols])
								}
								k.matMul(dst, rows, q, nt, cols, w, 0, rows)
							},
						})
						ratios := make([]float64, len(secs[0]))
						for i := range ratios {
							ratios[i] = secs[0][i] / secs[1][i]
						}
						flop := 2 * float64(nt) * float64(rows) * float64(cols)
						b.ReportMetric(flop/q4kgMedian(secs[0])/1e9, "fp32-GFLOP/s")
						b.ReportMetric(flop/q4kgMedian(secs[1])/1e9, "int8-GFLOP/s")
						b.ReportMetric(q4kgMedian(ratios), "speedup")
					})
				}
			}
		}
	}
}
