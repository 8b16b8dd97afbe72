package kvcache_test

import (
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
