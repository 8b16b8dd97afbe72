package quant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestSpecSliding checks sliding=NAME: it sets the formats of the
// sliding-window layers only, later parts win where overrides overlap,
// and ParseList keeps it with the spec it follows.
func TestSpecSliding(t *testing.T) {
	reg := quant.Formats()
	s, err := reg.ParseSpec("int4,sliding=fp16,L0=int8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layer   int
		sliding bool
		want    string
	}{{0, true, "int8"}, {1, true, "fp16"}, {2, false, "int4"}, {3, true, "fp16"}} {
		k, v := s.ForLayerKind(tc.layer, 4, tc.sliding)
		if k.Name() != tc.want || v.Name() != tc.want {
			t.Errorf("layer %d (sliding %v): K %s V %s, want %s", tc.layer, tc.sliding, k.Name(), v.Name(), tc.want)
		}
	}
	if k, _ := s.ForLayer(1, 4); k.Name() != "int4" {
		t.Errorf("ForLayer (full attention) = %s, want int4", k.Name())
	}
	if err := s.CheckLayers(4); err != nil {
		t.Errorf("CheckLayers: %v", err)
	}
	if s.String() != "int4,sliding=fp16,l0=int8" {
		t.Errorf("String() = %q", s.String())
	}
	specs, err := reg.ParseList("fp16,fp8,sliding=fp16,int4,sliding=fp16")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[1].String() != "fp8,sliding=fp16" || specs[2].String() != "int4,sliding=fp16" {
		t.Errorf("ParseList: %v", specs)
	}
	for in, want := range map[string]string{"int4,sliding=int3": `sliding=: unknown format "int3"`, "int4,sliding=fp16,sliding=fp8": "sliding= given twice"} {
		if _, err := reg.ParseSpec(in); !errors.Is(err, quant.ErrBadSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q) = %v, want %q", in, err, want)
		}
	}
}
