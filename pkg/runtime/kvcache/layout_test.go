package kvcache_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestLayoutChecksScalesGeometry: a layout refuses a scales file written
// for another model, through the interleave wrapper too.
func TestLayoutChecksScalesGeometry(t *testing.T) {
	sf, err := quant.ParseFP8Scales([]byte(`{"layers": 32, "k_scale": {"0": 1}}`), "other.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := quant.NewFP8(quant.E4M3, quant.FP8Options{Scales: sf})
	if err != nil {
		t.Fatal(err)
	}
	g := kvcache.Geometry{Layers: 4, KVHeads: 2, HeadDim: 8}
	for _, k := range []quant.Format{f, quant.InterleaveKeys(f)} {
		spec := quant.Spec{K: k, V: quant.FP16}
		if _, err := kvcache.NewLayout(g, spec, 0); err == nil || !strings.Contains(err.Error(), `other.json: "layers" is 32, the model has 4 layers`) {
			t.Errorf("NewLayout(%s) = %v, want the scales file's layer count refused", k.Name(), err)
		}
	}
}

// TestLayoutRefusesMissingLayers: an override naming a layer the model does
// not have is an error, not silently ignored.
func TestLayoutRefusesMissingLayers(t *testing.T) {
	g := kvcache.Geometry{Layers: 32, KVHeads: 8, HeadDim: 128}
	for spec, want := range map[string]string{
		"int4,L99=fp16":    "L99: the model has 32 layers (valid: L0 to L31, or L-32 to L-1)",
		"int4,L-33=fp16":   "L-33: the model has 32 layers",
		"int4,L31-32=fp16": "L31-32: the model has 32 layers",
		"int4,L31=fp16":    "",
	} {
		s, err := quant.Formats().ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kvcache.NewLayout(g, s, 0)
		if want == "" {
			if err != nil {
				t.Errorf("NewLayout(%q) = %v, want a layout", spec, err)
			}
			continue
		}
		if !errors.Is(err, quant.ErrBadSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("NewLayout(%q) = %v, want ErrBadSpec mentioning %q", spec, err, want)
		}
	}
}
