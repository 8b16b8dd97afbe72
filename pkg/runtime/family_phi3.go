package runtime

import (
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/pkg/tensor"
)

// phi3Family is Phi-3 (Phi-3-mini and -medium, Phi-3.5-mini, Phi-4 and
// Phi-4-mini): the Llama block with q, k and v in one matrix (qkv_proj,
// GGUF attn_qkv) and the MLP's gate and up in another (gate_up_proj, GGUF
// ffn_up, gate rows first), which the loaders split into views; LongRoPE
// scaling; partial rotary (Phi-4-mini); the sliding window config.json
// declares, on every layer (Phi-3-mini: 2047); tied embeddings where the
// checkpoint has no lm_head (Phi-4-mini).
var phi3Family = Family{
	Archs: []Arch{
		{Name: "phi3", HF: "Phi3ForCausalLM", GGUFNeoX: true, HFWindow: true},
	},
	Tensors: []LayerTensor{
		{HF: "input_layernorm.weight", GGUF: "attn_norm.weight", Label: "attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.AttnNorm }},
		{HF: "self_attn.qkv_proj.weight", GGUF: "attn_qkv.weight", Label: "qkv", Shape: matrixOf(sizeQKV, sizeDim),
			Parts: []func(l *Layer) **tensor.Weight{
				func(l *Layer) **tensor.Weight { return &l.Wq },
				func(l *Layer) **tensor.Weight { return &l.Wk },
				func(l *Layer) **tensor.Weight { return &l.Wv },
			},
			PartRows: func(c *Config) []int { return []int{c.Heads * c.HeadDim, c.KVHeads * c.HeadDim, c.KVHeads * c.HeadDim} }},
		{HF: "self_attn.o_proj.weight", GGUF: "attn_output.weight", Label: "o", Shape: matrixOf(sizeDim, sizeQ), Matrix: func(l *Layer) **tensor.Weight { return &l.Wo }},
		{HF: "post_attention_layernorm.weight", GGUF: "ffn_norm.weight", Label: "ffn norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.FFNNorm }},
		{HF: "mlp.gate_up_proj.weight", GGUF: "ffn_up.weight", Label: "gate_up", Shape: matrixOf(func(c *Config) []int { return []int{2 * c.Hidden} }, sizeDim),
			Parts: []func(l *Layer) **tensor.Weight{
				func(l *Layer) **tensor.Weight { return &l.Gate },
				func(l *Layer) **tensor.Weight { return &l.Up },
			},
			PartRows: func(c *Config) []int { return []int{c.Hidden, c.Hidden} }},
		{HF: "mlp.down_proj.weight", GGUF: "ffn_down.weight", Label: "down", Shape: matrixOf(sizeDim, sizeHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.Down }},
	},
	Layer: phi3Layer,
	Block: llamaBlock,
	Check: phi3Check,
}

func sizeQKV(c *Config) []int { return []int{(c.Heads + 2*c.KVHeads) * c.HeadDim} }

// phi3Layer is the Llama geometry, with LongRoPE's attention factor
// folded into the attention scale: Hugging Face and llama.cpp multiply
// the rotated q and k by it, which scales q·k by its square when every
// dimension rotates (phi3Check refuses partial rotary with a factor).
// The cache holds the keys without the factor.
func phi3Layer(c *Config, invFreq []float64, _ int) LayerGeometry {
	scale := defaultScale(c.HeadDim)
	if a := c.Scaling.AttnFactor; a != 0 && a != 1 {
		scale = float32(a * a / math.Sqrt(float64(c.HeadDim)))
	}
	return LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
		InvFreq: invFreq, Window: c.SlidingWindow, Scale: scale}
}

func phi3Check(c *Config) error {
	s := &c.Scaling
	if s.Type != "longrope" {
		return nil
	}
	half := c.RopeDim / 2
	if len(s.ShortFactor) != half || len(s.LongFactor) != half {
		return fmt.Errorf("%w: LongRoPE has %d short and %d long factors, want %d each (half the %d rotated dimensions)", ErrModel, len(s.ShortFactor), len(s.LongFactor), half, c.RopeDim)
	}
	for _, f := range s.ShortFactor {
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: LongRoPE short factor %v", ErrModel, f)
		}
	}
	if a := s.AttnFactor; a != 0 && a != 1 && c.RopeDim != c.HeadDim {
		return fmt.Errorf("%w: LongRoPE attention factor %v with partial rotary (%d of %d dimensions): kvq folds the factor into the attention scale, which needs every dimension rotated", ErrUnsupported, a, c.RopeDim, c.HeadDim)
	}
	if a := s.AttnFactor; !(a >= 0) || math.IsInf(a, 0) {
		return fmt.Errorf("%w: LongRoPE attention factor %v", ErrModel, a)
	}
	return nil
}
