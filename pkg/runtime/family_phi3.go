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
	Layer:   phi3Layer,
	Block:   phi3Block,
	Prepare: phi3Prepare,
}

func sizeQKV(c *Config) []int { return []int{(c.Heads + 2*c.KVHeads) * c.HeadDim} }

// phi3Layer is the Llama geometry, with LongRoPE's attention factor
// folded into the attention scale when every dimension rotates: Hugging
// Face and llama.cpp multiply the rotated q and k by it, which scales q·k
// by its square. With partial rotary (Phi-4-mini) the dimensions that do
// not rotate keep their scale, so the factor's square multiplies the
// rotated dimensions of q instead (Layer.QScale, phi3Block). Either way
// the cache holds the keys without the factor.
func phi3Layer(c *Config, invFreq []float64, _ int) LayerGeometry {
	scale := defaultScale(c.HeadDim)
	if a := c.Scaling.AttnFactor; a != 0 && a != 1 && c.RopeDim == c.HeadDim {
		scale = float32(a * a / math.Sqrt(float64(c.HeadDim)))
	}
	return LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
		InvFreq: invFreq, Window: c.SlidingWindow, Scale: scale}
}

// phi3Prepare checks the LongRoPE factors and sets each layer's QScale
// (nil unless the attention factor meets partial rotary).
func phi3Prepare(m *Model) error {
	c := &m.Config
	for i := range m.Layers {
		m.Layers[i].QScale = nil
	}
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
	a := s.AttnFactor
	if !(a >= 0) || math.IsInf(a, 0) {
		return fmt.Errorf("%w: LongRoPE attention factor %v", ErrModel, a)
	}
	if a == 0 || a == 1 || c.RopeDim == c.HeadDim {
		return nil
	}
	// A diagonal product scales each rotated value exactly once (the
	// other terms of its sum are zeros), whatever the kernel.
	d := make([]float32, c.HeadDim*c.HeadDim)
	for i := range c.HeadDim {
		d[i*c.HeadDim+i] = 1
		if i < c.RopeDim {
			d[i*c.HeadDim+i] = float32(a * a)
		}
	}
	w := &tensor.Weight{Name: "LongRoPE query scale", DType: tensor.F32, Rows: c.HeadDim, Cols: c.HeadDim, F32: d}
	for i := range m.Layers {
		m.Layers[i].QScale = w
	}
	return nil
}

// phi3Block is llamaBlock (Phi-3 has no biases or q/k norms), with the
// queries scaled by Layer.QScale where it is set.
func phi3Block(s *Step, li int) error {
	l := s.Weights
	if l.QScale == nil {
		return llamaBlock(s, li)
	}
	be, c, nt := s.Ops, s.Config, s.NT
	be.RMSNorm(s.XN, s.X, nt, l.AttnNorm, c.RMSEps)
	be.MatMul(s.Q, s.XN, nt, l.Wq)
	be.MatMul(s.K, s.XN, nt, l.Wk)
	be.MatMul(s.V, s.XN, nt, l.Wv)
	be.MatMul(s.Att, s.Q, nt*s.Layer.Heads, l.QScale) // each head's row
	if err := s.Attention(li, s.Q, s.Att, s.K, s.V); err != nil {
		return err
	}
	be.MatMul(s.O, s.Q, nt, l.Wo)
	be.Add(s.X, s.O, nt*c.Dim)
	be.RMSNorm(s.XN, s.X, nt, l.FFNNorm, c.RMSEps)
	be.MatMul(s.Gate, s.XN, nt, l.Gate)
	be.MatMul(s.Up, s.XN, nt, l.Up)
	if err := s.Check(li); err != nil {
		return err
	}
	be.SwiGLU(s.Gate, s.Up, nt*c.Hidden)
	be.MatMul(s.O, s.Gate, nt, l.Down)
	be.Add(s.X, s.O, nt*c.Dim)
	return nil
}
