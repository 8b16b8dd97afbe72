package simd

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkQ8LegacyDot times each Q8 dot (quantized activations) against
// the same type's float32-activation dot, over 64 rows of 2048 values (in
// cache), per row, on each kernel set; and QuantizeQ80 over 2048 values.
func BenchmarkQ8LegacyDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 64, 2048
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	xs := make([]float32, cols/32)
	GroupSums32(xs, x)
	f32 := map[qdotType]func(w []byte) float32{
		qdQ40:   func(w []byte) float32 { return DotQ40(w, x) },
		qdQ41:   func(w []byte) float32 { return DotQ41(w, x, xs) },
		qdQ50:   func(w []byte) float32 { return DotQ50(w, x) },
		qdQ51:   func(w []byte) float32 { return DotQ51(w, x, xs) },
		qdIQ4NL: func(w []byte) float32 { return DotIQ4NL(w, x) },
		qdMXFP4: func(w []byte) float32 { return DotMXFP4(w, x) },
		qdQ80: func(w []byte) float32 {
			var d [1]float32
			MatMulQ80(d[:], 1, x, 1, cols, w, 0, 1)
			return d[0]
		},
	}
	var sink float32
	for _, set := range q8lSets(b) {
		restore := set.force()
		for _, c := range q8lCases() {
			w := randKBlocks(r, rows*cols/32, c.wBytes, 0)
			if c.t == qdMXFP4 { // normal scales (subnormal ones cost assists)
				w = randMXFP4(r, rows*cols/32)
				for b := 0; b < rows*cols/32; b++ {
					w[b*mxfp4BlockBytes] = byte(110 + r.IntN(30))
				}
			}
			q := make([]byte, cols/32*c.qBB)
			c.quant(q, x)
			rb := cols / 32 * c.wBytes
			b.Run(set.name+"/"+c.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					sink += c.dot(w[i%rows*rb:(i%rows+1)*rb], q)
				}
			})
			b.Run(set.name+"/"+c.name+"-f32", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					sink += f32[c.t](w[i%rows*rb : (i%rows+1)*rb])
				}
			})
		}
		restore()
	}
	q := make([]byte, cols/32*Q80BlockBytes)
	b.Run("QuantizeQ80", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			QuantizeQ80(q, x)
		}
	})
	_ = sink
}
