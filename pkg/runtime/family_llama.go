package runtime

import "github.com/kvqlabs/kvq/pkg/tensor"

// llamaFamily is the Llama block: RMSNorm, attention with optional q/k/v
// biases (Qwen2) and per-head q/k RMSNorms (Qwen3), RMSNorm, SwiGLU MLP,
// each with a residual add. Mistral is Llama with a sliding window. Every
// layer has the config's geometry and the model's RoPE.
var llamaFamily = Family{
	Archs: []Arch{
		{Name: "llama", HF: "LlamaForCausalLM"},
		{Name: "mistral", HF: "MistralForCausalLM", HFWindow: true},
		{Name: "qwen2", HF: "Qwen2ForCausalLM", GGUFNeoX: true},
		{Name: "qwen3", HF: "Qwen3ForCausalLM", GGUFNeoX: true,
			HFRequired: []string{"self_attn.q_norm.weight", "self_attn.k_norm.weight"}},
	},
	Tensors: []LayerTensor{
		{HF: "input_layernorm.weight", GGUF: "attn_norm.weight", Label: "attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.AttnNorm }},
		{HF: "self_attn.q_proj.weight", GGUF: "attn_q.weight", Label: "q", Shape: matrixOf(sizeQ, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wq }},
		{HF: "self_attn.k_proj.weight", GGUF: "attn_k.weight", Label: "k", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wk }},
		{HF: "self_attn.v_proj.weight", GGUF: "attn_v.weight", Label: "v", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wv }},
		{HF: "self_attn.o_proj.weight", GGUF: "attn_output.weight", Label: "o", Shape: matrixOf(sizeDim, sizeQ), Matrix: func(l *Layer) **tensor.Weight { return &l.Wo }},
		{HF: "self_attn.q_proj.bias", GGUF: "attn_q.bias", Label: "q bias", Shape: sizeQ, Vector: func(l *Layer) *[]float32 { return &l.Bq }, Optional: true},
		{HF: "self_attn.k_proj.bias", GGUF: "attn_k.bias", Label: "k bias", Shape: sizeKV, Vector: func(l *Layer) *[]float32 { return &l.Bk }, Optional: true},
		{HF: "self_attn.v_proj.bias", GGUF: "attn_v.bias", Label: "v bias", Shape: sizeKV, Vector: func(l *Layer) *[]float32 { return &l.Bv }, Optional: true},
		{HF: "self_attn.q_norm.weight", GGUF: "attn_q_norm.weight", Label: "q norm", Shape: sizeHeadDim, Vector: func(l *Layer) *[]float32 { return &l.QNorm }, Optional: true},
		{HF: "self_attn.k_norm.weight", GGUF: "attn_k_norm.weight", Label: "k norm", Shape: sizeHeadDim, Vector: func(l *Layer) *[]float32 { return &l.KNorm }, Optional: true},
		{HF: "post_attention_layernorm.weight", GGUF: "ffn_norm.weight", Label: "ffn norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.FFNNorm }},
		{HF: "mlp.gate_proj.weight", GGUF: "ffn_gate.weight", Label: "gate", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Gate }},
		{HF: "mlp.up_proj.weight", GGUF: "ffn_up.weight", Label: "up", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Up }},
		{HF: "mlp.down_proj.weight", GGUF: "ffn_down.weight", Label: "down", Shape: matrixOf(sizeDim, sizeHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.Down }},
	},
	Layer: llamaLayer,
	Block: llamaBlock,
}

// llamaLayer is the Llama family's geometry: every layer has the config's
// geometry, window and the model's RoPE.
func llamaLayer(c *Config, invFreq []float64, _ int) LayerGeometry {
	return LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
		InvFreq: invFreq, Window: c.SlidingWindow, Scale: ropeScale(c)}
}

func llamaBlock(s *Step, li int) error {
	if err := llamaAttention(s, li); err != nil {
		return err
	}
	return denseFFN(s, li)
}

// llamaAttention is the block's first half: RMSNorm, attention (with the
// layer's biases and q/k norms when it has them) and the residual add.
func llamaAttention(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
	be.RMSNorm(s.XN, s.X, nt, l.AttnNorm, c.RMSEps)
	be.MatMul(s.Q, s.XN, nt, l.Wq)
	be.MatMul(s.K, s.XN, nt, l.Wk)
	be.MatMul(s.V, s.XN, nt, l.Wv)
	if l.Bq != nil {
		be.AddBias(s.Q, nt, l.Bq)
	}
	if l.Bk != nil {
		be.AddBias(s.K, nt, l.Bk)
	}
	if l.Bv != nil {
		be.AddBias(s.V, nt, l.Bv)
	}
	if l.QNorm != nil {
		be.RMSNorm(s.Q, s.Q, nt*s.Layer.Heads, l.QNorm, c.RMSEps)
	}
	if l.KNorm != nil {
		be.RMSNorm(s.K, s.K, nt*s.Layer.KVHeads, l.KNorm, c.RMSEps)
	}
	if err := s.Attention(li, s.Att, s.Q, s.K, s.V); err != nil {
		return err
	}
	be.MatMul(s.O, s.Att, nt, l.Wo)
	be.Add(s.X, s.O, nt*c.Dim)
	be.RMSNorm(s.XN, s.X, nt, l.FFNNorm, c.RMSEps)
	return nil
}

// denseFFN is the SwiGLU MLP on s.XN (the normed residual), added into
// s.X.
func denseFFN(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
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

// The sizes the config implies, for LayerTensor.Shape.
func sizeDim(c *Config) []int     { return []int{c.Dim} }
func sizeHidden(c *Config) []int  { return []int{c.Hidden} }
func sizeHeadDim(c *Config) []int { return []int{c.HeadDim} }
func sizeQ(c *Config) []int       { return []int{c.Heads * c.HeadDim} }
func sizeKV(c *Config) []int      { return []int{c.KVHeads * c.HeadDim} }

// matrixOf is the shape [rows, cols] of two sizes.
func matrixOf(rows, cols func(*Config) []int) func(*Config) []int {
	return func(c *Config) []int { return []int{rows(c)[0], cols(c)[0]} }
}
