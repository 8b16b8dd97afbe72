package quant

import (
	"math"
	"math/rand/v2"

	"github.com/kvqlabs/kvq/internal/simd"
)

// rotation is an orthogonal map Π of R^dim: a randomized Hadamard transform
// Π = H·D/√dim (D a seeded ±1 diagonal, H the Walsh–Hadamard matrix) when dim
// is a power of two, otherwise a dense random orthogonal matrix (Gram–Schmidt
// on a seeded Gaussian matrix). With seed 0 and a power-of-two dim, D = I: the
// plain orthonormal Hadamard H/√dim that llama.cpp applies.
type rotation struct {
	dim   int
	signs []float32 // D, nil for the identity
	dense []float32 // row-major dim×dim, nil for Hadamard
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

func newRotation(dim int, seed uint64) *rotation {
	r := &rotation{dim: dim}
	rng := rand.New(rand.NewPCG(seed, 0x7075726f7461)) // fixed stream per seed
	if isPow2(dim) {
		if seed != 0 {
			r.signs = make([]float32, dim)
			for i := range r.signs {
				r.signs[i] = 1
				if rng.Uint64()&1 == 1 {
					r.signs[i] = -1
				}
			}
		}
		return r
	}
	// Modified Gram–Schmidt in float64, then stored as float32.
	m := make([][]float64, dim)
	for i := range m {
		m[i] = make([]float64, dim)
		for j := range m[i] {
			m[i][j] = rng.NormFloat64()
		}
		for k := 0; k < i; k++ {
			var d float64
			for j := range m[i] {
				d += m[i][j] * m[k][j]
			}
			for j := range m[i] {
				m[i][j] -= d * m[k][j]
			}
		}
		var n float64
		for _, v := range m[i] {
			n += v * v
		}
		n = math.Sqrt(n)
		for j := range m[i] {
			m[i][j] /= n
		}
	}
	r.dense = make([]float32, dim*dim)
	for i := range m {
		for j, v := range m[i] {
			r.dense[i*dim+j] = float32(v)
		}
	}
	return r
}

// fwht applies the unnormalized Walsh–Hadamard transform in place
// (len(x) a power of two). The first two butterfly stages (h = 1 and 2)
// run together on blocks of 4 values, the others on whole half-blocks with
// the bounds checks hoisted out of the inner loop. Every value goes
// through the same additions and subtractions, in the same order, as
// stage-by-stage butterflies (fwhtRef in the tests), so the result is the
// same bits.
func fwht(x []float32) {
	n := len(x)
	h := 1
	if n >= 4 {
		for i := 0; i+4 <= n; i += 4 {
			v := x[i : i+4 : i+4]
			a, b := v[0]+v[1], v[0]-v[1]
			c, d := v[2]+v[3], v[2]-v[3]
			v[0], v[1], v[2], v[3] = a+c, b+d, a-c, b-d
		}
		h = 4
	}
	for ; h < n; h <<= 1 {
		for i := 0; i+2*h <= n; i += 2 * h {
			a := x[i : i+h : i+h]
			b := x[i+h : i+2*h : i+2*h][:len(a)]
			for j, u := range a {
				v := b[j]
				a[j], b[j] = u+v, u-v
			}
		}
	}
}

// apply sets dst = Π·x (dst and x may alias only for Hadamard rotations).
func (r *rotation) apply(dst, x []float32) {
	if r.dense != nil {
		x = x[:r.dim]
		for i := 0; i < r.dim; i++ {
			dst[i] = simd.DotF32(r.dense[i*r.dim:(i+1)*r.dim], x)
		}
		return
	}
	if r.signs != nil {
		simd.MulF32(dst[:r.dim], x[:r.dim], r.signs)
	} else {
		copy(dst, x[:r.dim])
	}
	fwht(dst[:r.dim])
	scaleSqrt(dst[:r.dim])
}

// applyT sets dst = Πᵀ·x.
func (r *rotation) applyT(dst, x []float32) {
	if r.dense != nil {
		dst = dst[:r.dim]
		clear(dst)
		for i := 0; i < r.dim; i++ {
			simd.AxpyF32(dst, x[i], r.dense[i*r.dim:(i+1)*r.dim])
		}
		return
	}
	copy(dst, x[:r.dim])
	fwht(dst[:r.dim])
	scaleSqrt(dst[:r.dim])
	if r.signs != nil {
		simd.MulF32(dst[:r.dim], dst[:r.dim], r.signs)
	}
}

func scaleSqrt(x []float32) {
	simd.ScaleF32(x, float32(1/math.Sqrt(float64(len(x)))))
}
