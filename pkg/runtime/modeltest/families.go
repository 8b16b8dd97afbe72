package modeltest

import (
	"math"
	"math/rand/v2"

	"github.com/kvqlabs/kvq/pkg/gguf"
)

// The OLMo 2 and Phi-3 checkpoints: their tensors in Hugging Face naming,
// the GGUF names llama.cpp gives them, and their config.json and GGUF
// metadata.

// ggufArchName overrides ggufName for one architecture.
var ggufArchName = map[string]map[string]string{
	"olmo2": {
		"post_attention_layernorm.weight":   "post_attention_norm.weight",
		"post_feedforward_layernorm.weight": "post_ffw_norm.weight",
	},
	"phi3": {
		"self_attn.qkv_proj.weight":       "attn_qkv.weight",
		"mlp.gate_up_proj.weight":         "ffn_up.weight",
		"input_layernorm.weight":          "attn_norm.weight",
		"post_attention_layernorm.weight": "ffn_norm.weight",
	},
}

// ropeDim is the number of rotated dimensions per head.
func (s *Spec) ropeDim() int {
	if s.RopeDim > 0 {
		return s.RopeDim
	}
	return s.HeadDim
}

// olmo2Layer adds an OLMo 2 layer: no norms before the attention and the
// MLP, one after each, and q/k norms over the whole projection.
func olmo2Layer(p string, s Spec, mat func(string, int, int), vec func(string, int, float64, float64)) {
	qd, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	mat(p+"self_attn.q_proj.weight", qd, s.Dim)
	mat(p+"self_attn.k_proj.weight", kvd, s.Dim)
	mat(p+"self_attn.v_proj.weight", kvd, s.Dim)
	mat(p+"self_attn.o_proj.weight", s.Dim, qd)
	vec(p+"self_attn.q_norm.weight", qd, 1, 0.1)
	vec(p+"self_attn.k_norm.weight", kvd, 1, 0.1)
	vec(p+"post_attention_layernorm.weight", s.Dim, 1, 0.1)
	mat(p+"mlp.gate_proj.weight", s.Hidden, s.Dim)
	mat(p+"mlp.up_proj.weight", s.Hidden, s.Dim)
	mat(p+"mlp.down_proj.weight", s.Dim, s.Hidden)
	vec(p+"post_feedforward_layernorm.weight", s.Dim, 1, 0.1)
}

// phi3Layer adds a Phi-3 layer: the Llama block with q, k and v in one
// matrix (qkv_proj) and gate and up in another (gate_up_proj), as Phi-3
// checkpoints store them.
func phi3Layer(p string, s Spec, mat func(string, int, int), vec func(string, int, float64, float64)) {
	qd, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	vec(p+"input_layernorm.weight", s.Dim, 1, 0.1)
	mat(p+"self_attn.qkv_proj.weight", qd+2*kvd, s.Dim)
	mat(p+"self_attn.o_proj.weight", s.Dim, qd)
	vec(p+"post_attention_layernorm.weight", s.Dim, 1, 0.1)
	mat(p+"mlp.gate_up_proj.weight", 2*s.Hidden, s.Dim)
	mat(p+"mlp.down_proj.weight", s.Dim, s.Hidden)
}

// LongRoPEFactors are the short and long factors of a phi3 spec with
// OriginalContext set (RopeDim/2 each, float32 values, as GGUF stores
// them): short ones near 1, long ones rising from 1 to about 8.
func LongRoPEFactors(s Spec) (short, long []float64) {
	s.defaults()
	rng := rand.New(rand.NewPCG(s.Seed, 91))
	n := s.ropeDim() / 2
	for i := range n {
		short = append(short, float64(float32(1+0.5*rng.Float64())))
		long = append(long, float64(float32(1+7*float64(i)/float64(max(1, n-1))+0.2*rng.Float64())))
	}
	return short, long
}

// phi3AttnFactor is LongRoPE's attention factor as Hugging Face and
// llama.cpp's converter compute it.
func phi3AttnFactor(s Spec) float64 {
	scale := float64(s.Context) / float64(s.OriginalContext)
	if scale <= 1 {
		return 1
	}
	return math.Sqrt(1 + math.Log(scale)/math.Log(float64(s.OriginalContext)))
}

func phi3Config(cfg map[string]any, s Spec) {
	delete(cfg, "head_dim") // Phi3Config derives it from hidden_size
	if s.SlidingWindow > 0 {
		cfg["sliding_window"] = s.SlidingWindow
	}
	if s.RopeDim > 0 && s.RopeDim != s.HeadDim {
		cfg["partial_rotary_factor"] = float64(s.RopeDim) / float64(s.HeadDim)
	}
	if s.OriginalContext > 0 {
		short, long := LongRoPEFactors(s)
		cfg["original_max_position_embeddings"] = s.OriginalContext
		cfg["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": short, "long_factor": long}
	}
}

// phi3GGUF adds the metadata and the tensors llama.cpp's converter writes
// for Phi-3 (rope_factors_long/short and the attention factor).
func phi3GGUF(g *gguf.Writer, s Spec) error {
	g.AddUint32("phi3.attention.sliding_window", uint32(s.SlidingWindow))
	if s.OriginalContext <= 0 {
		return nil
	}
	g.AddUint32("phi3.rope.scaling.original_context_length", uint32(s.OriginalContext))
	g.AddFloat32("phi3.rope.scaling.attn_factor", float32(phi3AttnFactor(s)))
	short, long := LongRoPEFactors(s)
	for _, f := range []struct {
		name string
		v    []float64
	}{{"rope_factors_long.weight", long}, {"rope_factors_short.weight", short}} {
		v := make([]float32, len(f.v))
		for i, x := range f.v {
			v[i] = float32(x)
		}
		if err := g.AddTensor(f.name, gguf.F32, []uint64{uint64(len(v))}, encode(v, "F32")); err != nil {
			return err
		}
	}
	return nil
}
