package quant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

func TestSpecCheckLayers(t *testing.T) {
	for _, tc := range []struct {
		spec string
		n    int
		err  string // "" for valid
	}{
		{"int4", 32, ""},
		{"int4,L0=fp16,L31=fp16", 32, ""},
		{"int4,L-1=fp16,L-32=fp16", 32, ""},
		{"int4,L0-31=int8", 32, ""},
		{"int4,L-2--1=fp16", 32, ""},
		{"int4,L99=fp16", 32, "L99: the model has 32 layers (valid: L0 to L31, or L-32 to L-1)"},
		{"int4,L32=fp16", 32, "L32: the model has 32 layers"},
		{"int4,L-33=fp16", 32, "L-33: the model has 32 layers"},
		{"int4,L30-40=fp16", 32, "L30-40: the model has 32 layers"},
		{"int4,L1=fp16", 1, "L1: the model has 1 layer (valid: L0, or L-1)"},
		{"int4,L3--30=fp16", 32, "L3--30 selects no layer of a 32-layer model (layers 3 to 2)"},
	} {
		s, err := quant.Formats().ParseSpec(tc.spec)
		if err != nil {
			t.Fatalf("ParseSpec(%q): %v", tc.spec, err)
		}
		err = s.CheckLayers(tc.n)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseSpec(%q).CheckLayers(%d) = %v, want nil", tc.spec, tc.n, err)
		case tc.err != "" && (err == nil || !errors.Is(err, quant.ErrBadSpec) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSpec(%q).CheckLayers(%d) = %v, want ErrBadSpec mentioning %q", tc.spec, tc.n, err, tc.err)
		}
	}
}
