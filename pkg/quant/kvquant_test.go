package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

func TestKVQuantThroughCache(t *testing.T) {
	reg := quant.Formats()
	for _, name := range []string{"kvquant4", "kvquant3", "kvquant2", "kvquant3:o0", "kvquant3:uniform:g32", "kvquant2:o5"} {
		cachetest.Run(t, reg.MustLookup(name), cachetest.Options{Dims: []int{64, 128}, Tol: 2e-5, Windows: true})
	}
}

// TestKVQuantOutliers checks the dense-and-sparse split: outliers come back
// exactly (to fp16), and every other element lies within half the widest gap
// between codebook levels, times the vector's range.
func TestKVQuantOutliers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const dim = 128
	for _, key := range []bool{false, true} {
		f := quant.Formats().MustLookup("kvquant3:o2")
		c, err := f.NewCodec(quant.CodecParams{Dim: dim, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		n := c.TokenGroup() * max(1, 64/c.TokenGroup())
		src := make([]float32, n*dim)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		// Plant huge outliers.
		src[3*dim+7] = 500
		src[(n-1)*dim+100] = -300
		tile := make([]byte, c.TileBytes(n))
		c.Encode(tile, 0, src, n)
		dec := make([]float32, len(src))
		c.Decode(dec, tile, 0, n)
		for _, i := range []int{3*dim + 7, (n-1)*dim + 100} {
			if dec[i] != src[i] {
				t.Errorf("key=%v: outlier %v decoded to %v, want exact", key, src[i], dec[i])
			}
		}
		// Non-outliers: Gaussian data has range ≤ ~5 per vector; the widest
		// 3-bit NormalFloat gap is < 0.5 of the normalized range [−1, 1].
		for i := range src {
			if d := math.Abs(float64(src[i] - dec[i])); d > 0.5*0.5*5 {
				t.Fatalf("key=%v: element %d = %v decoded to %v (error %g)", key, i, src[i], dec[i], d)
			}
		}
	}
}
