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

// TestKVQuantValueAccumulate checks the value side's Accumulate (levels
// accumulated with weights scaled by each row's range, outliers patched
// into the levels) against decoding and summing, on rows the cache suite
// does not draw: constant rows (range 0) with and without outliers, and
// rows whose outliers are huge, starting mid-tile.
func TestKVQuantValueAccumulate(t *testing.T) {
	const dim, n, nq = 64, 150, 3
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range []string{"kvquant4", "kvquant2:o5"} {
		c, err := quant.Formats().MustLookup(name).NewCodec(quant.CodecParams{Dim: dim})
		if err != nil {
			t.Fatal(err)
		}
		src := make([]float32, n*dim)
		for r := 0; r < n; r++ {
			row := src[r*dim : (r+1)*dim]
			switch r % 4 {
			case 0: // constant
				for i := range row {
					row[i] = 1.5
				}
			case 1: // constant but for one huge element
				for i := range row {
					row[i] = -0.25
				}
				row[r%dim] = 900
			default:
				for i := range row {
					row[i] = float32(rng.NormFloat64())
				}
				row[(3*r)%dim] = -400
			}
		}
		tile := make([]byte, c.TileBytes(n))
		c.Encode(tile, 0, src, n)
		dec := make([]float32, n*dim)
		c.Decode(dec, tile, 0, n)
		for _, run := range []struct{ row0, n int }{{0, n}, {37, 90}, {149, 1}} {
			w := make([]float32, nq*run.n)
			for i := range w {
				w[i] = float32(rng.Float64())
			}
			acc := make([]float32, nq*dim)
			c.Accumulate(acc, w, run.n, nq, tile, run.row0, run.n)
			for q := 0; q < nq; q++ {
				for e := 0; e < dim; e++ {
					var want, mag float64
					for r := 0; r < run.n; r++ {
						v := float64(w[q*run.n+r]) * float64(dec[(run.row0+r)*dim+e])
						want += v
						mag += math.Abs(v)
					}
					if d := math.Abs(float64(acc[q*dim+e]) - want); d > 1e-5*(1+mag) {
						t.Fatalf("%s rows [%d,%d) query %d element %d: %v, want %v", name, run.row0, run.row0+run.n, q, e, acc[q*dim+e], want)
					}
				}
			}
		}
	}
}
