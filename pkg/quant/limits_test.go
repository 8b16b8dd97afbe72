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

// TestGroupCutToHeadSize holds the documented behaviour of kvq formats: a
// per-token group larger than the head size is cut to it, so int4:g32 on
// head size 8 costs what int4:g8 costs.
func TestGroupCutToHeadSize(t *testing.T) {
	reg := quant.Formats()
	g32, err := reg.Lookup("int4:g32")
	if err != nil {
		t.Fatal(err)
	}
	g8, err := reg.Lookup("int4:g8")
	if err != nil {
		t.Fatal(err)
	}
	a, b := quant.DescribeFormat(g32, 8), quant.DescribeFormat(g8, 8)
	if a.Error != "" || a.Bytes != b.Bytes || a.Bits != b.Bits {
		t.Errorf("int4:g32 at head size 8: %+v; want the cost of int4:g8, %+v", a, b)
	}
}
