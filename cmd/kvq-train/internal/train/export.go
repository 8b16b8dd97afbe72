package train

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/safetensors"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// Special token texts of the probe tokenizer.
const (
	BOSToken = "<|bos|>"
	EOSToken = "<|eos|>"
	PADToken = "<|pad|>"
)

// Export writes m as a Hugging Face LlamaForCausalLM directory dst
// (created if needed; existing files are replaced): config.json,
// model.safetensors in F16, tokenizer.json (byte-level BPE without merges:
// byte b is token b, then the specials), tokenizer_config.json and
// generation_config.json.
//
// F16 rather than BF16: the weights are all small (|w| ≪ 65504), so F16's
// 3 extra mantissa bits make the export 8× more precise at the same size.
func Export(dst string, m *Model) error {
	c := &m.cfg
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	cfg := map[string]any{
		"architectures":           []string{"LlamaForCausalLM"},
		"model_type":              "llama",
		"hidden_size":             c.Dim,
		"intermediate_size":       c.Hidden,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"vocab_size":              c.Vocab,
		"max_position_embeddings": c.Context,
		"rms_norm_eps":            c.RMSEps,
		"rope_theta":              c.RopeTheta,
		"rope_scaling":            nil,
		"hidden_act":              "silu",
		"attention_bias":          false,
		"mlp_bias":                false,
		"tie_word_embeddings":     false,
		"torch_dtype":             "float16",
		"initializer_range":       c.InitStd,
		"bos_token_id":            BOS,
		"eos_token_id":            EOS,
		"pad_token_id":            PAD,
		"use_cache":               true,
	}
	gen := map[string]any{"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD, "do_sample": false}
	tcfg := map[string]any{
		"bos_token": BOSToken, "eos_token": EOSToken, "pad_token": PADToken,
		"add_bos_token": true, "add_eos_token": false,
		"model_max_length": c.Context, "tokenizer_class": "PreTrainedTokenizerFast",
		"clean_up_tokenization_spaces": false,
	}
	for name, v := range map[string]any{
		"config.json": cfg, "generation_config.json": gen,
		"tokenizer.json": tokenizerJSON(c.Vocab), "tokenizer_config.json": tcfg,
	} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("train: export: %w", err)
		}
	}
	wr := safetensors.NewWriter()
	wr.SetMetadata("format", "pt")
	for _, t := range m.hfTensors() {
		h := make([]uint16, len(t.w))
		simd.F32ToF16(h, t.w)
		b := make([]byte, 2*len(h))
		for i, x := range h {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		wr.Add(t.name, safetensors.F16, t.shape, b)
	}
	f, err := os.Create(filepath.Join(dst, "model.safetensors"))
	if err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	if _, err := wr.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("train: export %s: %w", f.Name(), err)
	}
	return f.Close()
}

// hfTensor is one tensor of the Hugging Face layout: its name, shape and
// the slice of the model's weights it holds.
type hfTensor struct {
	name  string
	shape []int64
	w     []float32
}

// hfTensors maps m's weights to the Hugging Face Llama tensors, in file
// order: the fused QKV and gate/up matrices split into their parts. Export
// and importWeights both use it, so the two layouts cannot drift apart.
func (m *Model) hfTensors() []hfTensor {
	c := &m.cfg
	var ts []hfTensor
	vec := func(name string, s span) {
		ts = append(ts, hfTensor{name, []int64{int64(s.n())}, s.of(m.w)})
	}
	mat := func(name string, s span, r0, r1 int) {
		ts = append(ts, hfTensor{name, []int64{int64(r1 - r0), int64(s.cols)}, s.of(m.w)[r0*s.cols : r1*s.cols]})
	}
	lay, hd := m.lay, c.HeadDim
	mat("model.embed_tokens.weight", lay.embed, 0, c.Vocab)
	for i, l := range lay.layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		vec(p+"input_layernorm.weight", l.attnNorm)
		q, k := c.Heads*hd, (c.Heads+c.KVHeads)*hd
		mat(p+"self_attn.q_proj.weight", l.wqkv, 0, q)
		mat(p+"self_attn.k_proj.weight", l.wqkv, q, k)
		mat(p+"self_attn.v_proj.weight", l.wqkv, k, c.qkvRows())
		mat(p+"self_attn.o_proj.weight", l.wo, 0, c.Dim)
		vec(p+"post_attention_layernorm.weight", l.ffnNorm)
		mat(p+"mlp.gate_proj.weight", l.w13, 0, c.Hidden)
		mat(p+"mlp.up_proj.weight", l.w13, c.Hidden, 2*c.Hidden)
		mat(p+"mlp.down_proj.weight", l.w2, 0, c.Dim)
	}
	vec("model.norm.weight", lay.norm)
	mat("lm_head.weight", lay.head, 0, c.Vocab)
	return ts
}

// importWeights replaces m's weights with those of the model.safetensors
// that Export wrote in dir (F16, so each weight is rounded to F16's
// precision). Every tensor of m's architecture must be there with its
// shape, and no other.
func importWeights(m *Model, dir string) error {
	path := filepath.Join(dir, "model.safetensors")
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	sf, err := safetensors.Parse(f, fi.Size())
	if err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	ts := m.hfTensors()
	if len(sf.Tensors) != len(ts) {
		return fmt.Errorf("%w: %s holds %d tensors, this run's model has %d", ErrCheckpoint, path, len(sf.Tensors), len(ts))
	}
	for _, t := range ts {
		info, ok := sf.Tensor(t.name)
		switch {
		case !ok:
			return fmt.Errorf("%w: %s has no tensor %s", ErrCheckpoint, path, t.name)
		case info.DType != safetensors.F16 || !slices.Equal(info.Shape, t.shape):
			return fmt.Errorf("%w: %s: tensor %s is %s %v, this run's model needs F16 %v",
				ErrCheckpoint, path, t.name, info.DType, info.Shape, t.shape)
		}
		b := make([]byte, info.Size)
		if _, err := f.ReadAt(b, info.Offset); err != nil {
			return fmt.Errorf("train: %s: tensor %s: %w", path, t.name, err)
		}
		h := make([]uint16, len(t.w))
		for i := range h {
			h[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		simd.F16ToF32(t.w, h)
	}
	return nil
}

// exportAtomic exports to a temporary sibling of dst and renames it into
// place, so that dst is always either the old or the new complete model.
func exportAtomic(dst string, m *Model) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp*")
	if err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := Export(tmp, m); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	old := dst + ".old"
	os.RemoveAll(old)
	if err := os.Rename(dst, old); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("train: export: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("train: export: %w", err)
	}
	syncDir(filepath.Dir(dst))
	return os.RemoveAll(old)
}

// tokenizerJSON is the probe's tokenizer.json: a byte-level BPE with no
// merges (token b is byte b), the three specials at 256–258, unused
// specials up to vocab, and a template that prepends BOS.
func tokenizerJSON(vocab int) map[string]any {
	v := map[string]int{}
	for b := 0; b < 256; b++ {
		v[tokenizer.ByteLevelToken(byte(b))] = b
	}
	special := func(id int, text string) map[string]any {
		return map[string]any{"id": id, "content": text, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}
	}
	added := []map[string]any{special(BOS, BOSToken), special(EOS, EOSToken), special(PAD, PADToken)}
	for id := ByteVocab; id < vocab; id++ {
		added = append(added, special(id, fmt.Sprintf("<|unused%d|>", id-ByteVocab)))
	}
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false,
			"trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": BOSToken, "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": BOSToken, "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": BOSToken, "type_id": 1}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{BOSToken: map[string]any{"id": BOSToken, "ids": []int{BOS}, "tokens": []string{BOSToken}}},
		},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": v, "merges": []string{}},
	}
}
