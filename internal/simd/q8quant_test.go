package simd

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeQ80Kernels: QuantizeQ80 is byte for byte its Go twin on
// every kernel set, for 0..9 blocks at misaligned offsets of random values
// at scales from subnormal to beyond binary16's range, exact ties
// (amax 127, values k+0.5, which round half to even), all zeros, a
// largest magnitude of either sign, and blocks holding NaN and ±Inf.
func TestQuantizeQ80Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	fill := []func(b []float32){
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
		},
		func(b []float32) { // ties
			for i := range b {
				b[i] = float32(1-2*(i%2)) * (float32(r.IntN(127)) + 0.5)
			}
			b[r.IntN(32)] = 127
		},
		func(b []float32) { clear(b) },
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64() * 1e-40) // subnormal
			}
		},
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64() * 1e9) // d beyond binary16
			}
		},
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64() * 1e-6) // subnormal binary16 d
			}
			b[r.IntN(32)] = -3e-5
		},
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			b[r.IntN(32)], b[r.IntN(32)] = nan, -nan
		},
		func(b []float32) {
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			b[r.IntN(32)] = []float32{inf, -inf}[r.IntN(2)]
		},
	}
	for _, set := range kernelSets(t) {
		restore := set.force()
		for nb := 0; nb <= 9; nb++ {
			for f := range fill {
				x := make([]float32, 32*nb)
				for b := 0; b < nb; b++ {
					fill[(f+b)%len(fill)](x[32*b : 32*b+32])
				}
				off := offsets[(nb+f)%len(offsets)]
				x = offsetCopy(x, off)
				buf := make([]byte, nb*Q80BlockBytes+2)
				buf[0], buf[len(buf)-1] = 0xa5, 0xa5
				got := buf[1 : len(buf)-1]
				want := make([]byte, nb*Q80BlockBytes)
				QuantizeQ80(got, x)
				quantizeQ80Generic(want, x)
				if !bytes.Equal(got, want) {
					t.Errorf("%s: %d blocks, fill %d: %x, twin %x", set.name, nb, f, got, want)
				}
				if buf[0] != 0xa5 || buf[len(buf)-1] != 0xa5 {
					t.Errorf("%s: %d blocks, fill %d: wrote outside dst", set.name, nb, f)
				}
			}
		}
		restore()
	}
}
