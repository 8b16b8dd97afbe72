package quant_test

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

// Tolerances: the attention kernels of the block and fp8 formats read
// exactly the values Decode returns (codes become halves exactly, block and
// fp8 scales are applied in float32), so packed attention differs from
// float64 attention on the decoded rows only by float32 rounding: summation
// order, the softmax, and for the block formats the code offset that comes
// back as a per-block correction. 1e-5 of the largest value, the fp16
// baseline's tolerance, holds for all of them; measured worst cases are
// about 2e-6.
const kernelTol = 1e-5

func TestBlockFormatsThroughCache(t *testing.T) {
	r := quant.Formats()
	for _, name := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"} {
		// Any multiple of 32 (llama.cpp's block).
		cachetest.Run(t, r.MustLookup(name), cachetest.Options{Dims: []int{32, 64, 96, 128}, Tol: kernelTol, Windows: true})
		// The rotation needs a multiple of 64 (or 32); 192 uses 64-wide
		// blocks for K and V.
		cachetest.Run(t, r.MustLookup(name+":rot"), cachetest.Options{Dims: []int{32, 64, 128, 192}, Tol: kernelTol, Windows: true})
	}
}

func TestFP8FormatsThroughCache(t *testing.T) {
	r := quant.Formats()
	// Any head size; multiples of 8 take the SWAR kernels, others (12) the
	// table path.
	for _, name := range []string{"fp8", "fp8-e5m2", "fp8:dynamic", "fp8:head:dynamic", "fp8-e5m2:nosat", "fp8:scales@testdata/fp8_scales_2layers.json"} {
		cachetest.Run(t, r.MustLookup(name), cachetest.Options{Dims: []int{8, 12, 32, 64, 128}, Tol: kernelTol, Windows: true})
	}
	for _, name := range []string{"fp8:rot", "fp8-e5m2:rot", "fp8:rot:dynamic"} {
		cachetest.Run(t, r.MustLookup(name), cachetest.Options{Dims: []int{32, 64, 128}, Tol: kernelTol, Windows: true})
	}
}
