//go:build amd64 && gc && !purego

package simd

import (
	"math"
	"testing"
)

// TestDotsKernels calls every multi-token kernel the CPU runs directly and
// checks each token row against the one-row dot product of its family
// (dotF16 and so on with that family selected), so that a kernel no
// group size reaches through MatMulEach* is still checked.
func TestDotsKernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("this CPU lacks the assembly kernels: " + cpuFeatures())
	}
	families := []struct {
		name  string
		k     dotKernel
		force func() func()
	}{{"avx2", dotAVX2, ForceAVX2}}
	if hasAVX512 {
		families = append(families, struct {
			name  string
			k     dotKernel
			force func() func()
		}{"avx512", dotAVX512, func() func() { return func() {} }})
	}
	r := newRand(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			defer f.force()()
			if dotKernelF16() != f.k {
				t.Fatalf("dotKernelF16() = %d with the %s set", dotKernelF16(), f.name)
			}
			const ldd = 5
			for _, cols := range []int{8, 16, 24, 40, 128, 136, 144, 2048} {
				for g := 2; g <= eachMost(f.k, false); g++ {
					for _, bf16 := range []bool{false, true} {
						w := randF16(r, cols)
						if bf16 {
							w = randBF16(r, cols)
						}
						x := randF32(r, g*cols)
						dst := make([]float32, g*ldd)
						dotsU16(f.k, bf16, g, &dst[0], ldd, &w[0], &x[0], cols, cols)
						for u := 0; u < g; u++ {
							want := dotF16(w, x[u*cols:(u+1)*cols])
							if bf16 {
								want = dotBF16(w, x[u*cols:(u+1)*cols])
							}
							if f.k == dotAVX2 {
								want = dotF16AVX2(w, x[u*cols:(u+1)*cols])
								if bf16 {
									want = dotBF16AVX2(w, x[u*cols:(u+1)*cols])
								}
							}
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
						want := dotQ80(w, x[u*cols:(u+1)*cols])
						if math.Float32bits(dst[u*ldd]) != math.Float32bits(want) {
							t.Fatalf("Q8_0 cols %d, group %d, token %d: %v, one row %v", cols, g, u, dst[u*ldd], want)
						}
					}
				}
			}
		})
	}
}
