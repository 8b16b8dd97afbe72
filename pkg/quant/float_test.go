package quant_test

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

func TestFloatFormatsThroughCache(t *testing.T) {
	for _, f := range []quant.Format{quant.FP32, quant.FP16, quant.BF16} {
		cachetest.Run(t, f, cachetest.Options{Dims: []int{8, 64, 128}, Tol: 1e-5})
	}
}
