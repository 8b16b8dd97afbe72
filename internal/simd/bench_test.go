package simd

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// Benchmarks pair each kernel with its generic twin:
//
//	go test -run='^$' -bench=. -benchtime=200ms ./internal/simd/
//
// MatMul benchmarks report GFLOP/s (2*nt*rows*cols per call) and, through
// SetBytes, the weight bytes streamed per second.

var benchImpls = []struct {
	name    string
	generic bool
}{{"asm", false}, {"generic", true}}

// runImpls runs f as sub-benchmarks name/asm and name/generic.
func runImpls(b *testing.B, name string, f func(b *testing.B)) {
	for _, im := range benchImpls {
		b.Run(name+"/"+im.name, func(b *testing.B) {
			if !im.generic && !hasAVX2 {
				b.Skip("assembly not built or not supported")
			}
			if im.generic {
				defer ForceGeneric()()
			}
			b.ReportAllocs()
			f(b)
		})
	}
}

var benchSink float32

func BenchmarkDot(b *testing.B) {
	const n = 4096
	r := newRand(b)
	x := randF32(r, n)
	a := randF32(r, n)
	h := randF16(r, n)
	bf := randBF16(r, n)
	q := randQ80(r, n/q80BlockSize)
	runImpls(b, fmt.Sprintf("F32/%d", n), func(b *testing.B) {
		b.SetBytes(2 * 4 * n)
		for b.Loop() {
			benchSink += DotF32(a, x)
		}
	})
	runImpls(b, fmt.Sprintf("F16/%d", n), func(b *testing.B) {
		b.SetBytes((2 + 4) * n)
		for b.Loop() {
			benchSink += DotF16(h, x)
		}
	})
	runImpls(b, fmt.Sprintf("BF16/%d", n), func(b *testing.B) {
		b.SetBytes((2 + 4) * n)
		for b.Loop() {
			benchSink += DotBF16(bf, x)
		}
	})
	runImpls(b, fmt.Sprintf("Q80/%d", n), func(b *testing.B) {
		b.SetBytes(int64(len(q) + 4*n))
		for b.Loop() {
			benchSink += DotQ80(q, x)
		}
	})
}

func BenchmarkAxpy(b *testing.B) {
	const n = 4096
	r := newRand(b)
	y := randF32(r, n)
	x := randF32(r, n)
	h := randF16(r, n)
	runImpls(b, fmt.Sprintf("F32/%d", n), func(b *testing.B) {
		b.SetBytes(3 * 4 * n)
		for b.Loop() {
			AxpyF32(y, 1e-3, x)
		}
	})
	runImpls(b, fmt.Sprintf("F16/%d", n), func(b *testing.B) {
		b.SetBytes((8 + 2) * n)
		for b.Loop() {
			AxpyF16(y, 1e-3, h)
		}
	})
}

func BenchmarkConvert(b *testing.B) {
	const n = 4096
	r := newRand(b)
	f := randF32(r, n)
	h := randF16(r, n)
	runImpls(b, fmt.Sprintf("F16ToF32/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F16ToF32(f, h)
		}
	})
	runImpls(b, fmt.Sprintf("F32ToF16/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F32ToF16(h, f)
		}
	})
	runImpls(b, fmt.Sprintf("F32ToBF16/%d", n), func(b *testing.B) {
		b.SetBytes(6 * n)
		for b.Loop() {
			F32ToBF16(h, f)
		}
	})
}

// BenchmarkMatMul covers decode (nt=1: a memory-bound stream over the
// weights) and prefill (nt=64: compute-bound). Decode rotates through enough
// copies of the weights (at least 96 MiB) that each call streams them from
// DRAM, as a model far larger than the last-level cache would; prefill
// reuses one copy.
func BenchmarkMatMul(b *testing.B) {
	shapes := []struct {
		name           string
		nt, rows, cols int
	}{
		{"decode/2048x2048", 1, 2048, 2048},
		{"decode/5632x2048", 1, 5632, 2048},
		{"prefill64/2048x2048", 64, 2048, 2048},
	}
	const coldBytes = 96 << 20
	r := newRand(b)
	for _, dt := range []string{"F32", "F16", "BF16", "Q80"} {
		for _, s := range shapes {
			x := randF32(r, s.nt*s.cols)
			dst := make([]float32, s.nt*s.rows)
			n := s.rows * s.cols
			var wBytes int
			switch dt {
			case "F32":
				wBytes = 4 * n
			case "F16", "BF16":
				wBytes = 2 * n
			case "Q80":
				wBytes = n / q80BlockSize * q80BlockBytes
			}
			copies := 1
			if s.nt == 1 {
				copies = (coldBytes + wBytes - 1) / wBytes
			}
			calls := make([]func(), copies)
			for i := range calls {
				switch dt {
				case "F32":
					w := randF32(r, n)
					calls[i] = func() { MatMulF32(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "F16":
					w := randF16(r, n)
					calls[i] = func() { MatMulF16(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "BF16":
					w := randBF16(r, n)
					calls[i] = func() { MatMulBF16(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				case "Q80":
					w := randQ80(r, n/q80BlockSize)
					calls[i] = func() { MatMulQ80(dst, s.rows, x, s.nt, s.cols, w, 0, s.rows) }
				}
			}
			flops := 2 * float64(s.nt) * float64(n)
			runImpls(b, dt+"/"+s.name, func(b *testing.B) {
				b.SetBytes(int64(wBytes))
				i := 0
				for b.Loop() {
					calls[i%copies]()
					i++
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMemBandwidth streams a 256 MiB float32 buffer with the sum kernel,
// on one goroutine and split across GOMAXPROCS goroutines, and reports GB/s
// (1e9 bytes per second).
func BenchmarkMemBandwidth(b *testing.B) {
	const size = 256 << 20
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = 1
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		runImpls(b, fmt.Sprintf("256MiB/workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			per := len(buf) / workers
			for b.Loop() {
				if workers == 1 {
					benchSink += sumF32(buf)
					continue
				}
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Go(func() { _ = sumF32(buf[w*per : (w+1)*per]) })
				}
				wg.Wait()
			}
			b.ReportMetric(size*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func BenchmarkMeasureBandwidth(b *testing.B) {
	for b.Loop() {
		bw := MeasureBandwidth(256 << 20)
		b.ReportMetric(bw/1e9, "GB/s")
	}
}
