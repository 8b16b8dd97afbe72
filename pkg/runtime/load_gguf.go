package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/internal/mmap"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/tensor"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

func loadGGUF(_ context.Context, f *mmap.File, path string) (*Model, error) {
	gf, err := gguf.Parse(f, f.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := modelFromGGUF(gf, f.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Path, m.Format = path, "gguf"
	return m, nil
}

func modelFromGGUF(gf *gguf.File, data []byte) (*Model, error) {
	arch, err := gf.String("general.architecture")
	if err != nil {
		return nil, err
	}
	fam, a := lookupArch(func(a *Arch) bool { return a.Name == arch })
	if n, err := gf.Uint(arch + ".expert_count"); err == nil && n > 0 {
		if f, b := lookupArch(func(a *Arch) bool { return a.GGUF == arch }); f != nil {
			fam, a = f, b // "llama" with experts: Mixtral
		}
	}
	if fam == nil {
		return nil, fmt.Errorf("%w: architecture %q (kvq runs %s)", ErrUnsupported, arch, archNames(false))
	}
	neox := a.GGUFNeoX
	var errs []error
	raw := map[string]declared{} // the sizes as written, for checkSizes
	u := func(key string) int {
		v, err := gf.Uint(arch + "." + key)
		if err != nil {
			errs = append(errs, err)
		}
		raw[key] = declUint(arch+"."+key, v)
		return int(min(v, 1<<31))
	}
	uOpt := func(key string, def int) int {
		if _, ok := gf.Get(arch + "." + key); !ok {
			return def
		}
		return u(key)
	}
	fOpt := func(key string, def float64) float64 {
		if _, ok := gf.Get(arch + "." + key); !ok {
			return def
		}
		v, err := gf.Float(arch + "." + key)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	c := Config{Arch: a.Name, RopeNeoX: neox}
	c.Dim = u("embedding_length")
	c.Hidden = u("feed_forward_length")
	c.Layers = u("block_count")
	c.Heads = u("attention.head_count")
	c.KVHeads = uOpt("attention.head_count_kv", c.Heads)
	c.ContextLen = uOpt("context_length", 0)
	if _, ok := gf.Get(arch + ".context_length"); ok && c.ContextLen == 0 {
		// Absent, the context is unknown; written as 0, the file is wrong
		// (generation would run on with no bound).
		errs = append(errs, fmt.Errorf("%w: %s.context_length is 0", ErrModel, arch))
	}
	c.RMSEps = float32(fOpt("attention.layer_norm_rms_epsilon", 1e-5))
	c.RopeTheta = fOpt("rope.freq_base", 10000)
	if c.Heads > 0 {
		c.HeadDim = uOpt("attention.key_length", c.Dim/c.Heads)
	}
	c.RopeDim = uOpt("rope.dimension_count", c.HeadDim)
	c.SlidingWindow = uOpt("attention.sliding_window", 0)
	if st, err := gf.String(arch + ".rope.scaling.type"); err == nil && st != "none" && st != "" {
		switch st {
		case "linear":
			c.Scaling = RopeScaling{Type: "linear", Factor: fOpt("rope.scaling.factor", 1)}
		case "yarn":
			c.Scaling = ggufYarn(fOpt, c.ContextLen)
			if !(c.Scaling.Factor > 0) || c.Scaling.OriginalContext <= 0 {
				errs = append(errs, fmt.Errorf("%w: yarn rope scaling with factor %v and original context %d", ErrModel, c.Scaling.Factor, c.Scaling.OriginalContext))
			}
		default:
			errs = append(errs, fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, st))
		}
	}
	// LongRoPE (Phi-3): the factors are the tensors rope_factors_short
	// and rope_factors_long, read below.
	origCtx := uOpt("rope.scaling.original_context_length", 0)
	attnFactor := fOpt("rope.scaling.attn_factor", 0)
	if c.Experts = uOpt("expert_count", 0); c.Experts > 0 {
		c.ExpertsUsed = u("expert_used_count")
		c.ExpertHidden = uOpt("expert_feed_forward_length", c.Hidden)
		c.Routing = a.Routing
		if _, ok := gf.Get(arch + ".expert_weights_norm"); ok && c.Routing == backend.SoftmaxTopKNorm {
			if norm, err := gf.Bool(arch + ".expert_weights_norm"); err != nil {
				errs = append(errs, err)
			} else if !norm {
				c.Routing = backend.SoftmaxTopK
			}
		}
		errs = append(errs, c.checkExpertCounts())
	}
	if fam == &gemmaFamily {
		if err := gemmaGGUF(&c, gf, fOpt); err != nil {
			errs = append(errs, err)
		}
	}
	if fam == &gptossFamily {
		gptossGGUFConfig(&c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tokens, err := gf.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	c.Vocab = uOpt("vocab_size", len(tokens))

	tensors := make(map[string]gguf.TensorInfo, len(gf.Tensors))
	names := make([]string, 0, len(gf.Tensors))
	for _, t := range gf.Tensors {
		tensors[t.Name] = t
		names = append(names, t.Name)
	}
	if err := checkSizes(ggufSizes(arch, raw, len(tokens)), fileTensors{
		shape: func(name string) (rows, cols int64, ok bool) {
			t, ok := tensors[name]
			switch {
			case !ok || len(t.Dims) == 0 || len(t.Dims) > 2:
				return 0, 0, false
			case len(t.Dims) == 1:
				return 1, int64(t.Dims[0]), true
			}
			return int64(t.Dims[1]), int64(t.Dims[0]), true
		},
		layers: layerIndices(names, "blk."),
		embed:  "token_embd.weight",
		q:      func(i int) string { return fmt.Sprintf("blk.%d.attn_q.weight", i) },
		k:      func(i int) string { return fmt.Sprintf("blk.%d.attn_k.weight", i) },
		gate:   func(i int) string { return fmt.Sprintf("blk.%d.ffn_gate.weight", i) },
	}); err != nil {
		return nil, err
	}

	if c.Experts > 0 { // the layers are checked against the tensors now
		for li := 0; li < c.Layers; li++ {
			if _, ok := tensors[fmt.Sprintf("blk.%d.ffn_gate_inp.weight", li)]; !ok {
				c.DenseLayers = append(c.DenseLayers, li) // no router: a dense MLP
			}
		}
	}
	m := &Model{Config: c}
	weight := func(name string, optional bool) *tensor.Weight {
		t, ok := tensors[name]
		if !ok {
			if !optional {
				errs = append(errs, fmt.Errorf("%w: missing tensor %s", ErrModel, name))
			}
			return nil
		}
		var dt tensor.DType
		switch t.Type {
		case gguf.F32:
			dt = tensor.F32
		case gguf.F16:
			dt = tensor.F16
		case gguf.BF16:
			dt = tensor.BF16
		case gguf.Q80:
			dt = tensor.Q80
		default:
			var ok bool
			if dt, ok = ggufBlockTypes[t.Type]; !ok {
				errs = append(errs, fmt.Errorf("%w: tensor %s has type %v (kvq reads %s)", ErrUnsupported, name, t.Type, ggufTypesRead))
				return nil
			}
		}
		if len(t.Dims) > 2 || (len(t.Dims) == 2 && t.Dims[1] == 0) || len(t.Dims) == 0 {
			errs = append(errs, fmt.Errorf("%w: tensor %s has %d dims %v, want a matrix", ErrModel, name, len(t.Dims), t.Dims))
			return nil
		}
		cols, rows := int(t.Dims[0]), 1
		if len(t.Dims) == 2 {
			rows = int(t.Dims[1])
		}
		w, err := newWeight(name, dt, rows, cols, data[t.Offset:t.Offset+t.Size])
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		return w
	}
	// experts cuts a stacked [Experts][rows][cols] tensor into one view
	// per expert. Only the first stack whose dims disagree with the header
	// is reported (they all do when the header's counts are wrong).
	badStack := false
	experts := func(name string, sh []int) []*tensor.Weight {
		if badStack {
			return nil
		}
		t, ok := tensors[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: missing tensor %s", ErrModel, name))
			return nil
		}
		dt, ok := ggufDTypes[t.Type]
		if !ok {
			dt, ok = ggufBlockTypes[t.Type]
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%w: tensor %s has type %v (kvq reads %s)", ErrUnsupported, name, t.Type, ggufTypesRead))
			return nil
		}
		if len(t.Dims) != 3 || t.Dims[0] != uint64(sh[1]) || t.Dims[1] != uint64(sh[0]) || t.Dims[2] != uint64(c.Experts) {
			errs = append(errs, fmt.Errorf("%w: tensor %s has dims %v, the header implies [%d %d %d]", ErrModel, name, t.Dims, sh[1], sh[0], c.Experts))
			badStack = true
			return nil
		}
		ws, err := splitExperts(name, dt, c.Experts, sh[0], sh[1], data[t.Offset:t.Offset+t.Size])
		if err != nil {
			errs = append(errs, err)
		}
		return ws
	}
	vector := func(name string, optional bool) []float32 {
		v, err := asVector(weight(name, optional))
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	m.Embed = weight("token_embd.weight", false)
	m.Norm = vector("output_norm.weight", false)
	m.Output = weight("output.weight", true)
	if m.Output == nil {
		m.Output = m.Embed
		m.TiedEmbeddings = true
	}
	m.RopeFactors = vector("rope_freqs.weight", true)
	if short, long := vector("rope_factors_short.weight", true), vector("rope_factors_long.weight", true); short != nil || long != nil {
		if arch != "phi3" {
			return nil, fmt.Errorf("%w: rope_factors_short/long in a %q file (kvq runs LongRoPE on phi3)", ErrUnsupported, arch)
		}
		// As llama.cpp: the original context defaults to the context length.
		if origCtx == 0 {
			origCtx = c.ContextLen
		}
		if origCtx <= 0 {
			return nil, fmt.Errorf("%w: LongRoPE factors with no %s.rope.scaling.original_context_length", ErrModel, arch)
		}
		m.Scaling = RopeScaling{Type: "longrope", Factor: float64(c.ContextLen) / float64(origCtx), OriginalContext: origCtx,
			ShortFactor: f64s(short), LongFactor: f64s(long), AttnFactor: attnFactor}
	}
	m.Layers = make([]Layer, max(0, c.Layers))
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		for _, t := range fam.Tensors {
			switch {
			case t.In != nil && !t.In(&c, i):
			case t.Experts != nil:
				*t.Experts(l) = experts(p+t.GGUF, t.Shape(&c))
			case t.Parts != nil:
				errs = append(errs, t.split(weight(p+t.GGUF, t.Optional), l, &m.Config))
			case t.Matrix != nil:
				*t.Matrix(l) = weight(p+t.GGUF, t.Optional)
			default:
				*t.Vector(l) = vector(p+t.GGUF, t.Optional)
			}
		}
	}
	if err := joinFirst(errs); err != nil {
		return nil, err
	}
	if err := m.Prepare(); err != nil {
		return nil, err
	}
	if m.Tokenizer, err = ggufTokenizer(gf, tokens); err != nil {
		return nil, err
	}
	if t, err := gf.String("tokenizer.chat_template"); err == nil {
		m.ChatTemplate = t
	}
	m.StopIDs = []int{}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if n, err := gf.Uint(key); err == nil && n < uint64(len(tokens)) {
			m.StopIDs = append(m.StopIDs, int(n))
		}
	}
	if m.Tokenizer.VocabSize() != c.Vocab {
		return nil, fmt.Errorf("%w: tokenizer has %d tokens, model vocabulary %d", ErrModel, m.Tokenizer.VocabSize(), c.Vocab)
	}
	return m, nil
}

// ggufSizes returns the sizes of a GGUF header, each under its key; raw
// holds the keys read (without the architecture prefix), and absent
// optional ones fall back as modelFromGGUF's defaults do.
func ggufSizes(arch string, raw map[string]declared, tokens int) headerSizes {
	get := func(key string, def declared) declared {
		if d, ok := raw[key]; ok {
			return d
		}
		return def
	}
	h := headerSizes{
		layers: raw["block_count"], dim: raw["embedding_length"], hidden: raw["feed_forward_length"],
		heads: raw["attention.head_count"], context: get("context_length", declInt(arch+".context_length", 0)),
		vocab: get("vocab_size", declInt("len(tokenizer.ggml.tokens)", tokens)),
	}
	h.kvHeads = get("attention.head_count_kv", h.heads)
	if d, ok := raw["attention.key_length"]; ok {
		h.headDim = &d
	}
	return h
}

// asVector returns a [1][n] weight as float32 values (norms and biases are F32
// in most files; F16/BF16 ones are converted). A nil weight gives nil.
func asVector(w *tensor.Weight) ([]float32, error) {
	if w == nil {
		return nil, nil
	}
	if w.Rows != 1 {
		return nil, fmt.Errorf("%w: tensor %s has shape [%d %d], want a vector", ErrModel, w.Name, w.Rows, w.Cols)
	}
	if w.DType == tensor.F32 {
		return w.F32, nil
	}
	v := make([]float32, w.Cols)
	cpuRow(v, w, 0)
	return v, nil
}

func ggufTokenizer(gf *gguf.File, tokens []string) (*tokenizer.Tokenizer, error) {
	model, err := gf.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	v := tokenizer.Vocab{Tokens: tokens, BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	switch model {
	case "llama":
		v.Kind = tokenizer.SentencePieceBPE
		v.SpaceIsMetaspace = true
		v.AddBOS = true
		v.AddSpacePrefix = true
		if v.Scores, err = gf.Float32s("tokenizer.ggml.scores"); err != nil {
			return nil, err
		}
	case "gpt2":
		v.Kind = tokenizer.ByteLevelBPE
		if v.Merges, err = gf.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
		v.PreTokenizer = "gpt2"
		if pre, err := gf.String("tokenizer.ggml.pre"); err == nil {
			switch pre {
			case "llama-bpe", "llama3", "smaug-bpe", "dbrx": // dbrx: cl100k's split, llama3's (OLMo 2, Phi-4)
				v.PreTokenizer = "llama3"
			case "qwen2", "qwen35":
				v.PreTokenizer = "qwen2"
			case "default", "gpt-2", "gpt2", "olmo":
			default:
				v.PreTokenizer = pre // New reports an unknown style by name
			}
		}
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q (kvq reads llama and gpt2)", ErrUnsupported, model)
	}
	if _, ok := gf.Get("tokenizer.ggml.token_type"); ok {
		types, err := gf.Int32s("tokenizer.ggml.token_type")
		if err != nil {
			return nil, err
		}
		v.Types = make([]tokenizer.TokenType, len(types))
		for i, t := range types {
			v.Types[i] = tokenizer.TokenType(t)
		}
	}
	id := func(key string, dst *int) error {
		if _, ok := gf.Get(key); !ok {
			return nil
		}
		n, err := gf.Uint(key)
		if err != nil {
			return err
		}
		if n == math.MaxUint32 { // llama.cpp writes -1 (no such token) as uint32
			return nil
		}
		*dst = int(min(n, 1<<31))
		return nil
	}
	flag := func(key string, dst *bool) error {
		if _, ok := gf.Get(key); !ok {
			return nil
		}
		b, err := gf.Bool(key)
		*dst = b
		return err
	}
	if err := errors.Join(
		id("tokenizer.ggml.bos_token_id", &v.BOS), id("tokenizer.ggml.eos_token_id", &v.EOS),
		id("tokenizer.ggml.unknown_token_id", &v.UNK), id("tokenizer.ggml.padding_token_id", &v.PAD),
		flag("tokenizer.ggml.add_bos_token", &v.AddBOS), flag("tokenizer.ggml.add_eos_token", &v.AddEOS),
		flag("tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix)); err != nil {
		return nil, err
	}
	return tokenizer.New(v)
}

var cpuRow = cpu.Row

// f64s widens v.
func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// ggufDTypes are the GGUF tensor types kvq reads, as weight dtypes.
var ggufDTypes = map[gguf.Type]tensor.DType{gguf.F32: tensor.F32, gguf.F16: tensor.F16, gguf.BF16: tensor.BF16, gguf.Q80: tensor.Q80}

// ggufBlockTypes maps the GGML block types kvq runs, besides q8_0, to
// weight dtypes (pkg/gguf decodes them; docs/weight-formats.md).
var ggufBlockTypes = map[gguf.Type]tensor.DType{
	gguf.Q40: tensor.Q40, gguf.Q41: tensor.Q41, gguf.Q50: tensor.Q50, gguf.Q51: tensor.Q51,
	gguf.Q2K: tensor.Q2K, gguf.Q3K: tensor.Q3K, gguf.Q4K: tensor.Q4K, gguf.Q5K: tensor.Q5K, gguf.Q6K: tensor.Q6K,
	gguf.IQ4NL: tensor.IQ4NL, gguf.IQ4XS: tensor.IQ4XS, gguf.MXFP4: tensor.MXFP4,
}

// ggufTypesRead lists the tensor types the GGUF loader accepts, for its
// error message.
const ggufTypesRead = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs and mxfp4"
