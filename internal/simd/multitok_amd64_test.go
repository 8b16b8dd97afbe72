//go:build amd64 && gc && !purego

package simd

import (
	"math"
	"testing"
)

// TestDotsKernels calls every multi-token kernel the CPU runs directly and
// checks each token row against the one-row assembly kernel of its family
// (dotF16AVX512 and so on), whichever family dotF16 selects, so that a
// kernel no group size reaches through MatMulEach* is still checked.
func TestDotsKernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("this CPU lacks the assembly kernels: " + cpuFeatures())
	}
	type family struct {
		name      string
		k         dotKernel
		f16, bf16 func(w []uint16, x []float32) float32
		q80       func(w []byte, x []float32) float32
	}
	families := []family{{"avx2", dotAVX2, dotF16AVX2, dotBF16AVX2, dotQ80AVX2}}
	if hasAVX512 {
		families = append(families, family{"avx512", dotAVX512, dotF16AVX512, dotBF16AVX512, dotQ80AVX512})
	}
	r := newRand(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			const ldd = 5
			// Whole groups of 8 only: the AVX2 kernels leave the tail to Go.
			for _, cols := range []int{8, 16, 24, 40, 128, 136, 144, 2048} {
				for g := 2; g <= eachMost(f.k, false); g++ {
					for _, bf16 := range []bool{false, true} {
						w, one := randF16(r, cols), f.f16
						if bf16 {
							w, one = randBF16(r, cols), f.bf16
						}
						x := randF32(r, g*cols)
						dst := make([]float32, g*ldd)
						dotsU16(f.k, bf16, g, &dst[0], ldd, &w[0], &x[0], cols, cols)
						for u := 0; u < g; u++ {
							want := one(w, x[u*cols:(u+1)*cols])
							if math.Float32bits(dst[u*ldd]) != math.Float32bits(want) {
								t.Fatalf("bf16 %v, cols %d, group %d, token %d: %v, one row %v", bf16, cols, g, u, dst[u*ldd], want)
							}
						}
					}
				}
			}
			for _, cols := range []int{32, 64, 96, 128, 160, 192, 224, 2048} {
				for g := 2; g <= eachMost(f.k, true); g++ {
					w := randQ80(r, cols/q80BlockSize)
					x := randF32(r, g*cols)
					dst := make([]float32, g*ldd)
					dotsQ80(f.k, g, &dst[0], ldd, &w[0], &x[0], cols, cols)
					for u := 0; u < g; u++ {
						want := f.q80(w, x[u*cols:(u+1)*cols])
						if math.Float32bits(dst[u*ldd]) != math.Float32bits(want) {
							t.Fatalf("Q8_0 cols %d, group %d, token %d: %v, one row %v", cols, g, u, dst[u*ldd], want)
						}
					}
				}
			}
		})
	}
}

// TestU16KernelChoice pins which F16 and BF16 dot product each kernel set
// takes: the family dotKernelF16 and dotKernelBF16 return, and whether a
// long row goes through the prefetching AVX2 kernels (zen4Prefetch), which
// only the Zen 4 and Zen 5 choices do (ForceAVX2 on a Zen 4 leaves useZen4
// set and must still take the plain ones).
func TestU16KernelChoice(t *testing.T) {
	type choice struct {
		k        dotKernel
		prefetch bool // from zen4PrefetchCols columns
	}
	want := map[string]choice{
		"avx512":      {dotAVX512, false},
		"avx512-zen4": {dotAVX2, true},
		"avx512-zen5": {dotAVX2, true},
		"avx2":        {dotAVX2, false},
		"generic":     {dotGo, false},
	}
	for _, s := range kernelSets(t) {
		restore := s.force()
		f16, bf16 := dotKernelF16(), dotKernelBF16()
		long, short := zen4Prefetch(zen4PrefetchCols), zen4Prefetch(zen4PrefetchCols-1)
		restore()
		w := want[s.name]
		if f16 != w.k || bf16 != w.k || long != w.prefetch || short {
			t.Errorf("%s set: dotKernelF16 %d, dotKernelBF16 %d, prefetch at %d columns %v, at %d %v; want %d, %d, %v, false",
				s.name, f16, bf16, zen4PrefetchCols, long, zen4PrefetchCols-1, short, w.k, w.k, w.prefetch)
		}
	}
}
