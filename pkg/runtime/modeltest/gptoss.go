package modeltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// GPTOSS describes a tiny GPT-OSS checkpoint (GptOssForCausalLM; GGUF
// "gpt-oss"): attention with q/k/v/o biases and sinks, alternating
// sliding-window (even layers) and full layers, YaRN RoPE, and in every
// layer Experts experts with biases and the clamped SwiGLU, their gate,
// up and down matrices in MXFP4 — the same quantized values in the
// Hugging Face directory (…_blocks and …_scales, gate and up interleaved)
// and the GGUF file (GGML MXFP4). Other weights are F32.
type GPTOSS struct {
	Dim, Layers, Heads, KVHeads, HeadDim int
	Experts, ExpertsUsed, ExpertHidden   int
	SlidingWindow, Context               int
	RopeTheta                            float64
	// YaRN: factor and original context (factor 0: no rope_scaling);
	// NoTruncate writes "truncate": false into config.json (llama.cpp
	// always truncates, so such a directory and the GGUF file differ).
	YarnFactor  float64
	YarnContext int
	NoTruncate  bool
	// ExpertsF32 writes the GGUF file's experts as F32 holding the MXFP4
	// values decoded (so that llama.cpp multiplies them in float32: its
	// MXFP4 products quantize the activations to q8_0).
	ExpertsF32 bool
	// PlainExperts writes the Hugging Face directory's experts unquantized
	// (F32 gate_up_proj [E][hidden][2·intermediate] and down_proj
	// [E][intermediate][hidden], the MXFP4 values decoded), as
	// transformers saves a dequantized model.
	PlainExperts bool
	// SinkScale multiplies the sink logits (N(0,1) before it).
	SinkScale float64
	// ChatTemplate, when set, replaces the test chat template in
	// tokenizer_config.json and the GGUF file.
	ChatTemplate string
	Seed         uint64
}

func (s *GPTOSS) defaults() {
	def := func(x *int, v int) {
		if *x == 0 {
			*x = v
		}
	}
	def(&s.Dim, 64)
	def(&s.Layers, 4)
	def(&s.Heads, 4)
	def(&s.KVHeads, 2)
	def(&s.HeadDim, 32)
	def(&s.Experts, 4)
	def(&s.ExpertsUsed, 2)
	def(&s.ExpertHidden, 64)
	def(&s.SlidingWindow, 4)
	def(&s.Context, 256)
	def(&s.YarnContext, 32)
	if s.RopeTheta == 0 {
		s.RopeTheta = 150000
	}
	if s.SinkScale == 0 {
		s.SinkScale = 1
	}
	if s.ChatTemplate == "" {
		s.ChatTemplate = ChatTemplate
	}
}

// gptossWeights are the checkpoint's tensors: dense ones as float32 in HF
// naming and shape; each layer's experts as GGML MXFP4 rows
// (mx[layer][kind], kind 0 gate_up with rows interleaved, 1 down).
type gptossWeights struct {
	*weights
	mx [][2][]byte
}

func makeGPTOSS(s GPTOSS) *gptossWeights {
	rng := rand.New(rand.NewPCG(s.Seed, 1203))
	w := &gptossWeights{weights: &weights{shape: map[string][]int{}, data: map[string][]float32{}}}
	normal := func(n int, mean, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		return v
	}
	mat := func(name string, rows, cols int) {
		w.add(name, []int{rows, cols}, normal(rows*cols, 0, 1/math.Sqrt(float64(cols))))
	}
	vec := func(name string, n int, mean, std float64) { w.add(name, []int{n}, normal(n, mean, std)) }
	// mxfp4 quantizes rows×cols normal values to GGML MXFP4 rows.
	mxfp4 := func(rows, cols int) []byte {
		rb := cols / 32 * 17
		out := make([]byte, rows*rb)
		v := normal(rows*cols, 0, 1/math.Sqrt(float64(cols)))
		for r := 0; r < rows; r++ {
			gguf.QuantizeRow(gguf.MXFP4, out[r*rb:(r+1)*rb], v[r*cols:(r+1)*cols])
		}
		return out
	}
	V := Vocab()
	qd, kvd, E, H, D := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.Experts, s.ExpertHidden, s.Dim
	mat("model.embed_tokens.weight", V, D)
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		vec(p+"input_layernorm.weight", D, 1, 0.1)
		mat(p+"self_attn.q_proj.weight", qd, D)
		mat(p+"self_attn.k_proj.weight", kvd, D)
		mat(p+"self_attn.v_proj.weight", kvd, D)
		mat(p+"self_attn.o_proj.weight", D, qd)
		vec(p+"self_attn.q_proj.bias", qd, 0, 0.3)
		vec(p+"self_attn.k_proj.bias", kvd, 0, 0.3)
		vec(p+"self_attn.v_proj.bias", kvd, 0, 0.3)
		vec(p+"self_attn.o_proj.bias", D, 0, 0.1)
		vec(p+"self_attn.sinks", s.Heads, 0, s.SinkScale)
		vec(p+"post_attention_layernorm.weight", D, 1, 0.1)
		mat(p+"mlp.router.weight", E, D)
		vec(p+"mlp.router.bias", E, 0, 0.5)
		w.add(p+"mlp.experts.gate_up_proj_bias", []int{E, 2 * H}, normal(E*2*H, 0, 0.3))
		w.add(p+"mlp.experts.down_proj_bias", []int{E, D}, normal(E*D, 0, 0.1))
		w.mx = append(w.mx, [2][]byte{mxfp4(E*2*H, D), mxfp4(E*D, H)})
	}
	vec("model.norm.weight", D, 1, 0.1)
	mat("lm_head.weight", V, D)
	return w
}

// ggmlToHFMXFP4 splits GGML MXFP4 rows into Hugging Face's blocks (values
// 2j and 2j+1 in byte j's low and high nibbles) and scales.
func ggmlToHFMXFP4(rows []byte) (blocks, scales []byte) {
	n := len(rows) / 17
	blocks, scales = make([]byte, n*16), make([]byte, n)
	for b := 0; b < n; b++ {
		src := rows[b*17 : (b+1)*17]
		scales[b] = src[0]
		val := func(i int) byte { // GGML: values j and j+16 in byte j
			if i < 16 {
				return src[1+i] & 15
			}
			return src[1+i-16] >> 4
		}
		for j := 0; j < 16; j++ {
			blocks[b*16+j] = val(2*j) | val(2*j+1)<<4
		}
	}
	return blocks, scales
}

// WriteGPTOSSHF writes the model as a Hugging Face directory (MXFP4
// experts, as the released checkpoints ship them).
func WriteGPTOSSHF(dir string, s GPTOSS) error {
	s.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w := makeGPTOSS(s)
	V := Vocab()
	var types []string
	for li := 0; li < s.Layers; li++ {
		types = append(types, map[bool]string{true: "sliding_attention", false: "full_attention"}[li%2 == 0])
	}
	cfg := map[string]any{
		"architectures": []string{"GptOssForCausalLM"}, "model_type": "gpt_oss",
		"hidden_size": s.Dim, "intermediate_size": s.ExpertHidden, "num_hidden_layers": s.Layers,
		"num_attention_heads": s.Heads, "num_key_value_heads": s.KVHeads, "head_dim": s.HeadDim,
		"vocab_size": V, "max_position_embeddings": s.Context, "rms_norm_eps": 1e-5,
		"rope_theta": s.RopeTheta, "tie_word_embeddings": false, "torch_dtype": "float32",
		"num_local_experts": s.Experts, "num_experts_per_tok": s.ExpertsUsed, "experts_per_token": s.ExpertsUsed,
		"sliding_window": s.SlidingWindow, "layer_types": types, "swiglu_limit": 7.0, "attention_bias": true,
		"bos_token_id": V - 2, "eos_token_id": V - 1,
		"quantization_config": map[string]any{"quant_method": "mxfp4",
			"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
	}
	if s.YarnFactor > 0 {
		cfg["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": s.YarnFactor, "original_max_position_embeddings": s.YarnContext,
			"beta_fast": 32.0, "beta_slow": 1.0, "truncate": !s.NoTruncate}
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), map[string]any{"bos_token_id": V - 2, "eos_token_id": []int{V - 1}}); err != nil {
		return err
	}
	if err := writeTokenizerJSON(dir, true); err != nil {
		return err
	}
	if s.ChatTemplate != ChatTemplate {
		if err := writeJSON(filepath.Join(dir, "tokenizer_config.json"), map[string]any{
			"bos_token": bosToken, "eos_token": eosToken, "add_bos_token": true, "model_max_length": s.Context,
			"chat_template": s.ChatTemplate,
		}); err != nil {
			return err
		}
	}
	st := safetensors.NewWriter()
	for _, name := range w.names {
		shape := make([]int64, len(w.shape[name]))
		for j, d := range w.shape[name] {
			shape[j] = int64(d)
		}
		if err := st.Add(name, "F32", shape, encode(w.data[name], "F32")); err != nil {
			return err
		}
	}
	E, H, D := int64(s.Experts), int64(s.ExpertHidden), int64(s.Dim)
	for li, mx := range w.mx {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.", li)
		for k, kind := range []struct {
			name       string
			rows, cols int64
		}{{"gate_up_proj", 2 * H, D}, {"down_proj", D, H}} {
			if s.PlainExperts {
				// [E][rows][cols] decoded, stored transposed: [E][cols][rows].
				rows, cols := int(kind.rows), int(kind.cols)
				v := make([]float32, int(E)*rows*cols)
				row := make([]float32, cols)
				for e := 0; e < int(E); e++ {
					for r := 0; r < rows; r++ {
						gguf.DequantizeRow(gguf.MXFP4, row, mx[k][(e*rows+r)*cols/32*17:(e*rows+r+1)*cols/32*17])
						for c, x := range row {
							v[(e*cols+c)*rows+r] = x
						}
					}
				}
				if err := st.Add(p+kind.name, "F32", []int64{E, kind.cols, kind.rows}, encode(v, "F32")); err != nil {
					return err
				}
				continue
			}
			b, sc := ggmlToHFMXFP4(mx[k])
			if err := st.Add(p+kind.name+"_blocks", "U8", []int64{E, kind.rows, kind.cols / 32, 16}, b); err != nil {
				return err
			}
			if err := st.Add(p+kind.name+"_scales", "U8", []int64{E, kind.rows, kind.cols / 32}, sc); err != nil {
				return err
			}
		}
	}
	return writeTo(filepath.Join(dir, "model.safetensors"), st)
}

var gptossGGUFName = map[string]string{
	"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
	"self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
	"self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
	"self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
	"self_attn.o_proj.bias": "attn_output.bias", "self_attn.sinks": "attn_sinks.weight",
	"post_attention_layernorm.weight": "post_attention_norm.weight",
	"mlp.router.weight":               "ffn_gate_inp.weight", "mlp.router.bias": "ffn_gate_inp.bias",
	"mlp.experts.down_proj_bias": "ffn_down_exps.bias",
}

// WriteGPTOSSGGUF writes the model as a GGUF file as llama.cpp's converter
// does (gate and up split, MXFP4 experts, F32 elsewhere; the YaRN keys).
func WriteGPTOSSGGUF(path string, s GPTOSS) error {
	s.defaults()
	w := makeGPTOSS(s)
	g := gguf.NewWriter(3)
	const arch = "gpt-oss"
	g.AddString("general.architecture", arch)
	g.AddString("general.name", "kvq-modeltest-gpt-oss")
	g.AddUint32(arch+".block_count", uint32(s.Layers))
	g.AddUint32(arch+".context_length", uint32(s.Context))
	g.AddUint32(arch+".embedding_length", uint32(s.Dim))
	g.AddUint32(arch+".feed_forward_length", uint32(s.ExpertHidden))
	g.AddUint32(arch+".expert_feed_forward_length", uint32(s.ExpertHidden))
	g.AddUint32(arch+".expert_count", uint32(s.Experts))
	g.AddUint32(arch+".expert_used_count", uint32(s.ExpertsUsed))
	g.AddUint32(arch+".attention.head_count", uint32(s.Heads))
	g.AddUint32(arch+".attention.head_count_kv", uint32(s.KVHeads))
	g.AddUint32(arch+".attention.key_length", uint32(s.HeadDim))
	g.AddUint32(arch+".attention.value_length", uint32(s.HeadDim))
	g.AddUint32(arch+".attention.sliding_window", uint32(s.SlidingWindow))
	g.AddUint32(arch+".rope.dimension_count", uint32(s.HeadDim))
	g.AddFloat32(arch+".attention.layer_norm_rms_epsilon", 1e-5)
	g.AddFloat32(arch+".rope.freq_base", float32(s.RopeTheta))
	if s.YarnFactor > 0 {
		g.AddString(arch+".rope.scaling.type", "yarn")
		g.AddFloat32(arch+".rope.scaling.factor", float32(s.YarnFactor))
		g.AddUint32(arch+".rope.scaling.original_context_length", uint32(s.YarnContext))
	}
	toks := vocabTokens()
	V := len(toks)
	g.AddString("tokenizer.ggml.model", "gpt2")
	g.AddString("tokenizer.ggml.pre", "default")
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
	g.AddBool("tokenizer.ggml.add_bos_token", true)
	g.AddString("tokenizer.chat_template", s.ChatTemplate)
	dims := func(shape ...int) []uint64 {
		d := make([]uint64, len(shape))
		for i, x := range shape {
			d[len(shape)-1-i] = uint64(x) // GGUF lists the row length first
		}
		return d
	}
	E, H, D := s.Experts, s.ExpertHidden, s.Dim
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
			if _, err := fmt.Sscanf(name, "model.layers.%d.", &layer); err != nil {
				return fmt.Errorf("modeltest: unexpected tensor %s", name)
			}
			rest := name[len(fmt.Sprintf("model.layers.%d.", layer)):]
			p := fmt.Sprintf("blk.%d.", layer)
			if rest == "mlp.experts.gate_up_proj_bias" {
				gb, ub := make([]float32, E*H), make([]float32, E*H)
				for i := range gb {
					gb[i], ub[i] = v[2*i], v[2*i+1]
				}
				if err := g.AddTensor(p+"ffn_gate_exps.bias", gguf.F32, dims(E, H), encode(gb, "F32")); err != nil {
					return err
				}
				if err := g.AddTensor(p+"ffn_up_exps.bias", gguf.F32, dims(E, H), encode(ub, "F32")); err != nil {
					return err
				}
				continue
			}
			gname = p + gptossGGUFName[rest]
		}
		if err := g.AddTensor(gname, gguf.F32, dims(shape...), encode(v, "F32")); err != nil {
			return err
		}
	}
	rb := D / 32 * 17
	for li, mx := range w.mx {
		p := fmt.Sprintf("blk.%d.", li)
		var gate, up []byte
		for r := 0; r < E*2*H; r++ {
			if r%2 == 0 {
				gate = append(gate, mx[0][r*rb:(r+1)*rb]...)
			} else {
				up = append(up, mx[0][r*rb:(r+1)*rb]...)
			}
		}
		for _, t := range []struct {
			name string
			data []byte
			dims []uint64
		}{{"ffn_gate_exps.weight", gate, dims(E, H, D)}, {"ffn_up_exps.weight", up, dims(E, H, D)}, {"ffn_down_exps.weight", mx[1], dims(E, D, H)}} {
			if s.ExpertsF32 {
				v := make([]float32, len(t.data)/17*32)
				for b := 0; b < len(t.data)/17; b++ {
					gguf.DequantizeRow(gguf.MXFP4, v[b*32:(b+1)*32], t.data[b*17:(b+1)*17])
				}
				if err := g.AddTensor(p+t.name, gguf.F32, t.dims, encode(v, "F32")); err != nil {
					return err
				}
				continue
			}
			if err := g.AddTensor(p+t.name, gguf.MXFP4, t.dims, t.data); err != nil {
				return err
			}
		}
	}
	return writeTo(path, g)
}
