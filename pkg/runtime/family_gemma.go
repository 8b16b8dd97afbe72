package runtime

import (
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/hfconfig"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// gemmaFamily is the Gemma 2 and Gemma 3 (text) block:
//
//	x = embed(ids) · √hidden
//	h = x + postnorm_attn(attention(norm_attn(x)))
//	x = h + postnorm_ffn(down(gelu_tanh(gate(n)) · up(n))), n = norm_ffn(h)
//
// RMSNorm weights are held as the factor the norm multiplies by: Hugging
// Face checkpoints store w in x·(1+w) and the loader adds 1; GGUF files
// already hold w+1 (llama.cpp's converter adds it). Gemma 2 softcaps the
// attention scores (AttnSoftcap) and the logits (FinalSoftcap) and
// alternates sliding-window and global layers (even layers slide); Gemma 3
// normalises q and k per head instead of softcapping, slides five layers
// in six with a RoPE base of its own (RopeLocalTheta) and scales the RoPE
// of its global layers (linear rope_scaling). The attention scale is
// 1/√query_pre_attn_scalar.
var gemmaFamily = Family{
	Archs: []Arch{
		{Name: "gemma2", HF: "Gemma2ForCausalLM", GGUFNeoX: true, NormPlusOne: true},
		{Name: "gemma3", HF: "Gemma3ForCausalLM", GGUFNeoX: true, NormPlusOne: true,
			HFRequired: []string{"self_attn.q_norm.weight", "self_attn.k_norm.weight"}},
		// The multimodal releases (4B to 27B): the text model of their
		// text_config, its tensors under language_model.model. (as Google
		// uploaded them) or model.language_model. (transformers ≥ 4.52);
		// the vision tower is not read.
		{Name: "gemma3", HF: "Gemma3ForConditionalGeneration", GGUFNeoX: true, NormPlusOne: true,
			HFRequired: []string{"self_attn.q_norm.weight", "self_attn.k_norm.weight"},
			HFPrefixes: []string{"language_model.model.", "model.language_model."}},
	},
	Tensors: []LayerTensor{
		{HF: "input_layernorm.weight", GGUF: "attn_norm.weight", Label: "attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.AttnNorm }},
		{HF: "self_attn.q_proj.weight", GGUF: "attn_q.weight", Label: "q", Shape: matrixOf(sizeQ, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wq }},
		{HF: "self_attn.k_proj.weight", GGUF: "attn_k.weight", Label: "k", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wk }},
		{HF: "self_attn.v_proj.weight", GGUF: "attn_v.weight", Label: "v", Shape: matrixOf(sizeKV, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Wv }},
		{HF: "self_attn.o_proj.weight", GGUF: "attn_output.weight", Label: "o", Shape: matrixOf(sizeDim, sizeQ), Matrix: func(l *Layer) **tensor.Weight { return &l.Wo }},
		{HF: "self_attn.q_norm.weight", GGUF: "attn_q_norm.weight", Label: "q norm", Shape: sizeHeadDim, Vector: func(l *Layer) *[]float32 { return &l.QNorm }, Optional: true},
		{HF: "self_attn.k_norm.weight", GGUF: "attn_k_norm.weight", Label: "k norm", Shape: sizeHeadDim, Vector: func(l *Layer) *[]float32 { return &l.KNorm }, Optional: true},
		{HF: "post_attention_layernorm.weight", GGUF: "post_attention_norm.weight", Label: "post-attention norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.PostAttnNorm }},
		{HF: "pre_feedforward_layernorm.weight", GGUF: "ffn_norm.weight", Label: "ffn norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.FFNNorm }},
		{HF: "mlp.gate_proj.weight", GGUF: "ffn_gate.weight", Label: "gate", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Gate }},
		{HF: "mlp.up_proj.weight", GGUF: "ffn_up.weight", Label: "up", Shape: matrixOf(sizeHidden, sizeDim), Matrix: func(l *Layer) **tensor.Weight { return &l.Up }},
		{HF: "mlp.down_proj.weight", GGUF: "ffn_down.weight", Label: "down", Shape: matrixOf(sizeDim, sizeHidden), Matrix: func(l *Layer) **tensor.Weight { return &l.Down }},
		{HF: "post_feedforward_layernorm.weight", GGUF: "post_ffw_norm.weight", Label: "post-ffn norm", Shape: sizeDim, Vector: func(l *Layer) *[]float32 { return &l.PostFFNNorm }},
	},
	Layer:    gemmaLayer,
	Block:    gemmaBlock,
	Needs:    needSoftcapOps,
	Embedded: func(s *Step) { s.Ops.(backend.SoftcapOps).Scale(s.X, s.NT*s.Config.Dim, gemmaEmbedScale(s.Config)) },
	Logits: func(c *Config, logits []float32) {
		if c.FinalSoftcap > 0 {
			cpu.Softcap(logits, c.FinalSoftcap)
		}
	},
}

// gemmaEmbedScale is √hidden in float32, as llama.cpp multiplies the
// embeddings (Hugging Face rounds it to the activations' dtype first:
// 45.25 rather than 45.2548 for 2048 in bfloat16; kvq's activations are
// float32).
func gemmaEmbedScale(c *Config) float32 { return float32(math.Sqrt(float64(c.Dim))) }

// needSoftcapOps refuses a backend without backend.SoftcapOps.
func needSoftcapOps(be backend.Backend) error {
	if ops, ok := be.(backend.SoftcapOps); ok && ops.SoftcapAttention() {
		return nil
	}
	return fmt.Errorf("%w: the %s backend has no GeGLU, scale or softcapped attention (the Gemma families run on the CPU backend)", ErrUnsupported, be.Name())
}

func gemmaLayer(c *Config, invFreq []float64, li int) LayerGeometry {
	scalar := c.QueryScalar
	if scalar <= 0 {
		scalar = float64(c.HeadDim)
	}
	g := LayerGeometry{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, RopeDim: c.RopeDim, RopeNeoX: c.RopeNeoX,
		InvFreq: invFreq, Scale: float32(1 / math.Sqrt(scalar)), Softcap: c.AttnSoftcap}
	if c.Sliding(li) {
		g.Window = c.SlidingWindow
		if c.RopeLocalTheta > 0 {
			g.InvFreq = InvFreq(&Config{RopeTheta: c.RopeLocalTheta, RopeDim: c.RopeDim}, nil)
		}
	}
	return g
}

func gemmaBlock(s *Step, li int) error {
	be, c, l, nt := s.Ops, s.Config, s.Weights, s.NT
	ops := be.(backend.SoftcapOps)
	be.RMSNorm(s.XN, s.X, nt, l.AttnNorm, c.RMSEps)
	be.MatMul(s.Q, s.XN, nt, l.Wq)
	be.MatMul(s.K, s.XN, nt, l.Wk)
	be.MatMul(s.V, s.XN, nt, l.Wv)
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
	be.RMSNorm(s.O, s.O, nt, l.PostAttnNorm, c.RMSEps)
	be.Add(s.X, s.O, nt*c.Dim)
	be.RMSNorm(s.XN, s.X, nt, l.FFNNorm, c.RMSEps)
	be.MatMul(s.Gate, s.XN, nt, l.Gate)
	be.MatMul(s.Up, s.XN, nt, l.Up)
	if err := s.Check(li); err != nil {
		return err
	}
	ops.GeGLU(s.Gate, s.Up, nt*c.Hidden)
	be.MatMul(s.O, s.Gate, nt, l.Down)
	if err := s.Check(li); err != nil {
		return err
	}
	be.RMSNorm(s.O, s.O, nt, l.PostFFNNorm, c.RMSEps)
	be.Add(s.X, s.O, nt*c.Dim)
	return nil
}

// hfGemma is the part of a Gemma config.json only this family reads.
type hfGemma struct {
	HiddenAct        string   `json:"hidden_act"`
	HiddenActivation string   `json:"hidden_activation"`
	QueryScalar      *float64 `json:"query_pre_attn_scalar"`
	AttnSoftcap      *float64 `json:"attn_logit_softcapping"`
	FinalSoftcap     *float64 `json:"final_logit_softcapping"`
	SlidingWindow    *int     `json:"sliding_window"`
	SlidingPattern   *int     `json:"sliding_window_pattern"`
	LayerTypes       []string `json:"layer_types"`
	RopeLocalBase    *float64 `json:"rope_local_base_freq"`
}

// gemmaHF sets the Gemma fields of c from config.json (path, for
// messages): the activation must be the tanh GELU; the softcaps, the
// query scalar, the sliding layers (layer_types, else every second layer
// for Gemma 2 and five in sliding_window_pattern = 6 for Gemma 3) and
// Gemma 3's local RoPE base.
func gemmaHF(c *Config, path string, text hfconfig.Object) error {
	var g hfGemma
	if err := decodeObject(path, text, &g); err != nil {
		return err
	}
	for _, f := range []struct{ key, v string }{{"hidden_activation", g.HiddenActivation}, {"hidden_act", g.HiddenAct}} {
		switch f.v {
		case "", "gelu_pytorch_tanh", "gelu_tanh", "gelu":
			// "gelu" in Gemma configs means the tanh approximation too
			// (transformers overrides it).
		default:
			return fmt.Errorf("%w: %s: %s %q (kvq runs Gemma with gelu_pytorch_tanh)", ErrUnsupported, path, f.key, f.v)
		}
	}
	pos := func(key string, v *float64) (float64, error) {
		if v == nil {
			return 0, nil
		}
		if !(*v > 0) || math.IsInf(*v, 0) {
			return 0, fmt.Errorf("%w: %s: %s = %v, want a positive number or null", ErrModel, path, key, *v)
		}
		return *v, nil
	}
	var err error
	var x float64
	if x, err = pos("attn_logit_softcapping", g.AttnSoftcap); err != nil {
		return err
	}
	c.AttnSoftcap = float32(x)
	if x, err = pos("final_logit_softcapping", g.FinalSoftcap); err != nil {
		return err
	}
	c.FinalSoftcap = float32(x)
	if c.QueryScalar, err = pos("query_pre_attn_scalar", g.QueryScalar); err != nil {
		return err
	}
	if c.Arch == "gemma3" {
		c.RopeLocalTheta = 10000 // Gemma3TextConfig's default
		if g.RopeLocalBase != nil {
			if c.RopeLocalTheta, err = pos("rope_local_base_freq", g.RopeLocalBase); err != nil {
				return err
			}
		}
	}
	if g.SlidingWindow == nil || *g.SlidingWindow <= 0 {
		c.SlidingWindow = 0
		return nil
	}
	c.SlidingWindow = *g.SlidingWindow
	c.SlidingLayers = make([]bool, c.Layers)
	switch {
	case g.LayerTypes != nil:
		if len(g.LayerTypes) != c.Layers {
			return fmt.Errorf("%w: %s: layer_types has %d entries for %d layers", ErrModel, path, len(g.LayerTypes), c.Layers)
		}
		for i, t := range g.LayerTypes {
			switch t {
			case "sliding_attention":
				c.SlidingLayers[i] = true
			case "full_attention":
			default:
				return fmt.Errorf("%w: %s: layer_types[%d] = %q (kvq runs sliding_attention and full_attention)", ErrUnsupported, path, i, t)
			}
		}
	default:
		p := 2 // Gemma 2: even layers slide
		if c.Arch == "gemma3" {
			p = 6
			if g.SlidingPattern != nil {
				p = *g.SlidingPattern
			}
			if p < 1 {
				return fmt.Errorf("%w: %s: sliding_window_pattern = %d, want at least 1", ErrModel, path, p)
			}
		}
		gemmaPattern(c.SlidingLayers, p)
	}
	return nil
}

// gemmaPattern marks the sliding layers of a pattern of p layers: all but
// the last of every p (p = 1: every layer), as transformers' layer_types
// and llama.cpp's set_swa_pattern do.
func gemmaPattern(sliding []bool, p int) {
	for i := range sliding {
		sliding[i] = p == 1 || (i+1)%p != 0
	}
}

// gemmaGGUF sets the Gemma fields of c from a GGUF header as llama.cpp
// reads them (llama-model.cpp, load_hparams): Gemma 2's window defaults
// to 4096 and its softcaps to 50 and 30; Gemma 3 slides five layers in six
// with a local RoPE base of 10000 and has no softcaps; the attention scale
// is 1/√head_dim, or 1/√(hidden/heads) for the 27B models (46 and 62
// layers), which is their query_pre_attn_scalar (the converter does not
// write it). A {arch}.attention.sliding_window_pattern key (a period, or a
// bool per layer), which kvq estimate reads too, overrides the pattern.
func gemmaGGUF(c *Config, gf *gguf.File, f func(key string, def float64) float64) error {
	_, hasWindow := gf.Get(c.Arch + ".attention.sliding_window")
	p := 6
	if c.Arch == "gemma2" {
		p = 2
		if !hasWindow {
			c.SlidingWindow = 4096
		}
		c.AttnSoftcap = float32(f("attn_logit_softcapping", 50))
		c.FinalSoftcap = float32(f("final_logit_softcapping", 30))
	} else {
		c.RopeLocalTheta = 10000
	}
	if c.SlidingWindow > 0 {
		c.SlidingLayers = make([]bool, max(0, c.Layers))
		gemmaPattern(c.SlidingLayers, p)
		k := c.Arch + ".attention.sliding_window_pattern"
		if v, ok := gf.Get(k); ok {
			if bs, ok := v.Any().([]bool); ok {
				if len(bs) != c.Layers {
					return fmt.Errorf("%w: %s has %d entries for %d layers", ErrModel, k, len(bs), c.Layers)
				}
				copy(c.SlidingLayers, bs)
			} else if n, err := gf.Int(k); err != nil {
				return err
			} else if n > 0 && n <= int64(c.Layers) {
				gemmaPattern(c.SlidingLayers, int(n))
			}
		}
	}
	if c.Arch == "gemma2" && c.Layers == 46 || c.Arch == "gemma3" && c.Layers == 62 {
		if c.Heads > 0 {
			c.QueryScalar = float64(c.Dim / c.Heads)
		}
	}
	return nil
}

// addOneToNorms turns the RMSNorm weights of a Gemma Hugging Face
// checkpoint (w in x·(1+w)) into the factors (1+w), in float32 as
// transformers computes them, into new slices (the loaded ones may map the
// file).
func (m *Model) addOneToNorms() {
	plus := func(v []float32) []float32 {
		if v == nil {
			return nil
		}
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = 1 + x
		}
		return out
	}
	m.Norm = plus(m.Norm)
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, v := range []*[]float32{&l.AttnNorm, &l.FFNNorm, &l.PostAttnNorm, &l.PostFFNNorm, &l.QNorm, &l.KNorm} {
			*v = plus(*v)
		}
	}
}
