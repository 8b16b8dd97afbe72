package estimate

import (
	"fmt"
	"io"
	"os"

	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// safetensorsInfo is what a safetensors header says about the weights.
type safetensorsInfo struct {
	params int64 // elements over all tensors
	bytes  int64 // data bytes over all tensors
	// shapes holds the shapes of the tensors checkShapes compares with
	// config.json, where the file has them unquantized.
	shapes map[string][]int64
}

func readSafetensorsFile(path string) (safetensorsInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return safetensorsInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return safetensorsInfo{}, err
	}
	info, err := readSafetensors(f, st.Size())
	if err != nil {
		return safetensorsInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// readSafetensors sums the elements and data bytes of the tensors in the
// safetensors file r (of size bytes) holds, reading only its header.
func readSafetensors(r io.ReaderAt, size int64) (safetensorsInfo, error) {
	f, err := safetensors.Parse(r, size)
	if err != nil {
		return safetensorsInfo{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var info safetensorsInfo
	for _, t := range f.Tensors {
		if shapeChecked[t.Name] && len(t.Shape) == 2 && floatDTypes[t.DType] {
			if info.shapes == nil {
				info.shapes = map[string][]int64{}
			}
			info.shapes[t.Name] = t.Shape
		}
		if info.params, err = add(info.params, t.NumElements()); err == nil {
			info.bytes, err = add(info.bytes, t.Size)
		}
		if err != nil {
			return safetensorsInfo{}, err
		}
	}
	return info, nil
}

// The tensors whose shapes checkShapes compares with config.json: those of
// a Llama-style checkpoint (Llama, Mistral, Qwen, Gemma), the first layer
// standing for all.
const (
	embedTensor = "model.embed_tokens.weight"
	qTensor     = "model.layers.0.self_attn.q_proj.weight"
	kTensor     = "model.layers.0.self_attn.k_proj.weight"
	vTensor     = "model.layers.0.self_attn.v_proj.weight"
)

var shapeChecked = map[string]bool{embedTensor: true, qTensor: true, kTensor: true, vTensor: true}

// floatDTypes are the dtypes whose tensors keep their logical shape
// (quantized checkpoints pack theirs).
var floatDTypes = map[safetensors.DType]bool{
	safetensors.F64: true, safetensors.F32: true, safetensors.F16: true, safetensors.BF16: true,
	safetensors.F8E4M3: true, safetensors.F8E5M2: true,
}

// checkShapes compares the geometry m read from config.json with the
// shapes of the weights: where they disagree the weights are right and the
// config is wrong, and the error names the config's fields, the tensor and
// both shapes. Tensors that are absent are not checked, nor is multi-head
// latent attention (whose projections are factored).
func checkShapes(m Model, shapes map[string][]int64) error {
	if m.MLA() || len(shapes) == 0 {
		return nil
	}
	headSize := fmt.Sprintf("a head size of %d (head_dim, or hidden_size / num_attention_heads)", m.HeadDim)
	for _, c := range []struct {
		name, fields string
		want         [2]int64
	}{
		{embedTensor, fmt.Sprintf("hidden_size = %d", m.Hidden), [2]int64{-1, int64(m.Hidden)}},
		{qTensor, fmt.Sprintf("num_attention_heads = %d with %s", m.Heads, headSize), [2]int64{int64(m.Heads) * int64(m.HeadDim), int64(m.Hidden)}},
		{kTensor, fmt.Sprintf("num_key_value_heads = %d with %s", m.KVHeads, headSize), [2]int64{int64(m.KVHeads) * int64(m.HeadDim), int64(m.Hidden)}},
		{vTensor, fmt.Sprintf("num_key_value_heads = %d with %s", m.KVHeads, headSize), [2]int64{int64(m.KVHeads) * int64(m.HeadDim), int64(m.Hidden)}},
	} {
		got, ok := shapes[c.name]
		if !ok {
			continue
		}
		want := c.want
		if want[0] < 0 {
			want[0] = got[0] // the vocabulary is checked elsewhere
		}
		if m.Hidden <= 0 {
			want[1] = got[1]
		}
		if got[0] != want[0] || got[1] != want[1] {
			return fmt.Errorf("%s give %s a shape of [%d %d], but the weights have [%d %d]", c.fields, c.name, want[0], want[1], got[0], got[1])
		}
	}
	return nil
}
