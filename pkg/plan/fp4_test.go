package plan

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestFP4Formats checks that the engines' FP4 caches map to kvq's codecs
// (so plan models their bytes): vLLM's and TensorRT-LLM's nvfp4 to nvfp4,
// SGLang's fp4_e2m1 to fp4_e2m1, each a 4.5-bit E2M1 format of the fp4
// family with the engine's scale type.
func TestFP4Formats(t *testing.T) {
	want := map[string]quant.DType{"nvfp4": quant.DTypeE4M3, "fp4_e2m1": quant.DTypeUE8M0}
	found := 0
	for _, engine := range Engines() {
		for _, f := range EngineFormats(engine) {
			st, ok := want[f.Name]
			if !ok {
				continue
			}
			found++
			if f.KVQ == "" {
				t.Errorf("%s %s: no kvq spec", engine, f.Name)
				continue
			}
			q, err := quant.Formats().Lookup(f.KVQ)
			if err != nil {
				t.Fatalf("%s %s: %v", engine, f.Name, err)
			}
			tr := q.Traits(true)
			if tr.Family != quant.FamilyFP4 || tr.ScaleType != st || quant.DescribeFormat(q, 128).Bits != 4.5 {
				t.Errorf("%s %s → %s: traits %+v", engine, f.Name, f.KVQ, tr)
			}
		}
	}
	if found != 3 {
		t.Errorf("found %d FP4 formats (vLLM nvfp4, SGLang fp4_e2m1, TensorRT-LLM nvfp4), want 3", found)
	}
}
