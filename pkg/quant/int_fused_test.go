package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTokenCodecFused compares the fused Scores and Accumulate of the
// per-token integer codecs (raw codes in place, scales and zeros applied
// per row) with the chunked path they replace (rows decoded, then the float
// kernels), for one-group rows of 8 and 4 bits, affine and symmetric, at
// head sizes 64, 72 and 128, nq 1 to 5, and runs of rows at odd offsets.
// The fused path sums code·s and z apart (x̂ = code·s + z), so the
// tolerance is relative to the sums with |x̂| replaced by |x̂| + 2|z|, which
// bounds |code·s| + |z|.
func TestTokenCodecFused(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const capRows = 80
	for _, bits := range []int{8, 4} {
		for _, sym := range []bool{false, true} {
			for _, dim := range []int{64, 72, 128} {
				c, err := newTokenCodec("test", dim, bits, 0, 1, 0, sym)
				if err != nil {
					t.Fatal(err)
				}
				if !c.fused() {
					t.Fatalf("int%d row codec of dim %d does not take the fused path", bits, dim)
				}
				tile := make([]byte, c.TileBytes(capRows))
				src := make([]float32, capRows*dim)
				for i := range src {
					src[i] = float32(r.NormFloat64()*2 + 0.5)
				}
				c.Encode(tile, 0, src, capRows)
				mags := make([]float32, capRows*dim)
				c.Decode(mags, tile, 0, capRows)
				_, scales, zeros := c.regions(tile)
				s, z := make([]float32, capRows), make([]float32, capRows)
				c.rowParams(s, z, scales, zeros, 0)
				for j, d := range mags {
					mags[j] = float32(math.Abs(float64(d)) + 2*math.Abs(float64(z[j/dim])))
				}
				for nq := 1; nq <= 5; nq++ {
					for _, run := range [][2]int{{0, 1}, {3, 16}, {5, 17}, {0, 80}, {11, 69}} {
						row0, n := run[0], run[1]
						name := fmt.Sprintf("bits=%d/sym=%v/dim=%d/nq=%d/rows=%d+%d", bits, sym, dim, nq, row0, n)
						checkFused(t, name, c, mags, tile, r, nq, row0, n)
					}
				}
			}
		}
	}
}

// checkFused compares the two paths on rows [row0, row0+n); mags holds
// |x̂| + 2|z| of every value of the tile.
func checkFused(t *testing.T, name string, c *tokenCodec, mags []float32, tile []byte, r *rand.Rand, nq, row0, n int) {
	t.Helper()
	dim := c.dim
	ldd := n + 3
	q := make([]float32, nq*dim)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	got := make([]float32, nq*ldd)
	want := make([]float32, nq*ldd)
	c.Scores(got, ldd, q, nq, tile, row0, n)
	scoresChunked(c.Decode, dim, want, ldd, q, nq, tile, row0, n)
	for i := 0; i < nq; i++ {
		for j := 0; j < n; j++ {
			var mag float64
			for d := 0; d < dim; d++ {
				mag += math.Abs(float64(q[i*dim+d]) * float64(mags[(row0+j)*dim+d]))
			}
			if g, w := got[i*ldd+j], want[i*ldd+j]; math.Abs(float64(g-w)) > 1e-5*mag {
				t.Fatalf("%s: Scores[%d][%d] = %v, chunked %v (Σ|q|·(|x̂|+2|z|) %v)", name, i, j, g, w, mag)
			}
		}
	}
	w := make([]float32, nq*ldd)
	for i := range w {
		w[i] = float32(r.Float64())
	}
	accGot := make([]float32, nq*dim)
	for i := range accGot {
		accGot[i] = float32(r.NormFloat64())
	}
	accWant := append([]float32(nil), accGot...)
	acc0 := append([]float32(nil), accGot...)
	c.Accumulate(accGot, w, ldd, nq, tile, row0, n)
	accumulateChunked(c.Decode, dim, accWant, w, ldd, nq, tile, row0, n)
	for i := 0; i < nq; i++ {
		for d := 0; d < dim; d++ {
			mag := math.Abs(float64(acc0[i*dim+d]))
			for j := 0; j < n; j++ {
				mag += math.Abs(float64(w[i*ldd+j]) * float64(mags[(row0+j)*dim+d]))
			}
			if g, w := accGot[i*dim+d], accWant[i*dim+d]; math.Abs(float64(g-w)) > 1e-5*mag {
				t.Fatalf("%s: acc[%d][%d] = %v, chunked %v (|acc|+Σ|w|·(|x̂|+2|z|) %v)", name, i, d, g, w, mag)
			}
		}
	}
}
