package estimate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/pkg/hfconfig"
)

// maxConfigBytes bounds a config.json read into memory.
const maxConfigBytes = 16 << 20

// Load resolves a --model argument: an existing directory (config.json plus
// optional safetensors headers), a GGUF file, a config.json file, or else a
// preset name.
func Load(ctx context.Context, ref string) (Model, error) {
	if st, err := os.Stat(ref); err == nil {
		if st.IsDir() {
			return LoadDir(ctx, ref)
		}
		// A .gguf too short or damaged for its magic is still reported as
		// a GGUF file, not as a config.json that is not JSON.
		if isGGUF(ref) || strings.EqualFold(filepath.Ext(ref), ".gguf") {
			return LoadGGUF(ref)
		}
		return LoadConfig(ref)
	}
	m, err := LookupModel(ref)
	if err == nil {
		return m, nil
	}
	if looksLikePath(ref) {
		_, serr := os.Stat(ref)
		return Model{}, fmt.Errorf("model %s: %w", ref, serr)
	}
	return Model{}, err
}

func looksLikePath(s string) bool {
	ext := strings.ToLower(filepath.Ext(s))
	return ext == ".json" || ext == ".gguf" || ext == ".safetensors" ||
		strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~")
}

// isGGUF reports whether the file starts with the GGUF magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == "GGUF"
}

// LoadConfig reads a Hugging Face config.json.
func LoadConfig(path string) (Model, error) {
	b, err := readLimited(path, maxConfigBytes)
	if err != nil {
		return Model{}, err
	}
	m, err := ParseConfig(b)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	m.Name = path
	return m, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrConfig, path, limit)
	}
	return b, nil
}

// LoadDir reads a model directory: config.json for the geometry and, when
// present, the safetensors headers (or model.safetensors.index.json) for the
// exact weight size.
func LoadDir(ctx context.Context, dir string) (Model, error) {
	cfg := filepath.Join(dir, "config.json")
	m, err := LoadConfig(cfg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Model{}, fmt.Errorf("%w: directory %s has no config.json", ErrConfig, dir)
		}
		return Model{}, err
	}
	m.Name = dir
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	sort.Strings(files)
	if len(files) > 0 {
		var params, size int64
		shapes := map[string][]int64{}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return Model{}, fmt.Errorf("reading safetensors headers in %s: %w", dir, err)
			}
			st, err := readSafetensorsFile(f)
			if err != nil {
				return Model{}, err
			}
			if params, err = add(params, st.params); err == nil {
				size, err = add(size, st.bytes)
			}
			if err != nil {
				return Model{}, fmt.Errorf("%s: %w", f, err)
			}
			for name, s := range st.shapes {
				shapes[name] = s
			}
		}
		// The weights' shapes win over config.json: a disagreement is an
		// error in the config.
		if err := checkShapes(m, shapes); err != nil {
			return Model{}, fmt.Errorf("%w: %s: %v", ErrConfig, cfg, err)
		}
		m.Params, m.WeightsBytes, m.WeightBits = params, size, 0
		m.Source = "config.json+safetensors"
		return m, nil
	}
	idx := filepath.Join(dir, "model.safetensors.index.json")
	if b, err := readLimited(idx, maxConfigBytes); err == nil {
		var ix struct {
			Metadata struct {
				TotalSize int64 `json:"total_size"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &ix); err != nil || ix.Metadata.TotalSize < 0 {
			return Model{}, fmt.Errorf("%w: %s: bad metadata.total_size", ErrConfig, idx)
		}
		if ix.Metadata.TotalSize > 0 {
			m.WeightsBytes, m.WeightBits = ix.Metadata.TotalSize, 0
			m.Source = "config.json+safetensors-index"
		}
	}
	return m, nil
}

// cfg is a decoded config.json object with typed, checked accessors.
type cfg map[string]json.RawMessage

func (c cfg) has(key string) bool {
	v, ok := c[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// int reads the first present key of keys as a non-negative integer that
// fits in int (integral floats such as 4096.0 are accepted).
func (c cfg) int(keys ...string) (int, bool, error) {
	for _, k := range keys {
		if !c.has(k) {
			continue
		}
		var f float64
		if err := json.Unmarshal(c[k], &f); err != nil {
			return 0, false, fmt.Errorf("%w: %q is not a number: %s", ErrConfig, k, c[k])
		}
		if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			return 0, false, fmt.Errorf("%w: %q = %v is not a non-negative integer", ErrConfig, k, f)
		}
		return int(f), true, nil
	}
	return 0, false, nil
}

func (c cfg) str(keys ...string) string {
	for _, k := range keys {
		var s string
		if c.has(k) && json.Unmarshal(c[k], &s) == nil {
			return s
		}
	}
	return ""
}

func (c cfg) boolean(key string) (v, present bool) {
	if !c.has(key) {
		return false, false
	}
	if err := json.Unmarshal(c[key], &v); err != nil {
		return false, false
	}
	return v, true
}

// recurrentTypes are model types with recurrent (Mamba, linear-attention)
// layers, whose per-request state the estimator does not model.
var recurrentTypes = map[string]bool{
	"jamba": true, "mamba": true, "mamba2": true, "nemotron_h": true, "falcon_h1": true,
	"granitemoehybrid": true, "qwen3_next": true, "kimi_linear": true, "zamba": true, "zamba2": true,
	"rwkv": true, "recurrent_gemma": true, "lfm2": true, "bamba": true, "plamo2": true, "minimax": true,
}

// ParseConfig reads the KV-relevant fields of a Hugging Face config.json:
// geometry (with head_dim when it differs from hidden/heads), MLA fields,
// sliding windows and layer types, dtype, and a parameter count estimated
// from the shapes. Multimodal configs are read from their text_config (or
// llm_config / language_config).
func ParseConfig(data []byte) (Model, error) {
	var top cfg
	if err := json.Unmarshal(data, &top); err != nil {
		return Model{}, fmt.Errorf("%w: not a JSON object: %v", ErrConfig, err)
	}
	c := top
	for _, k := range []string{"text_config", "llm_config", "language_config"} {
		if top.has(k) && !top.has("num_hidden_layers") {
			var sub cfg
			if err := json.Unmarshal(top[k], &sub); err != nil {
				return Model{}, fmt.Errorf("%w: %s is not an object: %v", ErrConfig, k, err)
			}
			for _, inherit := range []string{"torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"} {
				if !sub.has(inherit) && top.has(inherit) {
					sub[inherit] = top[inherit]
				}
			}
			c = sub
			break
		}
	}
	if err := hfconfig.Check(c); err != nil {
		return Model{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	m := Model{Source: "config.json"}
	m.Arch = c.str("model_type")
	if m.Arch == "" {
		m.Arch = top.str("model_type")
	}
	if recurrentTypes[m.Arch] {
		return Model{}, fmt.Errorf("%w: model_type %q has recurrent layers; kvq estimate models attention-only caches", ErrUnsupported, m.Arch)
	}
	var err error
	need := func(dst *int, keys ...string) {
		if err != nil {
			return
		}
		var ok bool
		*dst, ok, err = c.int(keys...)
		if err == nil && !ok {
			err = fmt.Errorf("%w: missing %q", ErrConfig, keys[0])
		}
	}
	opt := func(dst *int, def int, keys ...string) {
		if err != nil {
			return
		}
		var ok bool
		*dst, ok, err = c.int(keys...)
		if err == nil && !ok {
			*dst = def
		}
	}
	need(&m.Layers, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
	need(&m.Heads, "num_attention_heads", "n_head", "num_heads")
	opt(&m.Hidden, 0, "hidden_size", "n_embd", "d_model")
	opt(&m.KVHeads, m.Heads, "num_key_value_heads", "num_kv_heads", "n_head_kv")
	if err != nil {
		return Model{}, err
	}
	if m.Heads == 0 {
		return Model{}, fmt.Errorf("%w: num_attention_heads is 0", ErrConfig)
	}
	opt(&m.HeadDim, m.Hidden/m.Heads, "head_dim")
	opt(&m.KVLoraRank, 0, "kv_lora_rank")
	opt(&m.QKRopeHeadDim, 0, "qk_rope_head_dim")
	var maxPos int
	opt(&maxPos, 0, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
	if err != nil {
		return Model{}, err
	}
	if maxPos == 0 && strings.HasPrefix(m.Arch, "gemma3") {
		maxPos = 131072 // Gemma3TextConfig's default, omitted from serialized configs
	}
	m.MaxPosition = int64(maxPos)
	if m.RopeMaxPosition, err = ropeMaxPosition(c, m); err != nil {
		return Model{}, err
	}
	if m.HeadDim == 0 && !m.MLA() {
		if _, given, _ := c.int("head_dim"); given {
			return Model{}, fmt.Errorf("%w: head_dim is 0", ErrConfig)
		}
		if m.Hidden > 0 {
			return Model{}, fmt.Errorf("%w: no head_dim, and hidden_size %d / num_attention_heads %d is 0", ErrConfig, m.Hidden, m.Heads)
		}
		return Model{}, fmt.Errorf("%w: no head_dim and no hidden_size to derive it from", ErrConfig)
	}
	if m.MLA() {
		m.KVHeads = m.Heads // kept for reference; MLA caches one latent per token
		opt(&m.HeadDim, m.HeadDim, "v_head_dim")
		if err != nil {
			return Model{}, err
		}
	}
	if m.Windows, err = parseWindows(c, m); err != nil {
		return Model{}, err
	}
	m.DType = strings.ToLower(c.str("torch_dtype", "dtype"))
	switch m.DType {
	case "", "auto":
		m.DType = "bfloat16"
	case "float32":
		// vLLM's dtype "auto" serves float32 checkpoints in 16 bits.
		m.DType = "bfloat16"
	}
	m.Params, m.WeightsBytes, err = estimateWeights(c, m)
	if err != nil {
		return Model{}, err
	}
	m.Verified = true
	if err := m.Validate(); err != nil {
		return Model{}, err
	}
	return m, nil
}

// parseWindows works out each layer's sliding window from layer_types,
// sliding_window, use_sliding_window, max_window_layers and the model
// family's pattern (Gemma-2 alternates, Gemma-3 slides five layers in six).
// Windows at least as long as max_position_embeddings are full attention.
func parseWindows(c cfg, m Model) ([]int, error) {
	w, _, err := c.int("sliding_window")
	if err != nil {
		return nil, err
	}
	if w == 0 || (m.MaxPosition > 0 && int64(w) >= m.MaxPosition) {
		return nil, nil
	}
	if c.has("layer_types") {
		var types []string
		if err := json.Unmarshal(c["layer_types"], &types); err != nil {
			return nil, fmt.Errorf("%w: layer_types is not a list of strings", ErrConfig)
		}
		if len(types) != m.Layers {
			return nil, fmt.Errorf("%w: layer_types has %d entries for %d layers", ErrConfig, len(types), m.Layers)
		}
		ws := make([]int, m.Layers)
		sliding := false
		for i, t := range types {
			switch t {
			case "sliding_attention":
				ws[i], sliding = w, true
			case "full_attention", "chunked_attention", "attention":
				// Chunked-local attention is counted as full: an upper bound.
			default:
				return nil, fmt.Errorf("%w: layer %d has type %q; kvq estimate models attention layers only", ErrUnsupported, i, t)
			}
		}
		if !sliding {
			return nil, nil
		}
		return ws, nil
	}
	if use, ok := c.boolean("use_sliding_window"); ok && !use {
		return nil, nil // Qwen2/2.5/3 list a window they do not use
	}
	switch {
	case m.Arch == "gemma2":
		return windowsEvery(m.Layers, w, 2), nil
	case strings.HasPrefix(m.Arch, "gemma3"):
		p, ok, err := c.int("sliding_window_pattern")
		if err != nil {
			return nil, err
		}
		if !ok || p == 0 {
			p = 6
		}
		return windowsEvery(m.Layers, w, p), nil
	case m.Arch == "gpt_oss":
		return windowsEvery(m.Layers, w, 2), nil
	case strings.HasPrefix(m.Arch, "qwen"):
		// use_sliding_window is true: layers from max_window_layers on slide.
		from, _, err := c.int("max_window_layers")
		if err != nil {
			return nil, err
		}
		ws := make([]int, m.Layers)
		for i := from; i < m.Layers; i++ {
			ws[i] = w
		}
		if from >= m.Layers {
			return nil, nil
		}
		return ws, nil
	}
	return windowsAll(m.Layers, w), nil
}

// estimateWeights estimates the parameter count from the config's shapes
// (attention, MLA projections, dense or mixture-of-experts MLPs, norms,
// embeddings) and the weights' bytes, taking FP8, MXFP4 and GPTQ/AWQ
// quantization_config into account. It is an estimate (±2% on the presets);
// a model directory with safetensors gives exact figures.
func estimateWeights(c cfg, m Model) (params, weightBytes int64, err error) {
	get := func(def int, keys ...string) int {
		if err != nil {
			return 0
		}
		v, ok, e := c.int(keys...)
		if e != nil {
			err = e
		}
		if !ok {
			return def
		}
		return v
	}
	// Floating point: products of hostile sizes must not wrap around.
	h := float64(m.Hidden)
	vocab := float64(get(0, "vocab_size"))
	inter := float64(get(0, "intermediate_size", "n_inner", "ffn_dim"))
	experts := float64(get(0, "num_local_experts", "num_experts", "n_routed_experts"))
	moeInter := float64(get(int(inter), "moe_intermediate_size"))
	sharedExperts := float64(get(0, "n_shared_experts"))
	sharedInter := float64(get(0, "shared_expert_intermediate_size"))
	firstDense := get(0, "first_k_dense_replace")
	qLora := float64(get(0, "q_lora_rank"))
	nope := float64(get(0, "qk_nope_head_dim"))
	vHead := float64(get(m.HeadDim, "v_head_dim"))
	if err != nil {
		return 0, 0, err
	}
	if h == 0 {
		return 0, 0, nil
	}
	H, Hkv, D := float64(m.Heads), float64(m.KVHeads), float64(m.HeadDim)
	var attn float64
	if m.MLA() {
		rope, kvl := float64(m.QKRopeHeadDim), float64(m.KVLoraRank)
		if qLora > 0 {
			attn = h*qLora + qLora + qLora*H*(nope+rope)
		} else {
			attn = h * H * (nope + rope)
		}
		attn += h*(kvl+rope) + kvl + kvl*H*(nope+vHead) + H*vHead*h
	} else {
		attn = h*H*D + 2*h*Hkv*D + H*D*h
		if bias, _ := c.boolean("attention_bias"); bias || strings.HasPrefix(m.Arch, "qwen2") {
			attn += (H + 2*Hkv) * D
		}
	}
	var linear, expert float64
	for i := 0; i < m.Layers; i++ {
		linear += attn + 2*h // attention and the two norms
		if experts > 0 && i >= firstDense {
			expert += experts * 3 * h * moeInter
			linear += h*experts + sharedExperts*3*h*moeInter + 3*h*sharedInter
		} else {
			linear += 3 * h * inter
		}
	}
	embed := vocab * h
	if tied, ok := c.boolean("tie_word_embeddings"); ok && !tied {
		embed *= 2 // a separate LM head (transformers' default is tied)
	}
	total := linear + expert + embed + h
	if total > 1<<50 {
		return 0, 0, fmt.Errorf("%w: parameter estimate out of range (%.3g)", ErrConfig, total)
	}
	params = int64(total)
	// Bits per parameter of the linear and expert weights.
	lb, eb := 8*float64(dtypeBytes(m.DType)), 8*float64(dtypeBytes(m.DType))
	if c.has("quantization_config") {
		var q struct {
			Method    string  `json:"quant_method"`
			Bits      float64 `json:"bits"`
			Group     float64 `json:"group_size"`
			WeightBit float64 `json:"weight_bits"`
		}
		if json.Unmarshal(c["quantization_config"], &q) == nil {
			switch strings.ToLower(q.Method) {
			case "fp8", "fbgemm_fp8", "compressed-tensors":
				lb, eb = 8, 8
			case "mxfp4":
				eb = 4.25
			case "gptq", "awq", "bitsandbytes":
				bits := q.Bits
				if bits == 0 {
					bits = q.WeightBit
				}
				if bits == 0 {
					bits = 4
				}
				g := q.Group
				if g <= 0 {
					g = 128
				}
				lb = bits + 32/g // fp16 scale and zero per group
				eb = lb
			}
		}
	}
	emb := (embed + h) * 8 * float64(dtypeBytes(m.DType))
	weightBytes = int64((linear*lb + expert*eb + emb) / 8)
	return params, weightBytes, nil
}

// ropeMaxPosition is vLLM's derived max_model_len where the config's
// rope_scaling extends max_position_embeddings (0 where it does not): the
// factor times max_position_embeddings, or times
// original_max_position_embeddings for YaRN. As vLLM (_get_and_verify_max_len)
// it leaves su, longrope and llama3 scaling alone (their
// max_position_embeddings is already the extended length), and Gemma-3,
// whose 128K already counts its scaling.
func ropeMaxPosition(c cfg, m Model) (int64, error) {
	if !c.has("rope_scaling") || strings.HasPrefix(m.Arch, "gemma3") {
		return 0, nil
	}
	var rs cfg
	if err := json.Unmarshal(c["rope_scaling"], &rs); err != nil {
		return 0, fmt.Errorf("%w: rope_scaling is not an object: %v", ErrConfig, err)
	}
	typ := rs.str("rope_type", "type")
	switch typ {
	case "su", "longrope", "llama3":
		return 0, nil
	}
	factor := 1.0
	if rs.has("factor") {
		if err := json.Unmarshal(rs["factor"], &factor); err != nil || !(factor > 0) || factor > 1<<20 {
			return 0, fmt.Errorf("%w: rope_scaling.factor %s is not a positive number", ErrConfig, rs["factor"])
		}
	}
	base := m.MaxPosition
	if typ == "yarn" {
		orig, ok, err := rs.int("original_max_position_embeddings")
		if err != nil {
			return 0, err
		}
		if ok {
			base = int64(orig)
		}
	}
	n := int64(float64(base) * factor)
	if base <= 0 || n == m.MaxPosition {
		return 0, nil
	}
	return n, nil
}
