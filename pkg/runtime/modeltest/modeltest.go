// Package modeltest writes tiny random checkpoints for tests: the same
// weights as a Hugging Face directory (config.json, safetensors, tokenizer
// files), as GGUF, and, for Llama, as a llama2.c checkpoint — so that tests
// can check that every loader produces the same model.
package modeltest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/safetensors"
	"github.com/kvqlabs/kvq/pkg/tensor"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// Spec describes a tiny model. Zero fields get small defaults.
type Spec struct {
	Arch          string // "llama", "mistral", "qwen2", "qwen3", "olmo2", "phi3"
	Dim, Hidden   int
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int // 0: Dim/Heads
	Context       int
	SlidingWindow int    // mistral, phi3
	Tied          bool   // tie the output head to the embedding
	DType         string // "F32", "F16", "BF16" (safetensors spelling); WriteGGUF also "Q8_0", the block types ("Q4_K", "IQ4_XS", ...) and llama-quantize's "Q4_K_M" and "Q5_K_M" mixes
	RopeTheta     float64
	Seed          uint64
	// RopeDim rotates that many dimensions of each head (phi3's
	// partial_rotary_factor RopeDim/HeadDim); 0: all.
	RopeDim int
	// OriginalContext > 0 gives phi3 LongRoPE scaling: rope_scaling
	// "longrope" with random short and long factors and
	// original_max_position_embeddings OriginalContext (below Context).
	OriginalContext int
	// GGUFPre is the GGUF tokenizer.ggml.pre ("default" when empty).
	GGUFPre string
	// NoBOS writes a tokenizer that adds no BOS token (add_bos_token
	// false), so that an empty text encodes to no tokens at all.
	NoBOS bool
	// Mixture of experts ("mixtral", "qwen3moe"): Experts experts of
	// ExpertHidden (0: Hidden) per expert layer, ExpertsUsed per token;
	// RouterScale multiplies the router's weights (0: 1), so that a
	// token's k-th and (k+1)-th logits are far apart. NormTopK, MLPOnly
	// and SparseStep are Qwen3-MoE's norm_topk_prob, mlp_only_layers and
	// decoder_sparse_step (0: 1); the GGUF file's dense layers have no
	// router.
	Experts, ExpertsUsed, ExpertHidden int
	RouterScale                        float64
	NormTopK                           bool
	MLPOnly                            []int
	SparseStep                         int
	// Gemma ("gemma2", "gemma3"): the softcaps (gemma2; 0: 50 and 30, as
	// the released models), the linear RoPE scaling of the global layers
	// and the RoPE base of the sliding ones (gemma3; 0: none and 10000).
	// SlidingWindow is the window of the sliding layers (0: 4096 for
	// gemma2, 1024 for gemma3); Gemma 2 slides its even layers, Gemma 3
	// five layers in six. The output head is always tied.
	AttnSoftcap, FinalSoftcap float64
	RopeScaling               float64
	RopeLocalTheta            float64
	// SlidingPattern (gemma3) is written as sliding_window_pattern (HF)
	// and attention.sliding_window_pattern (GGUF); 0: 6, not written to
	// the GGUF file.
	SlidingPattern int
}

// moeLayer reports whether layer li of an MoE spec has experts.
func (s *Spec) moeLayer(li int) bool {
	if s.Experts == 0 {
		return false
	}
	for _, d := range s.MLPOnly {
		if d == li {
			return false
		}
	}
	step := max(1, s.SparseStep)
	return (li+1)%step == 0
}

// expertNames are an MoE architecture's Hugging Face names: the router,
// and the pattern of an expert's gate, up and down matrices.
func expertNames(arch string) (router string, gate, up, down string) {
	if arch == "mixtral" {
		return "block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight", "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight"
	}
	return "mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight", "mlp.experts.%d.down_proj.weight"
}

// gemma reports whether the spec is of the Gemma families.
func (s *Spec) gemma() bool { return s.Arch == "gemma2" || s.Arch == "gemma3" }

func (s *Spec) defaults() {
	if s.Arch == "" {
		s.Arch = "llama"
	}
	if s.Dim == 0 {
		s.Dim = 64
	}
	if s.Hidden == 0 {
		s.Hidden = 96
	}
	if s.Layers == 0 {
		s.Layers = 2
	}
	if s.Heads == 0 {
		s.Heads = 4
	}
	if s.KVHeads == 0 {
		s.KVHeads = 2
	}
	if s.HeadDim == 0 {
		s.HeadDim = s.Dim / s.Heads
	}
	if s.Context == 0 {
		s.Context = 512
	}
	if s.DType == "" {
		s.DType = "F32"
	}
	if s.RopeTheta == 0 {
		s.RopeTheta = 10000
	}
	if s.Experts > 0 && s.ExpertHidden == 0 {
		s.ExpertHidden = s.Hidden
	}
	if s.RouterScale == 0 {
		s.RouterScale = 1
	}
	if s.gemma() {
		s.Tied = true
		if s.SlidingWindow == 0 {
			s.SlidingWindow = map[string]int{"gemma2": 4096, "gemma3": 1024}[s.Arch]
		}
		if s.Arch == "gemma2" && s.AttnSoftcap == 0 {
			s.AttnSoftcap = 50
		}
		if s.Arch == "gemma2" && s.FinalSoftcap == 0 {
			s.FinalSoftcap = 30
		}
		if s.Arch == "gemma3" && s.RopeLocalTheta == 0 {
			s.RopeLocalTheta = 10000
		}
	}
}

// Vocab is the size of the test vocabulary: 256 byte tokens, the merges
// below, and two specials.
func Vocab() int { return len(vocabTokens()) }

var merges = [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"o", "n"}, {"Ġ", "w"}}

const (
	bosToken = "<|begin_of_text|>"
	eosToken = "<|end_of_text|>"
)

func vocabTokens() []string {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, tokenizer.ByteLevelToken(byte(b)))
	}
	for _, m := range merges {
		toks = append(toks, m[0]+m[1])
	}
	return append(toks, bosToken, eosToken)
}

// weights holds every tensor in HF naming and layout, as float32.
type weights struct {
	names []string
	shape map[string][]int
	data  map[string][]float32
}

func (w *weights) add(name string, shape []int, v []float32) {
	w.names = append(w.names, name)
	w.shape[name] = shape
	w.data[name] = v
}

// drop forgets the float32 values of name once they are encoded, and of
// the other experts' matrices stacked with it (expert 0's name), so that
// writing a large model holds each tensor's float32 values only until it
// is encoded.
func (w *weights) drop(name string) {
	delete(w.data, name)
	for _, k := range []struct{ zero, pat string }{
		{".mlp.experts.0.", ".mlp.experts.%d."}, {".block_sparse_moe.experts.0.", ".block_sparse_moe.experts.%d."},
	} {
		i := strings.Index(name, k.zero)
		if i < 0 {
			continue
		}
		for e := 1; ; e++ {
			other := name[:i] + fmt.Sprintf(k.pat, e) + name[i+len(k.zero):]
			if _, ok := w.data[other]; !ok {
				break
			}
			delete(w.data, other)
		}
	}
}

// round makes the float32 values exactly representable in dtype.
func round(v []float32, dtype string) {
	for i, x := range v {
		switch dtype {
		case "F16":
			v[i] = simd.F16ToF32Scalar(simd.F32ToF16Scalar(x))
		case "BF16":
			v[i] = simd.BF16ToF32Scalar(simd.F32ToBF16Scalar(x))
		}
	}
}

func makeWeights(s Spec) *weights {
	rng := rand.New(rand.NewPCG(s.Seed, 77))
	w := &weights{shape: map[string][]int{}, data: map[string][]float32{}}
	matScaled := func(name string, rows, cols int, scale float64) {
		v := make([]float32, rows*cols)
		std := scale / math.Sqrt(float64(cols))
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		round(v, s.DType)
		w.add(name, []int{rows, cols}, v)
	}
	mat := func(name string, rows, cols int) { matScaled(name, rows, cols, 1) }
	vec := func(name string, n int, mean, std float64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		round(v, s.DType)
		w.add(name, []int{n}, v)
	}
	V := Vocab()
	qd, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	mat("model.embed_tokens.weight", V, s.Dim)
	if s.gemma() {
		// Gemma's norms are stored as w in x·(1+w).
		for i := 0; i < s.Layers; i++ {
			p := fmt.Sprintf("model.layers.%d.", i)
			vec(p+"input_layernorm.weight", s.Dim, 0, 0.1)
			mat(p+"self_attn.q_proj.weight", qd, s.Dim)
			mat(p+"self_attn.k_proj.weight", kvd, s.Dim)
			mat(p+"self_attn.v_proj.weight", kvd, s.Dim)
			if s.Arch == "gemma3" {
				vec(p+"self_attn.q_norm.weight", s.HeadDim, 0, 0.1)
				vec(p+"self_attn.k_norm.weight", s.HeadDim, 0, 0.1)
			}
			mat(p+"self_attn.o_proj.weight", s.Dim, qd)
			vec(p+"post_attention_layernorm.weight", s.Dim, 0, 0.1)
			vec(p+"pre_feedforward_layernorm.weight", s.Dim, 0, 0.1)
			mat(p+"mlp.gate_proj.weight", s.Hidden, s.Dim)
			mat(p+"mlp.up_proj.weight", s.Hidden, s.Dim)
			mat(p+"mlp.down_proj.weight", s.Dim, s.Hidden)
			vec(p+"post_feedforward_layernorm.weight", s.Dim, 0, 0.1)
		}
		vec("model.norm.weight", s.Dim, 0, 0.1)
		return w
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		switch s.Arch {
		case "olmo2":
			olmo2Layer(p, s, mat, vec)
			continue
		case "phi3":
			phi3Layer(p, s, mat, vec)
			continue
		}
		vec(p+"input_layernorm.weight", s.Dim, 1, 0.1)
		mat(p+"self_attn.q_proj.weight", qd, s.Dim)
		mat(p+"self_attn.k_proj.weight", kvd, s.Dim)
		mat(p+"self_attn.v_proj.weight", kvd, s.Dim)
		if s.Arch == "qwen2" {
			vec(p+"self_attn.q_proj.bias", qd, 0, 0.3)
			vec(p+"self_attn.k_proj.bias", kvd, 0, 0.3)
			vec(p+"self_attn.v_proj.bias", kvd, 0, 0.3)
		}
		if s.Arch == "qwen3" || s.Arch == "qwen3moe" {
			vec(p+"self_attn.q_norm.weight", s.HeadDim, 1, 0.1)
			vec(p+"self_attn.k_norm.weight", s.HeadDim, 1, 0.1)
		}
		mat(p+"self_attn.o_proj.weight", s.Dim, qd)
		vec(p+"post_attention_layernorm.weight", s.Dim, 1, 0.1)
		if s.moeLayer(i) {
			router, gate, up, down := expertNames(s.Arch)
			matScaled(p+router, s.Experts, s.Dim, s.RouterScale)
			for e := 0; e < s.Experts; e++ {
				mat(p+fmt.Sprintf(gate, e), s.ExpertHidden, s.Dim)
				mat(p+fmt.Sprintf(up, e), s.ExpertHidden, s.Dim)
				mat(p+fmt.Sprintf(down, e), s.Dim, s.ExpertHidden)
			}
			continue
		}
		mat(p+"mlp.gate_proj.weight", s.Hidden, s.Dim)
		mat(p+"mlp.up_proj.weight", s.Hidden, s.Dim)
		mat(p+"mlp.down_proj.weight", s.Dim, s.Hidden)
	}
	vec("model.norm.weight", s.Dim, 1, 0.1)
	if !s.Tied {
		mat("lm_head.weight", V, s.Dim)
	}
	return w
}

func encode(v []float32, dtype string) []byte {
	switch dtype {
	case "F16", "BF16":
		b := make([]byte, 2*len(v))
		for i, x := range v {
			h := simd.F32ToF16Scalar(x)
			if dtype == "BF16" {
				h = simd.F32ToBF16Scalar(x)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// HFOptions control WriteHF.
type HFOptions struct {
	Shards int // >1 writes model-0000k-of-0000n.safetensors and an index
	// Multimodal (gemma3) writes the checkpoint as the multimodal Gemma 3
	// releases are: Gemma3ForConditionalGeneration, the text model's
	// config in text_config without the fields that have
	// Gemma3TextConfig's defaults, its tensors under
	// language_model.model. (no vision tower).
	Multimodal bool
}

var hfArch = map[string]string{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
	"olmo2": "Olmo2ForCausalLM", "phi3": "Phi3ForCausalLM", "mixtral": "MixtralForCausalLM", "qwen3moe": "Qwen3MoeForCausalLM",
	"gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}

// WriteHF writes the model as a Hugging Face directory.
func WriteHF(dir string, s Spec, opts HFOptions) error {
	s.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w := makeWeights(s)
	V := Vocab()
	cfg := map[string]any{
		"architectures": []string{hfArch[s.Arch]}, "model_type": s.Arch,
		"hidden_size": s.Dim, "intermediate_size": s.Hidden, "num_hidden_layers": s.Layers,
		"num_attention_heads": s.Heads, "num_key_value_heads": s.KVHeads, "head_dim": s.HeadDim,
		"vocab_size": V, "max_position_embeddings": s.Context, "rms_norm_eps": 1e-5,
		"rope_theta": s.RopeTheta, "tie_word_embeddings": s.Tied, "torch_dtype": map[string]string{"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[s.DType],
		"bos_token_id": V - 2, "eos_token_id": V - 1,
	}
	if (s.Arch == "mistral" || s.Arch == "mixtral") && s.SlidingWindow > 0 {
		cfg["sliding_window"] = s.SlidingWindow
	}
	switch s.Arch {
	case "mixtral":
		cfg["num_local_experts"], cfg["num_experts_per_tok"] = s.Experts, s.ExpertsUsed
		cfg["intermediate_size"] = s.ExpertHidden
	case "qwen3moe":
		cfg["model_type"] = "qwen3_moe"
		cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"] = s.Experts, s.ExpertsUsed, s.ExpertHidden
		cfg["norm_topk_prob"], cfg["decoder_sparse_step"] = s.NormTopK, max(1, s.SparseStep)
		cfg["mlp_only_layers"] = append([]int{}, s.MLPOnly...)
	}
	if s.Arch == "qwen2" {
		cfg["sliding_window"] = 4 // ignored: use_sliding_window is false
		cfg["use_sliding_window"] = false
	}
	if s.Arch == "phi3" {
		phi3Config(cfg, s)
	}
	if s.gemma() {
		cfg["rms_norm_eps"] = 1e-6
		cfg["hidden_activation"] = "gelu_pytorch_tanh"
		cfg["hidden_act"] = "gelu_pytorch_tanh"
		cfg["query_pre_attn_scalar"] = s.HeadDim
		cfg["sliding_window"] = s.SlidingWindow
		cfg["attn_logit_softcapping"] = nil
		cfg["final_logit_softcapping"] = nil
		if s.Arch == "gemma2" {
			cfg["attn_logit_softcapping"] = s.AttnSoftcap
			cfg["final_logit_softcapping"] = s.FinalSoftcap
		} else {
			pattern := 6
			if s.SlidingPattern > 0 {
				pattern = s.SlidingPattern
			}
			cfg["sliding_window_pattern"] = pattern
			cfg["rope_local_base_freq"] = s.RopeLocalTheta
			if s.RopeScaling > 0 {
				cfg["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": s.RopeScaling}
			}
		}
	}
	if opts.Multimodal {
		if s.Arch != "gemma3" {
			return fmt.Errorf("modeltest: a multimodal checkpoint is gemma3's")
		}
		text := map[string]any{"model_type": "gemma3_text"}
		for k, v := range cfg {
			switch k {
			case "architectures", "model_type", "torch_dtype", "bos_token_id", "eos_token_id":
			case "sliding_window_pattern", "rope_local_base_freq", "hidden_activation":
				// Gemma3TextConfig's defaults (6, 10000, the tanh GELU):
				// not written.
			default:
				text[k] = v
			}
		}
		cfg = map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}, "model_type": "gemma3",
			"torch_dtype": cfg["torch_dtype"], "text_config": text, "vision_config": map[string]any{"model_type": "siglip_vision_model"},
			"bos_token_id": V - 2, "eos_token_id": V - 1}
		renamed := &weights{shape: map[string][]int{}, data: map[string][]float32{}}
		for _, n := range w.names {
			nn := n
			if rest, ok := strings.CutPrefix(n, "model."); ok {
				nn = "language_model.model." + rest
			}
			renamed.add(nn, w.shape[n], w.data[n])
		}
		w = renamed
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), map[string]any{"bos_token_id": V - 2, "eos_token_id": []int{V - 1}}); err != nil {
		return err
	}
	if err := writeTokenizerJSON(dir, !s.NoBOS); err != nil {
		return err
	}
	n := max(1, opts.Shards)
	writers := make([]*safetensors.Writer, n)
	for i := range writers {
		writers[i] = safetensors.NewWriter()
	}
	names := make([]string, n)
	for i := range names {
		names[i] = "model.safetensors"
		if n > 1 {
			names[i] = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		}
	}
	weightMap := map[string]string{}
	for i, name := range w.names {
		k := i * n / len(w.names)
		shape := make([]int64, len(w.shape[name]))
		for j, d := range w.shape[name] {
			shape[j] = int64(d)
		}
		if err := writers[k].Add(name, safetensors.DType(s.DType), shape, encode(w.data[name], s.DType)); err != nil {
			return err
		}
		weightMap[name] = names[k]
	}
	for i, wr := range writers {
		if err := writeTo(filepath.Join(dir, names[i]), wr); err != nil {
			return err
		}
	}
	if n > 1 {
		return writeJSON(filepath.Join(dir, "model.safetensors.index.json"), map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	}
	return nil
}

func writeTo(path string, wr interface {
	WriteTo(w io.Writer) (int64, error)
}) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := wr.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func writeTokenizerJSON(dir string, addBOS bool) error {
	toks := vocabTokens()
	vocab := map[string]int{}
	for i, t := range toks[:len(toks)-2] {
		vocab[t] = i
	}
	var ms []string
	for _, m := range merges {
		ms = append(ms, m[0]+" "+m[1])
	}
	V := len(toks)
	tj := map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": V - 2, "content": bosToken, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": V - 1, "content": eosToken, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": ms},
	}
	if err := writeJSON(filepath.Join(dir, "tokenizer.json"), tj); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "tokenizer_config.json"), map[string]any{
		"bos_token": bosToken, "eos_token": eosToken, "add_bos_token": addBOS, "model_max_length": 512,
		"chat_template": ChatTemplate,
	})
}

// ChatTemplate is the test models' chat template.
const ChatTemplate = "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | trim }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"

// permuteQK reorders the rows of each head from Hugging Face's half-split
// (NeoX) RoPE layout to the interleaved layout GGUF llama and llama2.c use:
// new row 2i of a head is old row i, new row 2i+1 is old row i+hd/2.
func permuteQK(v []float32, heads, hd, cols int) []float32 {
	out := make([]float32, len(v))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			copy(out[(h*hd+2*i)*cols:(h*hd+2*i+1)*cols], v[(h*hd+i)*cols:(h*hd+i+1)*cols])
			copy(out[(h*hd+2*i+1)*cols:(h*hd+2*i+2)*cols], v[(h*hd+i+hd/2)*cols:(h*hd+i+hd/2+1)*cols])
		}
	}
	return out
}

var ggufName = map[string]string{
	"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
	"self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
	"self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
	"self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
	"self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
	"mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}

// ggufGemmaName maps Gemma's layer tensors: its post_attention_layernorm
// is the norm after attention, pre_feedforward_layernorm the MLP's.
var ggufGemmaName = map[string]string{
	"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
	"self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
	"self_attn.o_proj.weight": "attn_output.weight",
	"self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
	"post_attention_layernorm.weight": "post_attention_norm.weight", "pre_feedforward_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
	"post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}

// WriteGGUF writes the model as a GGUF file, converting as llama.cpp does
// (Q/K rows permuted for llama and mistral; norms in F32).
func WriteGGUF(path string, s Spec) error {
	s.defaults()
	w := makeWeights(s)
	g := gguf.NewWriter(3)
	arch := s.Arch
	if arch == "mixtral" {
		arch = "llama" // as llama.cpp's converter writes Mixtral
	}
	g.AddString("general.architecture", arch)
	g.AddString("general.name", "kvq-modeltest")
	g.AddUint32(arch+".block_count", uint32(s.Layers))
	g.AddUint32(arch+".context_length", uint32(s.Context))
	g.AddUint32(arch+".embedding_length", uint32(s.Dim))
	if s.Arch == "mixtral" {
		g.AddUint32(arch+".feed_forward_length", uint32(s.ExpertHidden))
	} else {
		g.AddUint32(arch+".feed_forward_length", uint32(s.Hidden))
	}
	if s.Experts > 0 {
		g.AddUint32(arch+".expert_count", uint32(s.Experts))
		g.AddUint32(arch+".expert_used_count", uint32(s.ExpertsUsed))
		if s.Arch == "qwen3moe" {
			g.AddUint32(arch+".expert_feed_forward_length", uint32(s.ExpertHidden))
			g.AddBool(arch+".expert_weights_norm", s.NormTopK)
		}
	}
	g.AddUint32(arch+".attention.head_count", uint32(s.Heads))
	g.AddUint32(arch+".attention.head_count_kv", uint32(s.KVHeads))
	g.AddUint32(arch+".attention.key_length", uint32(s.HeadDim))
	g.AddUint32(arch+".attention.value_length", uint32(s.HeadDim))
	g.AddUint32(arch+".rope.dimension_count", uint32(s.ropeDim()))
	eps := float32(1e-5)
	if s.gemma() {
		eps = 1e-6
		g.AddUint32(arch+".attention.sliding_window", uint32(s.SlidingWindow))
		if arch == "gemma2" {
			g.AddFloat32(arch+".attn_logit_softcapping", float32(s.AttnSoftcap))
			g.AddFloat32(arch+".final_logit_softcapping", float32(s.FinalSoftcap))
		}
		if arch == "gemma3" && s.SlidingPattern > 0 {
			g.AddUint32(arch+".attention.sliding_window_pattern", uint32(s.SlidingPattern))
		}
		if s.RopeScaling > 0 {
			g.AddString(arch+".rope.scaling.type", "linear")
			g.AddFloat32(arch+".rope.scaling.factor", float32(s.RopeScaling))
		}
	}
	g.AddFloat32(arch+".attention.layer_norm_rms_epsilon", eps)
	g.AddFloat32(arch+".rope.freq_base", float32(s.RopeTheta))
	if (arch == "mistral" || s.Arch == "mixtral") && s.SlidingWindow > 0 {
		g.AddUint32(arch+".attention.sliding_window", uint32(s.SlidingWindow))
	}
	if arch == "phi3" {
		if err := phi3GGUF(g, s); err != nil {
			return err
		}
	}
	toks := vocabTokens()
	V := len(toks)
	g.AddString("tokenizer.ggml.model", "gpt2")
	pre := s.GGUFPre
	if pre == "" {
		pre = "default"
	}
	g.AddString("tokenizer.ggml.pre", pre)
	g.AddStrings("tokenizer.ggml.tokens", toks)
	types := make([]int32, V)
	for i := range types {
		types[i] = 1
	}
	types[V-2], types[V-1] = 3, 3
	g.AddInt32s("tokenizer.ggml.token_type", types)
	var ms []string
	for _, m := range merges {
		ms = append(ms, m[0]+" "+m[1])
	}
	g.AddStrings("tokenizer.ggml.merges", ms)
	g.AddUint32("tokenizer.ggml.bos_token_id", uint32(V-2))
	g.AddUint32("tokenizer.ggml.eos_token_id", uint32(V-1))
	g.AddBool("tokenizer.ggml.add_bos_token", !s.NoBOS)
	g.AddString("tokenizer.chat_template", ChatTemplate)

	typ, ok := map[string]gguf.Type{"F32": gguf.F32, "F16": gguf.F16, "BF16": gguf.BF16, "Q8_0": gguf.Q80}[s.DType]
	mix := s.DType == "Q4_K_M" || s.DType == "Q5_K_M"
	switch {
	case mix:
		typ, ok = gguf.Q4K, true
		if s.DType == "Q5_K_M" {
			typ = gguf.Q5K
		}
	case !ok:
		typ, ok = ggufBlockType(s.DType)
	}
	if !ok {
		return fmt.Errorf("modeltest: GGUF dtype %q (F32, F16, BF16, Q8_0 or a block type such as Q4_K)", s.DType)
	}
	permute := arch == "llama" || arch == "mistral" // and Mixtral, written as llama
	for _, name := range w.names {
		v, shape := w.data[name], w.shape[name]
		var gname string
		switch name {
		case "model.embed_tokens.weight":
			gname = "token_embd.weight"
		case "model.norm.weight":
			gname = "output_norm.weight"
		case "lm_head.weight":
			gname = "output.weight"
		default:
			var layer int
			var rest string
			if _, err := fmt.Sscanf(name, "model.layers.%d.", &layer); err != nil {
				return fmt.Errorf("modeltest: unexpected tensor %s", name)
			}
			rest = name[len(fmt.Sprintf("model.layers.%d.", layer)):]
			gn, ok := ggufArchName[arch][rest]
			if !ok {
				gn = ggufName[rest]
			}
			gname = fmt.Sprintf("blk.%d.%s", layer, gn)
			if s.gemma() {
				gname = fmt.Sprintf("blk.%d.%s", layer, ggufGemmaName[rest])
			}
			if s.Experts > 0 {
				stacked, gn, skip := stackExperts(w, s, layer, rest)
				if skip {
					continue
				}
				if gn != "" {
					v, gname = stacked, fmt.Sprintf("blk.%d.%s", layer, gn)
				}
				if gn != "" && gn != "ffn_gate_inp.weight" {
					shape = []int{s.Experts, shape[0], shape[1]}
				}
			}
			if permute && rest == "self_attn.q_proj.weight" {
				v = permuteQK(v, s.Heads, s.HeadDim, s.Dim)
			}
			if permute && rest == "self_attn.k_proj.weight" {
				v = permuteQK(v, s.KVHeads, s.HeadDim, s.Dim)
			}
		}
		if s.gemma() && strings.HasSuffix(name, "norm.weight") {
			// llama.cpp's converter stores Gemma's norms as 1+w.
			v = slices.Clone(v)
			for i := range v {
				v[i]++
			}
		}
		t := typ
		if mix && len(shape) == 2 {
			t = kMixType(gname, typ, shape[1], s.Layers, s.Tied)
		}
		if len(shape) == 1 {
			t = gguf.F32 // llama.cpp keeps norms and biases in F32
		}
		dims := make([]uint64, len(shape))
		for i, d := range shape {
			dims[len(shape)-1-i] = uint64(d) // GGUF lists the row length first
		}
		var data []byte
		if t.BlockSize() > 1 && (t != gguf.Q80 || mix) {
			// the other block types (and a mix's q8_0): quantized as
			// llama-quantize does
			if err := g.AddTensorF32(gname, t, dims, v); err != nil {
				return fmt.Errorf("modeltest: %w", err)
			}
			w.drop(name)
			continue
		}
		if t == gguf.Q80 {
			cols := shape[len(shape)-1]
			if cols%tensor.Q80BlockSize != 0 {
				return fmt.Errorf("modeltest: %s: %d columns is not a multiple of %d for Q8_0", name, cols, tensor.Q80BlockSize)
			}
			data = WeightFromF32(gname, tensor.Q80, len(v)/cols, cols, v).Raw
		} else {
			data = encode(v, map[gguf.Type]string{gguf.F32: "F32", gguf.F16: "F16", gguf.BF16: "BF16"}[t])
		}
		if err := g.AddTensor(gname, t, dims, data); err != nil {
			return err
		}
		w.drop(name)
	}
	return writeTo(path, g)
}

// kMixType is the type llama-quantize's Q4_K_M and Q5_K_M (base q4_K or
// q5_K) give the matrix gname of a Llama-family model of the given layers
// with cols columns, when it runs without an importance matrix
// (llama_tensor_get_type, September 2025): the output head (the embedding
// when tied) q6_K, attn_v and ffn_down q6_K in the layers use_more_bits
// picks (the first and last eighth and every third between), the rest the
// base; then a type whose block does not divide cols falls back (q4_K to
// q5_0, q5_K to q5_1, q6_K to q8_0, and to f16 when that does not divide
// either; the head to q8_0 directly).
func kMixType(gname string, base gguf.Type, cols, layers int, tied bool) gguf.Type {
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	t := base
	var layer int
	_, err := fmt.Sscanf(gname, "blk.%d.", &layer)
	switch {
	case gname == "output.weight" || tied && gname == "token_embd.weight":
		if cols%256 != 0 {
			return gguf.Q80
		}
		return gguf.Q6K
	case err == nil && (strings.HasSuffix(gname, ".attn_v.weight") || strings.HasSuffix(gname, ".ffn_down.weight")):
		if moreBits(layer, layers) {
			t = gguf.Q6K
		}
	}
	if cols%t.BlockSize() != 0 {
		t = map[gguf.Type]gguf.Type{gguf.Q4K: gguf.Q50, gguf.Q5K: gguf.Q51, gguf.Q6K: gguf.Q80}[t]
		if cols%t.BlockSize() != 0 {
			t = gguf.F16
		}
	}
	return t
}

// ggufBlockType returns the GGML block type named name in llama.cpp's
// spelling ("Q4_K", "IQ4_NL", "MXFP4"), if pkg/gguf quantizes it.
func ggufBlockType(name string) (gguf.Type, bool) {
	for t := gguf.Type(0); t < 64; t++ {
		if t.Decodable() && t.BlockSize() > 1 && strings.EqualFold(t.String(), name) {
			return t, true
		}
	}
	return 0, false
}

// WriteLlama2C writes a llama model as a llama2.c checkpoint (F32, legacy
// version 0) plus a tokenizer file; spec must be a plain llama with head_dim
// = dim/heads, RoPE theta 10000 and RMS eps 1e-5.
func WriteLlama2C(modelPath, tokPath string, s Spec) error {
	s.defaults()
	if s.Arch != "llama" || s.HeadDim != s.Dim/s.Heads || s.RopeTheta != 10000 {
		return fmt.Errorf("modeltest: llama2.c holds only plain llama models")
	}
	w := makeWeights(s)
	V := Vocab()
	var out []float32
	put := func(v []float32) { out = append(out, v...) }
	layerCat := func(suffix string, permuteHeads int) {
		for i := 0; i < s.Layers; i++ {
			v := w.data[fmt.Sprintf("model.layers.%d.%s", i, suffix)]
			if permuteHeads > 0 {
				v = permuteQK(v, permuteHeads, s.HeadDim, s.Dim)
			}
			put(v)
		}
	}
	put(w.data["model.embed_tokens.weight"])
	layerCat("input_layernorm.weight", 0)
	layerCat("self_attn.q_proj.weight", s.Heads)
	layerCat("self_attn.k_proj.weight", s.KVHeads)
	layerCat("self_attn.v_proj.weight", 0)
	layerCat("self_attn.o_proj.weight", 0)
	layerCat("post_attention_layernorm.weight", 0)
	layerCat("mlp.gate_proj.weight", 0)
	layerCat("mlp.down_proj.weight", 0)
	layerCat("mlp.up_proj.weight", 0)
	put(w.data["model.norm.weight"])
	put(make([]float32, s.Context*s.HeadDim)) // legacy freq_cis tables
	vocab := int32(V)
	if !s.Tied {
		put(w.data["lm_head.weight"])
		vocab = -vocab
	}
	hdr := []int32{int32(s.Dim), int32(s.Hidden), int32(s.Layers), int32(s.Heads), int32(s.KVHeads), vocab, int32(s.Context)}
	buf := make([]byte, 0, 28+4*len(out))
	for _, x := range hdr {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	buf = append(buf, encode(out, "F32")...)
	if err := os.WriteFile(modelPath, buf, 0o644); err != nil {
		return err
	}
	// Tokenizer: <unk>, <s>, </s>, 256 byte tokens, then filler pieces up to V.
	var tb []byte
	tb = binary.LittleEndian.AppendUint32(tb, 8)
	addTok := func(score float32, piece string) {
		tb = binary.LittleEndian.AppendUint32(tb, math.Float32bits(score))
		tb = binary.LittleEndian.AppendUint32(tb, uint32(len(piece)))
		tb = append(tb, piece...)
	}
	addTok(0, "<unk>")
	addTok(0, "\n<s>\n")
	addTok(0, "\n</s>\n")
	for b := 0; b < 256; b++ {
		addTok(0, fmt.Sprintf("<0x%02X>", b))
	}
	pieces := []string{" t", "he", " the", "in", " a", "er", "on", " w", "ing", " s"}
	sort.Strings(pieces)
	for i := 259; i < V; i++ {
		addTok(-float32(i), fmt.Sprintf("%s%d", pieces[i%len(pieces)], i))
	}
	return os.WriteFile(tokPath, tb, 0o644)
}

// stackExperts maps an MoE layer's Hugging Face tensor rest (after the
// layer prefix) to GGUF: the router to ffn_gate_inp (gn set, v its
// values); expert 0's gate, up or down matrix to the experts' stacked
// ffn_{gate,up,down}_exps tensor (v every expert's values in turn); the
// other experts' matrices are skipped (in the stack already).
func stackExperts(w *weights, s Spec, layer int, rest string) (v []float32, gn string, skip bool) {
	router, gate, up, down := expertNames(s.Arch)
	p := fmt.Sprintf("model.layers.%d.", layer)
	if rest == router {
		return w.data[p+rest], "ffn_gate_inp.weight", false
	}
	for _, k := range []struct{ pat, gguf string }{{gate, "ffn_gate_exps.weight"}, {up, "ffn_up_exps.weight"}, {down, "ffn_down_exps.weight"}} {
		var e int
		if _, err := fmt.Sscanf(rest, k.pat, &e); err != nil || fmt.Sprintf(k.pat, e) != rest {
			continue
		}
		if e != 0 {
			return nil, "", true
		}
		for e := 0; e < s.Experts; e++ {
			v = append(v, w.data[p+fmt.Sprintf(k.pat, e)]...)
		}
		return v, k.gguf, false
	}
	return nil, "", false
}
