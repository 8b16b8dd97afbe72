package simd

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkQ4KQ8KRows compares the q4_K decode matrix-vector product with
// Q8_K activations one row a call (DotQ4KQ8K, the kernel set's one-row
// kernel) and several rows a call (DotQ4KQ8KRows) on the default kernel
// set, streaming weights from DRAM as BenchmarkMatVecSets does: a ring of
// 8192×2048 matrices of 1 GiB in all, one matrix a call, the two variants
// alternating first from round to round. It reports each one's median
// GB/s of weights and "speedup" (the median over rounds of the one-row time
// over the multi-row time). Run it with -benchtime 100x or so; it needs
// about 1 GiB of memory.
func BenchmarkQ4KQ8KRows(b *testing.B) {
	const ringBytes, rows, cols = 1 << 30, 8192, 2048
	r := newRand(b)
	nb := cols / kBlockSize
	rb := nb * q4KBlockBytes
	ring := cloneRing(randKBlocks(r, rows*nb, q4KBlockBytes, 0, 2), ringBytes/(rows*rb))
	q := make([]byte, nb*Q8KBlockBytes)
	QuantizeQ8K(q, randF32(r, cols))
	dst := make([]float32, rows)
	runs := []func(w []byte){
		func(w []byte) {
			for i := range dst {
				dst[i] = DotQ4KQ8K(w[i*rb:(i+1)*rb], q)
			}
		},
		func(w []byte) { DotQ4KQ8KRows(dst, w, q) },
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
	for i, name := range []string{"rows1", "rows4"} {
		b.ReportMetric(float64(rows*rb)/med(secs[i])/1e9, name+"-GB/s")
	}
	b.ReportMetric(med(ratios), "speedup")
}
