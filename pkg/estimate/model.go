package estimate

import (
	"fmt"
	"sort"
	"strings"
)

// Model is the KV-relevant description of a model: its attention geometry,
// which layers use a sliding window, and what its weights weigh.
type Model struct {
	// Name is the preset name, or the file the model was read from.
	Name string `json:"name"`
	// Arch is the Hugging Face model_type ("llama", "gemma2", "deepseek_v3")
	// or the GGUF general.architecture.
	Arch string `json:"arch"`
	// Source says where the description came from: "preset", "config.json",
	// "gguf".
	Source string `json:"source"`

	Layers  int `json:"layers"`          // num_hidden_layers
	Heads   int `json:"attention_heads"` // num_attention_heads
	KVHeads int `json:"kv_heads"`        // num_key_value_heads (the config's value; ignored for MLA)
	// HeadDim is head_dim, or hidden_size/num_attention_heads when the
	// config has no head_dim.
	HeadDim int `json:"head_dim"`
	Hidden  int `json:"hidden_size"`
	// MaxPosition is max_position_embeddings (GGUF: context_length).
	MaxPosition int64 `json:"max_position"`
	// RopeMaxPosition, when positive, is MaxPosition as the config's RoPE
	// scaling extends it (factor × max_position_embeddings, or × the
	// original length for YaRN), as vLLM derives max_model_len.
	RopeMaxPosition int64 `json:"rope_max_position"`

	// KVLoraRank and QKRopeHeadDim describe multi-head latent attention
	// (DeepSeek MLA); KVLoraRank > 0 marks an MLA model.
	KVLoraRank    int `json:"kv_lora_rank,omitempty"`
	QKRopeHeadDim int `json:"qk_rope_head_dim,omitempty"`

	// Windows holds each layer's sliding window in tokens, 0 for full
	// attention. Nil means every layer is full attention.
	Windows []int `json:"layer_windows,omitempty"`

	// DType is the weights' (and the "auto" KV cache's) dtype as served:
	// "bfloat16", "float16" or "float32".
	DType string `json:"dtype"`
	// Params is the parameter count.
	Params int64 `json:"params"`
	// WeightBits is the storage cost of one parameter in bits when the
	// weights are quantized (8 for FP8 checkpoints); 0 means DType's size.
	WeightBits float64 `json:"weight_bits,omitempty"`
	// WeightsBytes, when positive, is the exact size of the weights (summed
	// from safetensors headers or GGUF tensors) and wins over Params.
	WeightsBytes int64 `json:"weights_bytes,omitempty"`
	// Verified is false for presets whose fields were not all checked
	// against a public config (docs/estimate-rules.md §8 "M").
	Verified bool `json:"verified"`
}

// MaxModelLen is the longest request the engine admits by default and the
// longest it accepts without an override: vLLM's derived max_model_len
// (RopeMaxPosition when set, else MaxPosition; 0 when unknown).
func (m *Model) MaxModelLen() int64 {
	if m.RopeMaxPosition > 0 {
		return m.RopeMaxPosition
	}
	return m.MaxPosition
}

// MaxModelLenSource names what MaxModelLen comes from, for messages.
func (m *Model) MaxModelLenSource() string {
	switch {
	case m.RopeMaxPosition > 0:
		return fmt.Sprintf("max_position_embeddings %d extended by rope_scaling", m.MaxPosition)
	case m.Source == "gguf":
		return "context_length"
	}
	return "max_position_embeddings"
}

// MLA reports whether the model uses multi-head latent attention.
func (m *Model) MLA() bool { return m.KVLoraRank > 0 }

// Window returns layer i's sliding window, 0 for full attention.
func (m *Model) Window(i int) int {
	if i < len(m.Windows) {
		return m.Windows[i]
	}
	return 0
}

// SlidingLayers returns the number of sliding-window layers and the distinct
// windows they use, ascending.
func (m *Model) SlidingLayers() (n int, windows []int) {
	seen := map[int]bool{}
	for _, w := range m.Windows {
		if w > 0 {
			n++
			if !seen[w] {
				seen[w] = true
				windows = append(windows, w)
			}
		}
	}
	sort.Ints(windows)
	return n, windows
}

// KVDim is the number of values one layer stores per token for one KV head
// and one of K or V: head_dim, or kv_lora_rank+qk_rope_head_dim for MLA.
func (m *Model) KVDim() int {
	if m.MLA() {
		return m.KVLoraRank + m.QKRopeHeadDim
	}
	return m.HeadDim
}

// KVHeadsPerRank is vLLM's get_num_kv_heads: max(1, kv_heads/tp), and 1 for
// MLA, whose latent is replicated on every rank.
func (m *Model) KVHeadsPerRank(tp int) int {
	if m.MLA() {
		return 1
	}
	return max(1, m.KVHeads/tp)
}

// ValuesPerToken is the number of values the whole model caches per token:
// 2·L·Hkv·D, or L·(kv_lora_rank+qk_rope_head_dim) for MLA.
func (m *Model) ValuesPerToken() int64 {
	if m.MLA() {
		return int64(m.Layers) * int64(m.KVDim())
	}
	return 2 * int64(m.Layers) * int64(m.KVHeads) * int64(m.HeadDim)
}

// Limits on model geometry, far above any real model, that keep layouts small
// and arithmetic exact.
const (
	maxLayers  = 4096
	maxHeads   = 1 << 16
	maxHeadDim = 1 << 16
	// maxLayerHeads bounds the codecs a layout builds (GPT-3 has 96×96).
	maxLayerHeads = 1 << 16
)

// Validate checks the geometry.
func (m *Model) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: model %s: %s", ErrConfig, m.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Layers <= 0 || m.Layers > maxLayers:
		return bad("num_hidden_layers %d out of range [1, %d]", m.Layers, maxLayers)
	case m.Heads <= 0 || m.Heads > maxHeads:
		return bad("num_attention_heads %d out of range [1, %d]", m.Heads, maxHeads)
	case !m.MLA() && (m.KVHeads <= 0 || m.KVHeads > m.Heads):
		return bad("num_key_value_heads %d out of range [1, num_attention_heads=%d]", m.KVHeads, m.Heads)
	case !m.MLA() && m.Heads%m.KVHeads != 0:
		return bad("num_attention_heads %d is not a multiple of num_key_value_heads %d", m.Heads, m.KVHeads)
	case !m.MLA() && (m.HeadDim <= 0 || m.HeadDim > maxHeadDim):
		return bad("head_dim %d out of range [1, %d]", m.HeadDim, maxHeadDim)
	case m.MLA() && (m.QKRopeHeadDim < 0 || m.KVDim() > maxHeadDim):
		return bad("kv_lora_rank %d + qk_rope_head_dim %d out of range", m.KVLoraRank, m.QKRopeHeadDim)
	case m.MaxPosition < 0 || m.RopeMaxPosition < 0:
		return bad("max_position_embeddings %d (RoPE-scaled %d) is negative", m.MaxPosition, m.RopeMaxPosition)
	case m.Params < 0 || m.WeightsBytes < 0 || m.WeightBits < 0:
		return bad("negative parameter count or weight size")
	case !m.MLA() && m.Layers*m.KVHeads > maxLayerHeads:
		return bad("%d layers × %d KV heads exceeds %d", m.Layers, m.KVHeads, maxLayerHeads)
	case m.Windows != nil && len(m.Windows) != m.Layers:
		return bad("%d layer windows for %d layers", len(m.Windows), m.Layers)
	}
	for i, w := range m.Windows {
		if w < 0 {
			return bad("layer %d has sliding window %d", i, w)
		}
	}
	return nil
}

// WeightsBytesTotal is the memory of the weights over all ranks: the exact
// size when known, otherwise Params × bits per parameter.
func (m *Model) WeightsBytesTotal() int64 {
	if m.WeightsBytes > 0 {
		return m.WeightsBytes
	}
	bits := m.WeightBits
	if bits == 0 {
		bits = 8 * float64(dtypeBytes(m.DType))
	}
	return int64(float64(m.Params) * bits / 8)
}

// dtypeBytes is the size of one element of a Hugging Face dtype name.
func dtypeBytes(dtype string) int {
	switch strings.ToLower(dtype) {
	case "float32", "fp32", "f32":
		return 4
	case "float8", "fp8", "float8_e4m3fn", "float8_e5m2", "f8_e4m3", "f8_e5m2", "int8", "i8", "u8", "uint8":
		return 1
	case "float64", "f64":
		return 8
	default:
		return 2
	}
}

// windowsAll makes every one of n layers use window w.
func windowsAll(n, w int) []int {
	ws := make([]int, n)
	for i := range ws {
		ws[i] = w
	}
	return ws
}

// windowsEvery makes layers sliding (window w) except every period-th one,
// which is global: Gemma-2 and gpt-oss (period 2: even layers slide, odd are
// global) and Gemma-3 (period 6: five local, then one global).
func windowsEvery(n, w, period int) []int {
	ws := make([]int, n)
	for i := range ws {
		if (i+1)%period != 0 {
			ws[i] = w
		}
	}
	return ws
}
