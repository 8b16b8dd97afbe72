package train

import (
	"fmt"
	"testing"
)

func TestTranspose(t *testing.T) {
	for _, s := range [][2]int{{1, 1}, {8, 8}, {7, 9}, {16, 24}, {19, 13}, {64, 5}} {
		rows, cols := s[0], s[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			const lds, ldd = 40, 70 // strides wider than the shapes
			src := make([]float32, rows*lds)
			for i := range src {
				src[i] = float32(i)
			}
			dst := make([]float32, cols*ldd+1)
			for i := range dst {
				dst[i] = -1
			}
			transpose(dst, ldd, src, lds, rows, cols)
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
				t.Errorf("transpose wrote past the last row")
			}
		})
	}
}
