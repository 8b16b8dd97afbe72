package simd

import (
	"fmt"
	"math/rand/v2"
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
	for _, dt := range []string{"F16", "BF16", "Q80", "F32", "Q4K", "Q5K", "Q6K"} {
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
	case "Q4K", "Q5K", "Q6K":
		mm, mBytes = kquantMatVec(r, dt, rows, cols, ringBytes)
		ringF32 = cloneRing(randF32(r, mBytes/4), ringBytes/mBytes)
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
		func(m int) {
			restore := forceKQuant512()
			split(func(lo, hi int) { mm(m, dst, x, lo, hi) })
			restore()
		},
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

// kquantMatVec returns a ring of rows×cols k-quant matrices (dt Q4K, Q5K
// or Q6K) of ringBytes in all and the product with one of them as
// pkg/runtime/cpu computes it for one token row: a dot product per row
// (DotQ4KSums, DotQ5KSums with the group sums computed once, DotQ6K).
func kquantMatVec(r *rand.Rand, dt string, rows, cols, ringBytes int) (mm func(m int, dst, x []float32, lo, hi int), mBytes int) {
	bb, scaleAt := q4KBlockBytes, []int{0, 2}
	switch dt {
	case "Q5K":
		bb = q5KBlockBytes
	case "Q6K":
		bb, scaleAt = q6KBlockBytes, []int{208}
	}
	rowBytes := cols / kBlockSize * bb
	mBytes = rows * rowBytes
	ring := cloneRing(randKBlocks(r, rows*cols/kBlockSize, bb, scaleAt...), ringBytes/mBytes)
	var xs []float32
	var once sync.Once
	return func(m int, dst, x []float32, lo, hi int) {
		if dt == "Q6K" {
			for i := lo; i < hi; i++ {
				dst[i] = DotQ6K(ring[m][i*rowBytes:(i+1)*rowBytes], x)
			}
			return
		}
		once.Do(func() { // the one x of the benchmark
			xs = make([]float32, len(x)/32)
			GroupSums32(xs, x)
		})
		dot := DotQ4KSums
		if dt == "Q5K" {
			dot = DotQ5KSums
		}
		for i := lo; i < hi; i++ {
			dst[i] = dot(ring[m][i*rowBytes:(i+1)*rowBytes], x, xs)
		}
	}, mBytes
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

// BenchmarkKQuantDecodeSets compares the avx512 and avx2 k-quant row
// decoders (Q4KToF32, Q5KToF32, Q6KToF32, what MatMulDecoded's panels take
// for prefill) on one row of 2048 values in cache: every round decodes it
// 64 times with each set, in alternating order. It reports each set's
// median GB/s of weights and "speedup" (the median over rounds of the avx2
// time over the avx512 time). Run it with -benchtime 2000x or so.
func BenchmarkKQuantDecodeSets(b *testing.B) {
	if !hasAVX512 {
		b.Skip("avx512 kernels not built or not supported")
	}
	const cols, reps = 2048, 64
	for _, tt := range []struct {
		name       string
		blockBytes int
		scaleAt    []int
		dec        func(dst []float32, w []byte)
	}{
		{"Q4K", q4KBlockBytes, []int{0, 2}, Q4KToF32},
		{"Q5K", q5KBlockBytes, []int{0, 2}, Q5KToF32},
		{"Q6K", q6KBlockBytes, []int{208}, Q6KToF32},
	} {
		b.Run(tt.name, func(b *testing.B) {
			w := randKBlocks(newRand(b), cols/kBlockSize, tt.blockBytes, tt.scaleAt...)
			dst := make([]float32, cols)
			runs := []func(){
				func() { defer forceKQuant512()(); tt.dec(dst, w) },
				func() { defer ForceAVX2()(); tt.dec(dst, w) },
			}
			secs := make([][]float64, len(runs))
			var ratios []float64
			round := 0
			for b.Loop() {
				for k := range runs {
					i := (k + round) % len(runs)
					t0 := time.Now()
					for range reps {
						runs[i]()
					}
					secs[i] = append(secs[i], time.Since(t0).Seconds()/reps)
				}
				ratios = append(ratios, secs[1][round]/secs[0][round])
				round++
			}
			med := func(v []float64) float64 {
				v = slices.Clone(v)
				slices.Sort(v)
				return v[len(v)/2]
			}
			for i, name := range []string{"avx512", "avx2"} {
				b.ReportMetric(float64(len(w))/med(secs[i])/1e9, name+"-GB/s")
			}
			b.ReportMetric(med(ratios), "speedup")
		})
	}
}
