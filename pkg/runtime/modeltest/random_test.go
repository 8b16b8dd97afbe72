package modeltest

import (
	"math"
	"slices"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestRandomModelFast: deterministic for a seed, different for another,
// and each matrix has the standard deviation 1/sqrt(cols) RandomModel's
// have.
func TestRandomModelFast(t *testing.T) {
	c := runtime.Config{Dim: 128, Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 300, ContextLen: 64}
	a, err := RandomModelFast(c, tensor.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomModelFast(c, tensor.F32, 1)
	d, _ := RandomModelFast(c, tensor.F32, 2)
	if !slices.Equal(a.Layers[1].Down.F32, b.Layers[1].Down.F32) {
		t.Error("same seed, different weights")
	}
	if slices.Equal(a.Layers[1].Down.F32, d.Layers[1].Down.F32) {
		t.Error("other seed, same weights")
	}
	if slices.Equal(a.Layers[0].Gate.F32, a.Layers[0].Up.F32) {
		t.Error("two matrices share their values")
	}
	for _, w := range []*tensor.Weight{a.Embed, a.Layers[0].Wq, a.Layers[1].Down} {
		var ss float64
		for _, v := range w.F32 {
			ss += float64(v) * float64(v)
		}
		std, want := math.Sqrt(ss/float64(len(w.F32))), 1/math.Sqrt(float64(w.Cols))
		if math.Abs(std/want-1) > 0.05 {
			t.Errorf("%s: std %.4f, want %.4f", w.Name, std, want)
		}
	}
	if _, err := RandomModelFast(c, tensor.F16, 1); err != nil {
		t.Fatal(err)
	}
}
