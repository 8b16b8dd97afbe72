package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fwhtRef is the Walsh–Hadamard transform stage by stage, one butterfly at
// a time: the definition fwht must match bit for bit.
func fwhtRef(x []float32) {
	n := len(x)
	for h := 1; h < n; h <<= 1 {
		for i := 0; i < n; i += h << 1 {
			for j := i; j < i+h; j++ {
				u, v := x[j], x[j+h]
				x[j], x[j+h] = u+v, u-v
			}
		}
	}
}

func TestFWHT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 1024; n <<= 1 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		want := append([]float32(nil), x...)
		fwhtRef(want)
		fwht(x)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
				t.Fatalf("fwht(n=%d)[%d] = %v, want %v", n, i, x[i], want[i])
			}
		}
	}
}

// TestLUTUnpack checks lutUnpack (the table-lookup kernels for 2, 3 and 4
// bits) against the bit stream read code by code with getBits, for a table
// of distinct levels.
func TestLUTUnpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	for bits := 1; bits <= 4; bits++ {
		var tab lut
		for k := range 1 << bits {
			tab[k] = float32(rng.NormFloat64())
		}
		for _, dim := range []int{8, 24, 64, 80, 128, 136} {
			b := make([]byte, dim*bits/8+2) // rows run on into their metadata
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			u := make([]float32, dim)
			lutUnpack(u, b, bits, &tab)
			for j := range u {
				code := getBits(b[:dim*bits/8], j, bits)
				if want := tab[code]; math.Float32bits(u[j]) != math.Float32bits(want) {
					t.Fatalf("lutUnpack(bits=%d, dim=%d)[%d] = %v, want level %d = %v", bits, dim, j, u[j], code, want)
				}
			}
		}
	}
}
