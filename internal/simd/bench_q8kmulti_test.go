package simd

import (
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkKQ8KRows compares the q4_K and q6_K decode matrix-vector
// products with Q8_K activations one row a call (DotQ4KQ8K, DotQ6KQ8K: the
// kernel set's one-row kernels) and several rows a call (DotQ4KQ8KRows,
// DotQ6KQ8KRows) on the default kernel
// set, streaming weights from DRAM as BenchmarkMatVecSets does: a ring of
// 8192×2048 matrices of 1 GiB in all, one matrix a call, the two variants
// alternating first from round to round. It reports each one's median
// GB/s of weights and "speedup" (the median over rounds of the one-row time
// over the multi-row time). Run it with -benchtime 100x or so; it needs
// about 1 GiB of memory. With KVQ_BENCH_IN_CACHE set it reads one matrix of
// 1024 rows over and over instead (in cache: the kernels' compute speed;
// -benchtime 2000x).
func BenchmarkKQ8KRows(b *testing.B) {
	for _, tt := range []struct {
		name       string
		blockBytes int
		scaleAt    []int
		one        func(w, q []byte) float32
		rows       func(dst []float32, w, q []byte)
	}{
		{"Q4K", q4KBlockBytes, []int{0, 2}, DotQ4KQ8K, DotQ4KQ8KRows},
		{"Q6K", q6KBlockBytes, []int{208}, DotQ6KQ8K, DotQ6KQ8KRows},
	} {
		b.Run(tt.name, func(b *testing.B) {
			benchKQ8KRows(b, tt.blockBytes, tt.scaleAt, tt.one, tt.rows)
		})
	}
}

func benchKQ8KRows(b *testing.B, blockBytes int, scaleAt []int, one func(w, q []byte) float32, rowsDot func(dst []float32, w, q []byte)) {
	ringBytes, rows, cols := 1<<30, 8192, 2048
	if os.Getenv("KVQ_BENCH_IN_CACHE") != "" {
		ringBytes, rows = 1, 1024
	}
	r := newRand(b)
	nb := cols / kBlockSize
	rb := nb * blockBytes
	ring := cloneRing(randKBlocks(r, rows*nb, blockBytes, scaleAt...), ringBytes/(rows*rb))
	q := make([]byte, nb*Q8KBlockBytes)
	QuantizeQ8K(q, randF32(r, cols))
	benchRowDots(b, ring, rows, rb, q, one, rowsDot)
}

// benchRowDots times one product of the rows×rb-byte weight matrices of
// ring (one a call, in turn) with the activation codes q, one row a call
// (one) against several (rowsDot), alternating which goes first from round
// to round, and reports each one's median GB/s of weights ("rows1",
// "rows4") and "speedup" (the median over rounds of the one-row time over
// the multi-row time).
func benchRowDots(b *testing.B, ring [][]byte, rows, rb int, q []byte, one func(w, q []byte) float32, rowsDot func(dst []float32, w, q []byte)) {
	dst := make([]float32, rows)
	runs := []func(w []byte){
		func(w []byte) {
			for i := range dst {
				dst[i] = one(w[i*rb:(i+1)*rb], q)
			}
		},
		func(w []byte) { rowsDot(dst, w, q) },
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
