package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

func TestTurboThroughCache(t *testing.T) {
	reg := quant.Formats()
	for _, name := range []string{"turbo4", "turbo3", "turbo2", "turbo3:nc", "turbo4:seed0"} {
		// 80 and 96 are not powers of two: dense random rotations.
		cachetest.Run(t, reg.MustLookup(name), cachetest.Options{Dims: []int{64, 80, 128}, Tol: 5e-5, Windows: true})
	}
}

// TestTurboDistortion checks the mean squared error of unit vectors against
// the paper's refined bounds D_mse(b) ≈ 0.117, 0.03, 0.009 for b = 2, 3, 4
// (docs/quant-schemes.md §5.3), with 15% slack for finite samples and fp16
// norms.
func TestTurboDistortion(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const dim, n = 128, 400
	for b, want := range map[int]float64{2: 0.117, 3: 0.0345, 4: 0.0095} {
		f := quant.Formats().MustLookup("turbo" + string(rune('0'+b)))
		c, err := f.NewCodec(quant.CodecParams{Dim: dim})
		if err != nil {
			t.Fatal(err)
		}
		src := make([]float32, n*dim)
		for i := 0; i < n; i++ {
			var ss float64
			for d := 0; d < dim; d++ {
				v := rng.NormFloat64()
				src[i*dim+d] = float32(v)
				ss += v * v
			}
			for d := 0; d < dim; d++ {
				src[i*dim+d] /= float32(math.Sqrt(ss))
			}
		}
		tile := make([]byte, c.TileBytes(n))
		c.Encode(tile, 0, src, n)
		dec := make([]float32, len(src))
		c.Decode(dec, tile, 0, n)
		var mse float64
		for i := range src {
			d := float64(src[i] - dec[i])
			mse += d * d
		}
		mse /= n
		if mse > want*1.15 || mse < want*0.7 {
			t.Errorf("turbo%d: mean ‖x−x̂‖² of unit vectors = %.4f, want ≈ %.4f", b, mse, want)
		}
	}
}
