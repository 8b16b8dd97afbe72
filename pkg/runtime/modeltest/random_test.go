package modeltest

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
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

// TestWriteGGUFQ80: WriteGGUF writes Q8_0 matrices (norms in F32) that the
// runtime loads as Q8_0, each within one quantization step of the F32
// file's weights.
func TestWriteGGUFQ80(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Arch: "llama", Seed: 3, Dim: 64, Hidden: 128, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32, Context: 64}
	q, f := spec, spec
	q.DType, f.DType = "Q8_0", "F32"
	for _, s := range []struct {
		sp   Spec
		path string
	}{{q, dir + "/q.gguf"}, {f, dir + "/f.gguf"}} {
		if err := WriteGGUF(s.path, s.sp); err != nil {
			t.Fatal(err)
		}
	}
	mq, err := runtime.Load(t.Context(), dir+"/q.gguf", runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mq.Close()
	mf, err := runtime.Load(t.Context(), dir+"/f.gguf", runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	wq, wf := mq.Layers[0].Down, mf.Layers[0].Down
	if wq.DType != tensor.Q80 || mq.Layers[0].AttnNorm == nil {
		t.Fatalf("down is %v, want Q8_0", wq.DType)
	}
	got := make([]float32, wq.Cols) // row 0, dequantized
	for b := 0; b < wq.Cols/tensor.Q80BlockSize; b++ {
		blk := wq.Raw[b*tensor.Q80BlockBytes:]
		d := simd.F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		for i := range tensor.Q80BlockSize {
			got[b*tensor.Q80BlockSize+i] = d * float32(int8(blk[2+i]))
		}
	}
	want := wf.F32[:wf.Cols]
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 0.01 {
			t.Fatalf("down[0][%d] = %g from Q8_0, %g from F32", i, got[i], want[i])
		}
	}
}

// TestRandomModelFastBlockTypes: RandomModelFast makes a model in a block
// type (Q4_K here) whose matrices are QuantizeRow's blocks of the values
// the F32 model of the same seed has, and refuses columns that are not a
// multiple of the type's block.
func TestRandomModelFastBlockTypes(t *testing.T) {
	c := runtime.Config{Dim: 256, Hidden: 512, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300, ContextLen: 64}
	f, err := RandomModelFast(c, tensor.F32, 3)
	if err != nil {
		t.Fatal(err)
	}
	q, err := RandomModelFast(c, tensor.Q4K, 3)
	if err != nil {
		t.Fatal(err)
	}
	wf, wq := f.Layers[0].Down, q.Layers[0].Down
	if wq.DType != tensor.Q4K || len(wq.Raw) != wq.Rows*tensor.Q4K.RowBytes(wq.Cols) {
		t.Fatalf("Down is %v with %d bytes, want Q4_K with %d", wq.DType, len(wq.Raw), wq.Rows*tensor.Q4K.RowBytes(wq.Cols))
	}
	want := make([]byte, tensor.Q4K.RowBytes(wf.Cols))
	for r := 0; r < wf.Rows; r++ {
		gguf.QuantizeRow(gguf.Q4K, want, wf.F32[r*wf.Cols:(r+1)*wf.Cols])
		if !slices.Equal(want, wq.Raw[r*len(want):(r+1)*len(want)]) {
			t.Fatalf("Down row %d differs from QuantizeRow of the F32 model's row", r)
		}
	}
	c.Dim, c.HeadDim = 128, 32
	if _, err := RandomModelFast(c, tensor.Q4K, 3); err == nil {
		t.Error("RandomModelFast(Q4_K) with 128 columns succeeded")
	}
}
