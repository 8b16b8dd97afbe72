package simd

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkQ8LegacyDot times DotQ40Q80 against DotQ40 (float32
// activations) over 64 rows of 2048 values (in cache), per row.
func BenchmarkQ8LegacyDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 64, 2048
	w := randKBlocks(r, rows*cols/32, q40BlockBytes, 0)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	q := make([]byte, cols/32*Q80BlockBytes)
	QuantizeQ80(q, x)
	rb := cols / 32 * q40BlockBytes
	var sink float32
	b.Run("DotQ40", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink += DotQ40(w[i%rows*rb:(i%rows+1)*rb], x)
		}
	})
	b.Run("DotQ40Q80", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink += DotQ40Q80(w[i%rows*rb:(i%rows+1)*rb], q)
		}
	})
	b.Run("QuantizeQ80", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			QuantizeQ80(q, x)
		}
	})
	_ = sink
}
