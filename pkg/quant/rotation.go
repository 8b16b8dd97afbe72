package quant

import (
	"math"
	"math/rand/v2"
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
// (len(x) a power of two).
func fwht(x []float32) {
	n := len(x)
	for h := 1; h < n; h <<= 1 {
		for i := 0; i < n; i += h << 1 {
			a, b := x[i:i+h], x[i+h:i+2*h]
			for j := range a {
				u, v := a[j], b[j]
				a[j], b[j] = u+v, u-v
			}
		}
	}
}

// apply sets dst = Π·x (dst and x may alias only for Hadamard rotations).
func (r *rotation) apply(dst, x []float32) {
	if r.dense != nil {
		for i := 0; i < r.dim; i++ {
			row := r.dense[i*r.dim : (i+1)*r.dim]
			var s float32
			for j, v := range row {
				s += v * x[j]
			}
			dst[i] = s
		}
		return
	}
	if r.signs != nil {
		for i, v := range x[:r.dim] {
			dst[i] = v * r.signs[i]
		}
	} else {
		copy(dst, x[:r.dim])
	}
	fwht(dst[:r.dim])
	scaleSqrt(dst[:r.dim])
}

// applyT sets dst = Πᵀ·x.
func (r *rotation) applyT(dst, x []float32) {
	if r.dense != nil {
		clear(dst[:r.dim])
		for i := 0; i < r.dim; i++ {
			row := r.dense[i*r.dim : (i+1)*r.dim]
			xi := x[i]
			for j, v := range row {
				dst[j] += v * xi
			}
		}
		return
	}
	copy(dst, x[:r.dim])
	fwht(dst[:r.dim])
	scaleSqrt(dst[:r.dim])
	if r.signs != nil {
		for i := range dst[:r.dim] {
			dst[i] *= r.signs[i]
		}
	}
}

func scaleSqrt(x []float32) {
	s := float32(1 / math.Sqrt(float64(len(x))))
	for i := range x {
		x[i] *= s
	}
}
