package simd

import (
	"fmt"
	"math"
	"testing"
)

// TestRotate checks RotateNeoX and RotatePairs bit for bit against their
// generic twins (with the twins' own definition checked in float64: a
// rotation within a few float32 ulps of the exact one, which a swapped
// pair, a wrong sign or a skipped tail would break), at misaligned offsets
// with guard regions, for every half size up to 40 and random larger ones.
func TestRotate(t *testing.T) {
	tests := []struct {
		name string
		run  func(v, c, s []float32)
		twin func(v, c, s []float32)
		pair func(half, i int) (int, int) // indices of rotated pair i
	}{
		{"RotateNeoX", RotateNeoX, rotateNeoXGeneric, func(half, i int) (int, int) { return i, i + half }},
		{"RotatePairs", RotatePairs, rotatePairsGeneric, func(_, i int) (int, int) { return 2 * i, 2*i + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(t)
			for _, half := range sizes(r) {
				for _, off := range offsets {
					shape := fmt.Sprintf("%s(half=%d, off=%d)", tt.name, half, off)
					v0 := randF32(r, 2*half)
					c, s := make([]float32, half), make([]float32, half)
					for i := range c {
						sn, cs := math.Sincos(r.Float64() * 2 * math.Pi)
						c[i], s[i] = float32(cs), float32(sn)
					}
					c, s = offsetCopy(c, (off+1)%8), offsetCopy(s, (off+2)%8)
					v, check := guardedF32(off, 2*half, 16)
					copy(v, v0)
					tt.run(v, c, s)
					check(t)
					twin := append([]float32(nil), v0...)
					tt.twin(twin, c, s)
					for i := range v {
						if math.Float32bits(v[i]) != math.Float32bits(twin[i]) {
							t.Fatalf("%s: v[%d] = %v, generic %v", shape, i, v[i], twin[i])
						}
					}
					for i := 0; i < half; i++ {
						ia, ib := tt.pair(half, i)
						a, b, ci, si := float64(v0[ia]), float64(v0[ib]), float64(c[i]), float64(s[i])
						wa, wb := a*ci-b*si, a*si+b*ci
						tol := 4e-7 * (math.Abs(a) + math.Abs(b))
						if math.Abs(float64(twin[ia])-wa) > tol || math.Abs(float64(twin[ib])-wb) > tol {
							t.Fatalf("%sGeneric: pair %d = (%v, %v), want (%v, %v)", shape, i, twin[ia], twin[ib], wa, wb)
						}
					}
				}
			}
		})
	}
}

func TestRotatePanics(t *testing.T) {
	for _, f := range []func(v, c, s []float32){RotateNeoX, RotatePairs} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic for len(v) != 2·len(c)")
				}
			}()
			f(make([]float32, 7), make([]float32, 4), make([]float32, 4))
		}()
	}
}
