package simd

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkMatVecSets compares the kernel sets on the decode matrix-vector
// product (MatMul with one token row) streaming weights from DRAM: a ring
// of weight matrices of 1 GiB in all (well past the last-level cache) is
// read one matrix a call, with the rows split over 1 or 2 goroutines as
// pkg/runtime/cpu splits them. Every round runs the avx512 set, the avx2
// set and a plain streaming sum of the same number of bytes (sumF32, the
// read limit), in an order that rotates from round to round, each on the
// next matrix of the ring, so that all three see the same machine load. It
// reports each one's median GB/s of weights, "speedup" (the median over
// rounds of the avx2 time over the avx512 time) and "avx512-of-sum" (the
// avx512 median over the sum's). A round takes a few milliseconds, so run
// it with -benchtime 200x or so; it needs about 1 GiB of memory.
func BenchmarkMatVecSets(b *testing.B) {
	if !hasAVX512 {
		b.Skip("avx512 kernels not built or not supported")
	}
	const ringBytes = 1 << 30
	shapes := []struct{ rows, cols int }{{8192, 2048}, {2048, 8192}}
	for _, dt := range []string{"F16", "BF16", "Q80", "F32"} {
		for _, s := range shapes {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%dx%d/workers=%d", dt, s.rows, s.cols, workers), func(b *testing.B) {
					benchMatVecSets(b, dt, s.rows, s.cols, workers, ringBytes)
				})
			}
		}
	}
}

func benchMatVecSets(b *testing.B, dt string, rows, cols, workers, ringBytes int) {
	r := newRand(b)
	n := rows * cols
	var mm func(m int, dst, x []float32, lo, hi int) // matrix m of the ring
	var mBytes int
	var ringF32 [][]float32 // what the sum reads: the same bytes
	switch dt {
	case "F32":
		mBytes = 4 * n
		ring := cloneRing(randF32(r, n), ringBytes/mBytes)
		mm = func(m int, dst, x []float32, lo, hi int) { MatMulF32(dst, rows, x, 1, cols, ring[m], lo, hi) }
		ringF32 = ring
	case "F16", "BF16":
		mBytes = 2 * n
		w := randF16(r, n)
		if dt == "BF16" {
			w = randBF16(r, n)
		}
		ring := cloneRing(w, ringBytes/mBytes)
		mm = func(m int, dst, x []float32, lo, hi int) { MatMulF16(dst, rows, x, 1, cols, ring[m], lo, hi) }
		if dt == "BF16" {
			mm = func(m int, dst, x []float32, lo, hi int) { MatMulBF16(dst, rows, x, 1, cols, ring[m], lo, hi) }
		}
		ringF32 = cloneRing(randF32(r, mBytes/4), len(ring))
	case "Q80":
		mBytes = n / q80BlockSize * q80BlockBytes
		ring := cloneRing(randQ80(r, n/q80BlockSize), ringBytes/mBytes)
		mm = func(m int, dst, x []float32, lo, hi int) { MatMulQ80(dst, rows, x, 1, cols, ring[m], lo, hi) }
		ringF32 = cloneRing(randF32(r, mBytes/4), len(ring))
	}
	copies := len(ringF32)
	x := randF32(r, cols)
	dst := make([]float32, rows)
	split := func(f func(lo, hi int)) {
		if workers == 1 {
			f(0, rows)
			return
		}
		var wg sync.WaitGroup
		per := rows / workers / 4 * 4
		for i := 0; i < workers-1; i++ {
			wg.Go(func() { f(i*per, (i+1)*per) })
		}
		f((workers-1)*per, rows)
		wg.Wait()
	}
	runs := []func(m int){
		func(m int) { split(func(lo, hi int) { mm(m, dst, x, lo, hi) }) },
		func(m int) {
			restore := ForceAVX2()
			split(func(lo, hi int) { mm(m, dst, x, lo, hi) })
			restore()
		},
		func(m int) {
			w := ringF32[m]
			split(func(lo, hi int) {
				benchSink += sumF32(w[lo*len(w)/rows : hi*len(w)/rows])
			})
		},
	}
	names := []string{"avx512", "avx2", "sum"}
	secs := make([][]float64, len(runs))
	var ratios []float64
	round, m := 0, 0
	for b.Loop() {
		for k := range runs {
			i := (k + round) % len(runs)
			t0 := time.Now()
			runs[i](m % copies)
			secs[i] = append(secs[i], time.Since(t0).Seconds())
			m++
		}
		ratios = append(ratios, secs[1][round]/secs[0][round])
		round++
	}
	b.SetBytes(int64(len(runs) * mBytes))
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	for i, name := range names {
		b.ReportMetric(float64(mBytes)/med(secs[i])/1e9, name+"-GB/s")
	}
	b.ReportMetric(med(ratios), "speedup")
	b.ReportMetric(med(secs[2])/med(secs[0]), "avx512-of-sum")
}

// cloneRing returns copies clones of s (at least one), each its own
// allocation.
func cloneRing[T any](s []T, copies int) [][]T {
	ring := make([][]T, max(1, copies))
	for i := range ring {
		ring[i] = slices.Clone(s)
	}
	return ring
}
