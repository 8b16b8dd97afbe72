//go:build amd64 && gc && !purego

package simd

import (
	"fmt"
	"math"
	"testing"
)

// TestTransposeWiden checks transpose8F16AVX2 and transpose8BF16AVX2, which
// widen 16-bit weights as they transpose them (the packed prefill's
// panels), against the Go twins (F16ToF32Scalar, BF16ToF32Scalar) transposed by
// hand: every 16-bit pattern (NaNs, infinities, subnormals included, in the
// 16×4096 shape) and shapes of one to three 8×8 tiles each way, with
// strides wider than the shapes; dst outside the shape stays untouched.
func TestTransposeWiden(t *testing.T) {
	if !asmBuilt || !hasAVX2 {
		t.Skipf("this CPU lacks the avx2 kernels (%s)", cpuFeatures())
	}
	for _, bf := range []bool{false, true} {
		for _, s := range [][2]int{{8, 8}, {16, 256}, {24, 16}, {16, 8}, {8, 24}, {16, 4096}} {
			rows, cols := s[0], s[1]
			t.Run(fmt.Sprintf("bf16=%v/%dx%d", bf, rows, cols), func(t *testing.T) {
				lds, ldd := cols+5, rows+3
				src := make([]uint16, rows*lds)
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						src[r*lds+c] = uint16((r*cols+c)*40503 + 7) // 16×4096: every pattern once
					}
				}
				dst := make([]float32, cols*ldd)
				for i := range dst {
					dst[i] = -1
				}
				widen, kernel := F16ToF32Scalar, transpose8F16AVX2
				if bf {
					widen, kernel = BF16ToF32Scalar, transpose8BF16AVX2
				}
				kernel(&dst[0], ldd, &src[0], lds, rows, cols)
				for c := 0; c < cols; c++ {
					for r := 0; r < ldd; r++ {
						want := float32(-1)
						if r < rows {
							want = widen(src[r*lds+c])
						}
						if got := dst[c*ldd+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("dst[%d][%d] = %v (%#x), want %v (%#x) from %#04x", c, r, got, math.Float32bits(got), want, math.Float32bits(want), src[min(r, rows-1)*lds+c])
						}
					}
				}
			})
		}
	}
}
