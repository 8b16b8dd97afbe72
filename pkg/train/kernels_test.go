package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var worst float64
	for i := 0; i < 200000; i++ {
		x := float32(rng.Float64()*176 - 87.3)
		got, want := float64(expf(x)), math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 2.5e-7 {
		t.Errorf("expf: worst relative error %.3g, want <= 2.5e-7", worst)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {-100, 0}, {float32(math.Inf(-1)), 0}, {100, float32(math.Inf(1))},
	} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := expf(float32(math.NaN())); got == got {
		t.Errorf("expf(NaN) = %v, want NaN", got)
	}
}

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
