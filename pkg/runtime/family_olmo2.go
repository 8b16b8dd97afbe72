package runtime

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/tensor"
)

// olmo2Family is OLMo 2: the Llama block with its norms moved after the
// attention and the MLP (x + norm(attn(x)), x + norm(mlp(x)); no norm
// before either) and RMSNorms of q and k over the whole projection (one
// weight of Heads·HeadDim and one of KVHeads·HeadDim values, applied before
// the split into heads), with NeoX RoPE in GGUF files too (llama.cpp's
// converter does not permute its Q/K rows). Its post-norms fill the
// Layer's AttnNorm and FFNNorm: each is the norm of its sub-block.
var olmo2Family = Family{
	Archs: []Arch{
		{Name: "olmo2", HF: "Olmo2ForCausalLM", GGUFNeoX: true},
	},
	Tensors: []LayerTensor{
		{HF: "self_attn.q_proj.weight", GGUF: "attn_q.weight", Label: "q", Shape: matrixOf(sizeQ, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wq }},
		{HF: "self_attn.k_proj.weight", GGUF: "attn_k.weight", Label: "k", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wk }},
		{HF: "self_attn.v_proj.weight", GGUF: "attn_v.weight", Label: "v", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wv }},
		{HF: "self_attn.o_proj.weight", GGUF: "attn_output.weight", Label: "o", Shape: matrixOf(sizeDim, sizeQ), Matrix: func(l *Layer) **tensor.Weight { return &l.Wo }},
		{HF: "self_attn.q_norm.weight", GGUF: "attn_q_norm.weight", Label: "q norm", Shape: sizeQ, Vector: func(l *Layer) *[]float32 { return &l.QNorm }},
		{HF: "self_attn.k_norm.weight", GGUF: "attn_k_norm.weight", Label: "k norm", Shape: sizeKV, Vector: func(l *Layer) *[]float32 { return &l.KNorm }},
		{HF: "post_attention_layernorm.weight", GGUF: "post_attention_norm.weight", Label: "post-attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.AttnNorm }},
		{HF: "mlp.gate_proj.weight", GGUF: "ffn_gate.weight", Label: "gate", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Gate }},
		{HF: "mlp.up_proj.weight", GGUF: "ffn_up.weight", Label: "up", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Up }},
		{HF: "mlp.down_proj.weight", GGUF: "ffn_down.weight", Label: "down", Shape: matrixOf(sizeDim, sizeHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.Down }},
		{HF: "post_feedforward_layernorm.weight", GGUF: "post_ffw_norm.weight", Label: "post-feedforward norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.FFNNorm }},
	},
	Layer: func(c *Config, invFreq []float64, _ int) LayerGeometry {
		return LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
			InvFreq: invFreq, Window: c.SlidingWindow, Scale: defaultScale(c.HeadDim)}
	},
	Block:   olmo2Block,
	Prepare: olmo2Prepare,
}

// olmo2Prepare refuses a sliding window: llama.cpp's "olmo2" files with one
// are OLMo 3, whose every fourth layer attends globally (a layer pattern
// kvq does not read).
func olmo2Prepare(m *Model) error {
	if m.SlidingWindow > 0 {
		return fmt.Errorf("%w: an olmo2 model with a sliding window of %d is OLMo 3 (sliding and global layers), which kvq does not run", ErrUnsupported, m.SlidingWindow)
	}
	return nil
}

func olmo2Block(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
	be.MatMul(s.Q, s.X, nt, l.Wq)
	be.MatMul(s.K, s.X, nt, l.Wk)
	be.MatMul(s.V, s.X, nt, l.Wv)
	be.RMSNorm(s.Q, s.Q, nt, l.QNorm, c.RMSEps) // rows of Heads·HeadDim
	be.RMSNorm(s.K, s.K, nt, l.KNorm, c.RMSEps) // rows of KVHeads·HeadDim
	if err := s.Attention(li, s.Att, s.Q, s.K, s.V); err != nil {
		return err
	}
	be.MatMul(s.O, s.Att, nt, l.Wo)
	be.RMSNorm(s.O, s.O, nt, l.AttnNorm, c.RMSEps)
	be.Add(s.X, s.O, nt*c.Dim)
	be.MatMul(s.Gate, s.X, nt, l.Gate)
	be.MatMul(s.Up, s.X, nt, l.Up)
	if err := s.Check(li); err != nil {
		return err
	}
	be.SwiGLU(s.Gate, s.Up, nt*c.Hidden)
	be.MatMul(s.O, s.Gate, nt, l.Down)
	be.RMSNorm(s.O, s.O, nt, l.FFNNorm, c.RMSEps)
	be.Add(s.X, s.O, nt*c.Dim)
	return nil
}
