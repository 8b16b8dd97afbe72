package quant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestMaxHeadDim: past MaxHeadDim every format describes itself as not
// available (a head size of 1e18 used to panic allocating the rotation,
// 20000 to run Gram–Schmidt for hours), and the rotated formats refuse a
// codec with ErrDim.
func TestMaxHeadDim(t *testing.T) {
	for _, dim := range []int{quant.MaxHeadDim + 1, 20000, 1e18} {
		for _, in := range quant.Formats().Describe(dim) {
			if !strings.Contains(in.Error, "unsupported head size") {
				t.Errorf("Describe(%d): %s: error %q, want unsupported head size", dim, in.Name, in.Error)
			}
		}
		f, err := quant.Formats().Lookup("turbo4")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.NewCodec(quant.CodecParams{Dim: dim}); !errors.Is(err, quant.ErrDim) {
			t.Errorf("turbo4.NewCodec(Dim %d) = %v, want ErrDim", dim, err)
		}
	}
	for _, in := range quant.Formats().Describe(quant.MaxHeadDim) {
		if strings.Contains(in.Error, "unsupported head size") && !strings.Contains(in.Error, "multiple") && !strings.Contains(in.Error, "whole bytes") {
			t.Errorf("Describe(%d): %s: %q", quant.MaxHeadDim, in.Name, in.Error)
		}
	}
}
