package cpu_test

import (
	"math/rand/v2"

	"github.com/kvqlabs/kvq/internal/simd"
)

// quantizedTwin returns what the pure-Go twin path gives for the nt token
// rows of x (cols values each) against the rows weight rows of raw (rb
// bytes each): each token row quantized by quant to qrb bytes and dotted
// with each weight row by dot, with the generic kernels; the result of
// token row t and weight row i at [t*rows+i].
func quantizedTwin(raw []byte, rows, rb int, x []float32, nt, cols, qrb int, quant func(dst []byte, x []float32), dot func(w, q []byte) float32) []float32 {
	q := make([]byte, qrb)
	want := make([]float32, nt*rows)
	defer simd.ForceGeneric()()
	for tk := 0; tk < nt; tk++ {
		quant(q, x[tk*cols:(tk+1)*cols])
		for i := 0; i < rows; i++ {
			want[tk*rows+i] = dot(raw[i*rb:(i+1)*rb], q)
		}
	}
	return want
}

// normals returns n values drawn from r's normal distribution times scale.
func normals(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}
