package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/internal/mmap"
	"github.com/kvqlabs/kvq/pkg/hfconfig"
	"github.com/kvqlabs/kvq/pkg/safetensors"
	"github.com/kvqlabs/kvq/pkg/tensor"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// hfConfig is the part of config.json the runtime reads.
type hfConfig struct {
	Architectures     []string        `json:"architectures"`
	ModelType         string          `json:"model_type"`
	HiddenSize        int             `json:"hidden_size"`
	IntermediateSize  int             `json:"intermediate_size"`
	NumLayers         int             `json:"num_hidden_layers"`
	NumHeads          int             `json:"num_attention_heads"`
	NumKVHeads        *int            `json:"num_key_value_heads"`
	HeadDim           *int            `json:"head_dim"`
	VocabSize         int             `json:"vocab_size"`
	MaxPosition       int             `json:"max_position_embeddings"`
	RMSNormEps        float64         `json:"rms_norm_eps"`
	RopeTheta         *float64        `json:"rope_theta"`
	RopeScaling       *hfRopeScaling  `json:"rope_scaling"`
	TieWordEmbeddings bool            `json:"tie_word_embeddings"`
	AttentionBias     bool            `json:"attention_bias"`
	SlidingWindow     *int            `json:"sliding_window"`
	UseSlidingWindow  *bool           `json:"use_sliding_window"`
	TorchDType        string          `json:"torch_dtype"`
	BOSTokenID        json.RawMessage `json:"bos_token_id"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	PartialRotary     *float64        `json:"partial_rotary_factor"`
	OriginalMaxPos    *int            `json:"original_max_position_embeddings"` // Phi-3
	// Mixture of experts: Mixtral's num_local_experts, Qwen3-MoE's
	// num_experts and the rest.
	NumLocalExperts   int   `json:"num_local_experts"`
	NumExperts        int   `json:"num_experts"`
	ExpertsPerTok     int   `json:"num_experts_per_tok"`
	MoEIntermediate   int   `json:"moe_intermediate_size"`
	NormTopKProb      *bool `json:"norm_topk_prob"`
	DecoderSparseStep *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int `json:"mlp_only_layers"`
	// GPT-OSS.
	LayerTypes  []string `json:"layer_types"`
	SwiGLULimit *float64 `json:"swiglu_limit"`
}

type hfRopeScaling struct {
	Type           string  `json:"type"`
	RopeType       string  `json:"rope_type"`
	Factor         float64 `json:"factor"`
	LowFreqFactor  float64 `json:"low_freq_factor"`
	HighFreqFactor float64 `json:"high_freq_factor"`
	OriginalMaxPos int     `json:"original_max_position_embeddings"`
	// longrope (su)
	ShortFactor     []float64 `json:"short_factor"`
	LongFactor      []float64 `json:"long_factor"`
	AttentionFactor *float64  `json:"attention_factor"`
	// YaRN.
	BetaFast float64 `json:"beta_fast"`
	BetaSlow float64 `json:"beta_slow"`
	Truncate *bool   `json:"truncate"`
}

// jsonError turns a JSON decoding error into one naming the file, line and
// column.
func jsonError(path string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off >= 0 {
		line := 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n"))
		col := int(off) - bytes.LastIndexByte(data[:min(int(off), len(data))], '\n')
		return fmt.Errorf("%w: %s:%d:%d: %v", ErrModel, path, line, col, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrModel, path, err)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(path, data, err)
	}
	return nil
}

// ids parses an id or a list of ids (eos_token_id may be either).
func ids(raw json.RawMessage) []int {
	if len(raw) == 0 {
		return nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}
	}
	var many []int
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

// loadHF loads a Hugging Face model directory.
func loadHF(ctx context.Context, dir string, opts LoadOptions) (*Model, error) {
	cfgPath := filepath.Join(dir, "config.json")
	// The checks every reader of config.json shares (pkg/hfconfig) come
	// before the fields are decoded, so that kvq estimate and the loader
	// refuse the same configs with the same words.
	var raw hfconfig.Object
	if err := readJSON(cfgPath, &raw); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no config.json: kvq reads Hugging Face model directories (config.json, *.safetensors, tokenizer.json)", ErrModel, dir)
		}
		return nil, err
	}
	text, multimodal, err := hfconfig.TextConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, cfgPath, err)
	}
	if !multimodal {
		text = raw
	}
	if err := hfconfig.Check(text); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, cfgPath, err)
	}
	var hc hfConfig
	if multimodal { // the text model's config (Gemma 3's text_config)
		err = decodeObject(cfgPath+" text_config", text, &hc)
	} else {
		err = readJSON(cfgPath, &hc)
	}
	if err != nil {
		return nil, err
	}
	var fam *Family
	var a *Arch
	for _, name := range hc.Architectures {
		if fam, a = lookupArch(func(a *Arch) bool { return a.HF == name }); fam != nil {
			break
		}
	}
	if fam == nil {
		return nil, fmt.Errorf("%w: %s: architectures %v (kvq runs %s)", ErrUnsupported, cfgPath, hc.Architectures, archNames(true))
	}
	arch := a.Name
	c := Config{
		Arch: arch, Dim: hc.HiddenSize, Hidden: hc.IntermediateSize, Layers: hc.NumLayers, Heads: hc.NumHeads,
		KVHeads: hc.NumHeads, Vocab: hc.VocabSize, ContextLen: hc.MaxPosition, RMSEps: float32(hc.RMSNormEps),
		RopeTheta: 10000, RopeNeoX: true, TiedEmbeddings: hc.TieWordEmbeddings,
	}
	if hc.NumKVHeads != nil {
		c.KVHeads = *hc.NumKVHeads
	}
	if c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if hc.HeadDim != nil {
		c.HeadDim = *hc.HeadDim
	}
	c.RopeDim = c.HeadDim
	if hc.PartialRotary != nil {
		c.RopeDim = int(float64(c.HeadDim) * *hc.PartialRotary)
	}
	if hc.RopeTheta != nil {
		c.RopeTheta = *hc.RopeTheta
	}
	if c.RMSEps == 0 {
		c.RMSEps = 1e-6
	}
	if rs := hc.RopeScaling; rs != nil {
		t := rs.RopeType
		if t == "" {
			t = rs.Type
		}
		switch t {
		case "", "default":
		case "linear":
			c.Scaling = RopeScaling{Type: "linear", Factor: rs.Factor}
		case "llama3":
			c.Scaling = RopeScaling{Type: "llama3", Factor: rs.Factor, LowFreqFactor: rs.LowFreqFactor, HighFreqFactor: rs.HighFreqFactor, OriginalContext: rs.OriginalMaxPos}
			if rs.Factor <= 0 || rs.LowFreqFactor <= 0 || rs.HighFreqFactor <= rs.LowFreqFactor || rs.OriginalMaxPos <= 0 {
				return nil, fmt.Errorf("%w: %s: llama3 rope_scaling needs factor, low_freq_factor < high_freq_factor and original_max_position_embeddings", ErrModel, cfgPath)
			}
		case "longrope", "su":
			if arch != "phi3" {
				return nil, fmt.Errorf("%w: %s: rope_scaling type %q on %s (kvq runs LongRoPE on Phi-3)", ErrUnsupported, cfgPath, t, a.HF)
			}
			if c.Scaling, err = hfLongRoPE(hc); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrModel, cfgPath, err)
			}
		case "yarn":
			c.Scaling = hfYarn(rs, hc.MaxPosition)
			if !(rs.Factor > 0) || c.Scaling.OriginalContext <= 0 {
				return nil, fmt.Errorf("%w: %s: yarn rope_scaling needs factor and original_max_position_embeddings (or max_position_embeddings)", ErrModel, cfgPath)
			}
		default:
			return nil, fmt.Errorf("%w: %s: rope_scaling type %q (kvq supports linear, llama3, longrope and yarn)", ErrUnsupported, cfgPath, t)
		}
		if c.Scaling.Type == "linear" && c.Scaling.Factor <= 0 {
			return nil, fmt.Errorf("%w: %s: rope_scaling factor %v", ErrModel, cfgPath, rs.Factor)
		}
	}
	if hc.SlidingWindow != nil && *hc.SlidingWindow > 0 {
		// Qwen2 configs carry a sliding_window that applies only with
		// use_sliding_window; Mistral applies it whenever it is set.
		if a.HFWindow || hc.UseSlidingWindow != nil && *hc.UseSlidingWindow {
			c.SlidingWindow = *hc.SlidingWindow
		}
	}
	if fam.moe() {
		hfExperts(&c, hc, a)
		if err := c.checkExpertCounts(); err != nil {
			return nil, fmt.Errorf("%s: %w", cfgPath, err)
		}
	}
	if fam == &gemmaFamily {
		if err := gemmaHF(&c, cfgPath, text); err != nil {
			return nil, err
		}
	}
	if fam == &gptossFamily {
		if err := gptossHFConfig(&c, hc, cfgPath); err != nil {
			return nil, err
		}
	}
	m := &Model{Config: c, Path: dir, Format: "safetensors"}
	files, err := openShards(ctx, dir, opts.Mmap)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			for _, f := range files {
				f.mm.Close()
			}
		}
	}()
	where, err := shardOf(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	prefix := hfPrefix(a, where)
	if err := checkSizes(hfSizes(hc), hfTensors(files, where, prefix)); err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := m.fromSafetensors(files, where, fam, a, prefix); err != nil {
		return nil, err
	}
	for _, f := range files {
		m.closers = append(m.closers, f.mm)
	}
	if a.NormPlusOne {
		m.addOneToNorms()
	}
	if err := m.Prepare(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if m.Tokenizer, m.StopIDs, m.ChatTemplate, err = loadHFTokenizer(dir, hc); err != nil {
		return nil, err
	}
	if m.Tokenizer.VocabSize() > c.Vocab {
		return nil, fmt.Errorf("%w: %s: tokenizer has %d tokens, more than the model's vocab_size %d", ErrModel, dir, m.Tokenizer.VocabSize(), c.Vocab)
	}
	ok = true
	return m, nil
}

type shard struct {
	path string
	mm   *mmap.File
	st   *safetensors.File
}

// openShards opens model.safetensors, or every shard named by
// model.safetensors.index.json, as weights (mmap.Weights; mapOnly: mapped
// in place).
func openShards(ctx context.Context, dir string, mapOnly bool) ([]shard, error) {
	single := filepath.Join(dir, "model.safetensors")
	index := filepath.Join(dir, "model.safetensors.index.json")
	var names []string
	switch {
	case exists(index):
		f, err := os.Open(index)
		if err != nil {
			return nil, err
		}
		ix, err := safetensors.ParseIndex(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", index, err)
		}
		names = ix.Files()
		for _, n := range names {
			if !exists(filepath.Join(dir, n)) {
				return nil, fmt.Errorf("%w: %s names shard %s, which is missing", ErrModel, index, n)
			}
		}
	case exists(single):
		names = []string{"model.safetensors"}
	default:
		if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) == 1 {
			names = []string{filepath.Base(m[0])}
			break
		}
		if exists(filepath.Join(dir, "pytorch_model.bin")) || exists(filepath.Join(dir, "pytorch_model.bin.index.json")) {
			return nil, fmt.Errorf("%w: %s holds only pytorch_model.bin: kvq loads safetensors only, because PyTorch .bin files are Python pickles that can run arbitrary code when loaded (convert with: python -c \"from transformers import AutoModelForCausalLM as M; M.from_pretrained('%s').save_pretrained('%s', safe_serialization=True)\")", ErrUnsupported, dir, dir, dir)
		}
		return nil, fmt.Errorf("%w: %s has no model.safetensors or model.safetensors.index.json", ErrModel, dir)
	}
	var out []shard
	for _, n := range names {
		p := filepath.Join(dir, n)
		mm, err := mmap.Weights(ctx, p, mapOnly)
		if err != nil {
			for _, s := range out {
				s.mm.Close()
			}
			return nil, err
		}
		st, err := safetensors.Parse(mm, mm.Size())
		if err != nil {
			mm.Close()
			for _, s := range out {
				s.mm.Close()
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, shard{path: p, mm: mm, st: st})
	}
	return out, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// shardOf maps each tensor name to the shard that holds it.
func shardOf(files []shard) (map[string]int, error) {
	where := map[string]int{}
	for i, f := range files {
		for _, t := range f.st.Tensors {
			if _, dup := where[t.Name]; dup {
				return nil, fmt.Errorf("%w: tensor %s appears in two shards", ErrModel, t.Name)
			}
			where[t.Name] = i
		}
	}
	return where, nil
}

// hfSizes returns the sizes config.json declares, each under its key.
func hfSizes(hc hfConfig) headerSizes {
	h := headerSizes{
		layers: declInt("num_hidden_layers", hc.NumLayers), dim: declInt("hidden_size", hc.HiddenSize),
		hidden: declInt("intermediate_size", hc.IntermediateSize), heads: declInt("num_attention_heads", hc.NumHeads),
		vocab: declInt("vocab_size", hc.VocabSize), context: declInt("max_position_embeddings", hc.MaxPosition),
	}
	h.kvHeads = h.heads
	if hc.NumKVHeads != nil {
		h.kvHeads = declInt("num_key_value_heads", *hc.NumKVHeads)
	}
	if hc.HeadDim != nil {
		d := declInt("head_dim", *hc.HeadDim)
		h.headDim = &d
	}
	return h
}

// hfPrefix is the prefix of the text model's tensor names: "model.", or
// the first of the architecture's HFPrefixes whose embedding the
// checkpoint holds.
func hfPrefix(a *Arch, where map[string]int) string {
	for _, p := range a.HFPrefixes {
		if _, ok := where[p+"embed_tokens.weight"]; ok {
			return p
		}
	}
	return "model."
}

// decodeObject decodes a config object (a part of path) into v.
func decodeObject(path string, o hfconfig.Object, v any) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrModel, path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrModel, path, err)
	}
	return nil
}

// hfTensors describes the safetensors tensors for checkSizes; prefix
// starts the text model's names ("model.").
func hfTensors(files []shard, where map[string]int, prefix string) fileTensors {
	names := make([]string, 0, len(where))
	for n := range where {
		names = append(names, n)
	}
	return fileTensors{
		shape: func(name string) (rows, cols int64, ok bool) {
			i, ok := where[name]
			if !ok {
				return 0, 0, false
			}
			t, _ := files[i].st.Tensor(name)
			switch len(t.Shape) {
			case 1:
				return 1, t.Shape[0], true
			case 2:
				return t.Shape[0], t.Shape[1], true
			}
			return 0, 0, false
		},
		layers: layerIndices(names, prefix+"layers."),
		embed:  prefix + "embed_tokens.weight",
		q:      func(i int) string { return fmt.Sprintf("%slayers.%d.self_attn.q_proj.weight", prefix, i) },
		k:      func(i int) string { return fmt.Sprintf("%slayers.%d.self_attn.k_proj.weight", prefix, i) },
		gate:   func(i int) string { return fmt.Sprintf("%slayers.%d.mlp.gate_proj.weight", prefix, i) },
	}
}

// fromSafetensors reads the tensors the family names (LayerTensor.HF); where
// says which shard holds each tensor; prefix starts the text model's names
// ("model.").
func (m *Model) fromSafetensors(files []shard, where map[string]int, fam *Family, a *Arch, prefix string) error {
	var errs []error
	weight := func(name string, optional bool) *tensor.Weight {
		i, ok := where[name]
		if !ok {
			if !optional {
				errs = append(errs, fmt.Errorf("%w: missing tensor %s", ErrModel, name))
			}
			return nil
		}
		f := files[i]
		t, _ := f.st.Tensor(name)
		var dt tensor.DType
		switch t.DType {
		case "F32":
			dt = tensor.F32
		case "F16":
			dt = tensor.F16
		case "BF16":
			dt = tensor.BF16
		default:
			errs = append(errs, fmt.Errorf("%w: %s: tensor %s has dtype %s (kvq reads F32, F16 and BF16)", ErrUnsupported, f.path, name, t.DType))
			return nil
		}
		rows, cols := 1, 0
		switch len(t.Shape) {
		case 1:
			cols = int(t.Shape[0])
		case 2:
			rows, cols = int(t.Shape[0]), int(t.Shape[1])
		default:
			errs = append(errs, fmt.Errorf("%w: %s: tensor %s has shape %v, want a matrix or vector", ErrModel, f.path, name, t.Shape))
			return nil
		}
		w, err := newWeight(name, dt, rows, cols, f.mm.Data[t.Offset:t.Offset+t.Size])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.path, err))
			return nil
		}
		return w
	}
	vector := func(name string, optional bool) []float32 {
		v, err := asVector(weight(name, optional))
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	get := func(name string) (hfTensor, bool) {
		i, ok := where[name]
		if !ok {
			return hfTensor{}, false
		}
		f := files[i]
		t, _ := f.st.Tensor(name)
		return hfTensor{Name: name, Path: f.path, DType: string(t.DType), Shape: t.Shape, Data: f.mm.Data[t.Offset : t.Offset+t.Size]}, true
	}
	m.Embed = weight(prefix+"embed_tokens.weight", false)
	m.Norm = vector(prefix+"norm.weight", false)
	m.Output = weight("lm_head.weight", true)
	if m.Output == nil {
		m.Output = m.Embed
		m.TiedEmbeddings = true
	}
	m.Layers = make([]Layer, max(0, m.Config.Layers))
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("%slayers.%d.", prefix, i)
		for _, t := range fam.Tensors {
			optional := t.Optional && !slices.Contains(a.HFRequired, t.HF)
			switch {
			case t.HF == "": // fam.HFLayer's
			case t.In != nil && !t.In(&m.Config, i):
			case t.Experts != nil:
				ws := make([]*tensor.Weight, m.Config.Experts)
				for e := range ws {
					ws[e] = weight(p+fmt.Sprintf(t.HF, e), false)
				}
				*t.Experts(l) = ws
			case t.Parts != nil:
				errs = append(errs, t.split(weight(p+t.HF, optional), l, &m.Config))
			case t.Matrix != nil:
				*t.Matrix(l) = weight(p+t.HF, optional)
			default:
				*t.Vector(l) = vector(p+t.HF, optional)
			}
		}
		if fam.HFLayer != nil {
			errs = append(errs, fam.HFLayer(l, &m.Config, p, get))
		}
	}
	return joinFirst(errs)
}

// loadHFTokenizer reads tokenizer.json, tokenizer_config.json and
// generation_config.json.
func loadHFTokenizer(dir string, hc hfConfig) (*tokenizer.Tokenizer, []int, string, error) {
	tp := filepath.Join(dir, "tokenizer.json")
	tf, err := os.Open(tp)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, "", fmt.Errorf("%w: %s has no tokenizer.json (kvq reads the Hugging Face tokenizers format)", ErrModel, dir)
		}
		return nil, nil, "", err
	}
	defer tf.Close()
	var cfg io.Reader
	cp := filepath.Join(dir, "tokenizer_config.json")
	if cf, err := os.Open(cp); err == nil {
		defer cf.Close()
		cfg = cf
	}
	v, hcfg, err := tokenizer.ParseHF(tf, cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", tp, err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", tp, err)
	}
	stops := map[int]bool{}
	if e := tok.EOS(); e >= 0 {
		stops[e] = true
	}
	for _, id := range ids(hc.EOSTokenID) {
		stops[id] = true
	}
	var gen struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	gp := filepath.Join(dir, "generation_config.json")
	if exists(gp) {
		if err := readJSON(gp, &gen); err != nil {
			return nil, nil, "", err
		}
		for _, id := range ids(gen.EOS) {
			stops[id] = true
		}
	}
	var stopIDs []int
	for id := range stops {
		stopIDs = append(stopIDs, id)
	}
	sort.Ints(stopIDs)
	tmpl := strings.TrimSpace(hcfg.ChatTemplate)
	if tmpl == "" {
		// Newer checkpoints (GPT-OSS) ship the template as its own file.
		jp := filepath.Join(dir, "chat_template.jinja")
		if b, err := os.ReadFile(jp); err == nil {
			tmpl = strings.TrimSpace(string(b))
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, "", err
		}
	}
	return tok, stopIDs, tmpl, nil
}

// hfLongRoPE reads Phi-3's LongRoPE scaling as transformers does
// (_compute_longrope_parameters): the original context is the top-level
// original_max_position_embeddings (else rope_scaling's, else
// max_position_embeddings), the factor the ratio of max_position_embeddings
// to it, and the attention factor rope_scaling's attention_factor or
// sqrt(1 + ln(factor)/ln(original)) when the factor exceeds 1.
func hfLongRoPE(hc hfConfig) (RopeScaling, error) {
	rs := hc.RopeScaling
	orig := rs.OriginalMaxPos
	if hc.OriginalMaxPos != nil {
		orig = *hc.OriginalMaxPos
	}
	if orig == 0 {
		orig = hc.MaxPosition
	}
	if orig <= 0 || len(rs.ShortFactor) == 0 || len(rs.LongFactor) == 0 {
		return RopeScaling{}, fmt.Errorf("longrope rope_scaling needs short_factor, long_factor and original_max_position_embeddings")
	}
	s := RopeScaling{Type: "longrope", Factor: float64(hc.MaxPosition) / float64(orig), OriginalContext: orig,
		ShortFactor: rs.ShortFactor, LongFactor: rs.LongFactor, AttnFactor: 1}
	switch {
	case rs.AttentionFactor != nil:
		s.AttnFactor = *rs.AttentionFactor
	case s.Factor > 1:
		s.AttnFactor = math.Sqrt(1 + math.Log(s.Factor)/math.Log(float64(orig)))
	}
	return s, nil
}
