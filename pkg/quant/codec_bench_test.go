package quant_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// BenchmarkCodecPage measures Scores + Accumulate on one 16-row page of
// head_dim 128 for 4 queries, data in cache: the per-row compute cost of
// each format's attention path, without memory traffic.
func BenchmarkCodecPage(b *testing.B) {
	const dim, rows, nq = 128, 16, 4
	reg := quant.Formats()
	for _, name := range []string{"fp16", "fp32", "fp8", "int8", "int4", "int4:row", "int4:g32", "int2", "int4:g32:channel", "q8_0", "q4_0", "q4_1", "iq4_nl", "turbo4", "turbo3", "kvquant4"} {
		f := reg.MustLookup(name)
		c, err := f.NewCodec(quant.CodecParams{Dim: dim, Key: false})
		if err != nil {
			b.Fatal(err)
		}
		g := c.TokenGroup()
		n := max(rows, g)
		rng := rand.New(rand.NewPCG(1, 2))
		src := make([]float32, n*dim)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		tile := make([]byte, c.TileBytes(n))
		for r := 0; r < n; r += g {
			c.Encode(tile, r, src[r*dim:], g)
		}
		q := src[:nq*dim]
		dst := make([]float32, nq*rows)
		acc := make([]float32, nq*dim)
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.Scores(dst, rows, q, nq, tile, 0, rows)
				c.Accumulate(acc, dst, rows, nq, tile, 0, rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}
