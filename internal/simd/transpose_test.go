package simd

import (
	"fmt"
	"testing"
)

// TestTransposeF32 transposes shapes with and without whole 8×8 tiles,
// with strides wider than the shapes, through the assembly and the twin,
// and checks every dst element: transposed inside the shape, untouched
// (still -1) outside it and past the end.
func TestTransposeF32(t *testing.T) {
	for _, generic := range []bool{false, true} {
		for _, s := range [][2]int{{1, 1}, {8, 8}, {7, 9}, {16, 24}, {19, 13}, {64, 5}, {24, 40}, {33, 17}} {
			rows, cols := s[0], s[1]
			t.Run(fmt.Sprintf("generic=%v/%dx%d", generic, rows, cols), func(t *testing.T) {
				if generic {
					defer ForceGeneric()()
				}
				const lds, ldd = 43, 70 // strides wider than the shapes
				src := make([]float32, rows*lds)
				for i := range src {
					src[i] = float32(i)
				}
				dst := make([]float32, cols*ldd+1)
				for i := range dst {
					dst[i] = -1
				}
				TransposeF32(dst, ldd, src, lds, rows, cols)
				for c := 0; c < cols; c++ {
					for r := 0; r < ldd; r++ {
						want := float32(-1)
						if r < rows {
							want = src[r*lds+c]
						}
						if got := dst[c*ldd+r]; got != want {
							t.Fatalf("dst[%d][%d] = %v, want %v", c, r, got, want)
						}
					}
				}
				if dst[cols*ldd] != -1 {
					t.Errorf("TransposeF32 wrote past the last row")
				}
			})
		}
	}
}
