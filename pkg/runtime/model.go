package runtime

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/tensor"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// Sentinel errors.
var (
	ErrFormat      = kvqerr.New("runtime: unrecognised model file")
	ErrUnsupported = kvqerr.New("runtime: unsupported model")
	ErrModel       = kvqerr.New("runtime: malformed model")
)

// RopeScaling describes RoPE frequency scaling.
type RopeScaling struct {
	Type            string  // "", "linear", "llama3", "longrope" or "yarn"
	Factor          float64 // linear, llama3 and yarn; longrope: the context's ratio to OriginalContext
	LowFreqFactor   float64 // llama3
	HighFreqFactor  float64 // llama3
	OriginalContext int     // llama3, longrope and yarn: original_max_position_embeddings
	// longrope (Phi-3, "su"): the inverse frequencies are divided by
	// ShortFactor at every position, as Hugging Face and llama.cpp do up
	// to OriginalContext (they switch to LongFactor past it: kvq's caches
	// hold keys of one rotation).
	ShortFactor, LongFactor []float64
	// YaRN (rope_yarn.go): the correction range's rotations (beta_fast,
	// beta_slow), whether its bounds are rounded outward (Truncate: HF's
	// default and llama.cpp's only behaviour; GPT-OSS's config says
	// false).
	BetaFast, BetaSlow float64
	Truncate           bool
	// AttnFactor: longrope's factor on the rotated dimensions of q and k
	// (0: none); yarn's factor on q and k after RoPE (0: HF's default
	// 0.1·ln(factor)+1).
	AttnFactor float64
}

// Config fixes the architecture of a model.
type Config struct {
	Arch       string // a registered Arch.Name (family.go): "llama", "mistral", "qwen2", "qwen3"
	Dim        int    // hidden size
	Hidden     int    // MLP intermediate size
	Layers     int
	Heads      int
	KVHeads    int
	HeadDim    int
	Vocab      int
	ContextLen int
	RMSEps     float32
	RopeTheta  float64
	RopeDim    int  // rotated dimensions per head (HeadDim unless partial rotary)
	RopeNeoX   bool // pairs (i, i+d/2) instead of (2i, 2i+1)
	Scaling    RopeScaling
	// SlidingWindow > 0 limits attention to the last SlidingWindow positions.
	SlidingWindow int
	// SlidingLayers, when set, are the layers SlidingWindow applies to
	// (nil: every layer, as Mistral's; Gemma's local layers; GPT-OSS's
	// even layers, from layer_types).
	SlidingLayers []bool
	// TiedEmbeddings: the output head is the token embedding.
	TiedEmbeddings bool
	// Mixture of experts (moe.go; Experts 0: every FFN is dense). Each
	// token of an expert layer goes to ExpertsUsed of Experts SwiGLU
	// experts of intermediate size ExpertHidden, weighted as Routing
	// orders the router's softmax and top-k. DenseLayers are the layers
	// whose FFN is a dense MLP of size Hidden all the same (Qwen3-MoE's
	// mlp_only_layers and decoder_sparse_step).
	Experts, ExpertsUsed, ExpertHidden int
	Routing                            backend.Routing
	DenseLayers                        []int

	// The Gemma families' settings (family_gemma.go); zero elsewhere.
	// AttnSoftcap > 0 caps attention scores and FinalSoftcap > 0 the
	// logits, at c·tanh(x/c). QueryScalar > 0 makes the attention scale
	// 1/√QueryScalar (query_pre_attn_scalar; 0: 1/√HeadDim).
	AttnSoftcap, FinalSoftcap float32
	QueryScalar               float64
	// RopeLocalTheta > 0 is the sliding layers' RoPE base, unscaled
	// (Gemma 3's rope_local_base_freq); Scaling then applies to the other
	// layers only.
	RopeLocalTheta float64
	// SwiGLULimit > 0 makes the experts' activation GPT-OSS's clamped
	// SwiGLU with SwiGLUAlpha (backend.Experts).
	SwiGLUAlpha, SwiGLULimit float32
}

// LocalLayers lists the sliding-window layers of a model that mixes them
// with global ones (SlidingLayers set: Gemma), as Geometry marks them; nil
// for other models (Mistral's window is every layer's).
func (m *Model) LocalLayers() []int {
	if m.SlidingLayers == nil {
		return nil
	}
	g := m.Geometry()
	out := []int{}
	for li := range m.Layers {
		if g.Sliding.Has(li) {
			out = append(out, li)
		}
	}
	return out
}

// Sliding reports whether layer li attends over a sliding window.
func (c *Config) Sliding(li int) bool {
	if c.SlidingWindow <= 0 {
		return false
	}
	return c.SlidingLayers == nil || li < len(c.SlidingLayers) && c.SlidingLayers[li]
}

// Validate checks the config's internal consistency.
func (c *Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0:
		var bad []string
		for _, f := range []struct {
			name string
			v    int
		}{{"hidden size", c.Dim}, {"intermediate size", c.Hidden}, {"layers", c.Layers}, {"attention heads", c.Heads},
			{"KV heads", c.KVHeads}, {"head size", c.HeadDim}, {"vocabulary", c.Vocab}} {
			if f.v <= 0 {
				bad = append(bad, fmt.Sprintf("%s %d", f.name, f.v))
			}
		}
		return fmt.Errorf("%w: %s must be positive", ErrModel, strings.Join(bad, ", "))
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("%w: %d attention heads is not a multiple of %d KV heads", ErrModel, c.Heads, c.KVHeads)
	case c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0:
		return fmt.Errorf("%w: rotary dimension %d for head size %d", ErrModel, c.RopeDim, c.HeadDim)
	case !(c.RopeTheta > 0):
		return fmt.Errorf("%w: RoPE theta %v", ErrModel, c.RopeTheta)
	case !(c.RMSEps > 0):
		return fmt.Errorf("%w: RMS norm epsilon %v", ErrModel, c.RMSEps)
	}
	return c.validateMoE()
}

// Geometry is the KV-relevant shape.
func (c *Config) Geometry() kvcache.Geometry {
	g := kvcache.Geometry{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim}
	// A window as long as the context is full attention (as kvq estimate
	// counts it).
	long := c.ContextLen > 0 && c.SlidingWindow >= c.ContextLen
	for li := range min(c.Layers, kvcache.MaxSetLayers) {
		if c.Sliding(li) && !long {
			g.Sliding.Add(li)
			g.Window = c.SlidingWindow
		}
	}
	return g
}

// Layer holds one transformer block's weights. Optional parts are nil.
type Layer struct {
	AttnNorm   []float32
	Wq, Wk, Wv *tensor.Weight
	Bq, Bk, Bv []float32 // optional biases (Qwen2)
	QNorm      []float32 // optional per-head RMSNorm of q and k (Qwen3)
	KNorm      []float32
	Wo         *tensor.Weight
	FFNNorm    []float32
	Gate, Up   *tensor.Weight // w1, w3
	Down       *tensor.Weight // w2
	// QScale, when set, multiplies every query head by this [HeadDim ×
	// HeadDim] diagonal before RoPE (Phi-3's LongRoPE attention factor
	// with partial rotary). The family sets it; no checkpoint holds it.
	QScale *tensor.Weight
	// Router ([Experts][Dim]) and the experts' SwiGLU matrices, one per
	// expert, in an expert layer (views of the checkpoint's memory).
	Router                  *tensor.Weight
	ExpGate, ExpUp, ExpDown []*tensor.Weight
	// Gemma's RMSNorms of the attention's and the MLP's outputs.
	PostAttnNorm, PostFFNNorm []float32
	// GPT-OSS (family_gptoss.go): the output projection's bias, a sink
	// logit per head, the router's bias and the experts' biases (one row
	// per expert).
	Bo, Sinks, RouterBias      []float32
	ExpGateB, ExpUpB, ExpDownB *tensor.Weight
	// ExpPrepare, when set, writes expert e's matrices (ExpGate[e],
	// ExpUp[e], ExpDown[e]) on its first call for e: they hold no data
	// before (Hugging Face MXFP4 experts, repacked on first use). Whoever
	// reads them calls it first (backend.Experts.Prepare).
	ExpPrepare func(e int)
}

// Model is a loaded checkpoint.
type Model struct {
	Config
	Embed  *tensor.Weight
	Layers []Layer
	Norm   []float32
	Output *tensor.Weight // == Embed when tied
	// RopeFactors divides the inverse frequencies (GGUF rope_freqs), optional.
	RopeFactors []float32
	Tokenizer   *tokenizer.Tokenizer
	// StopIDs end generation (EOS and, for chat models, end-of-turn tokens).
	StopIDs []int
	// ChatTemplate is the Jinja chat template, when the checkpoint has one.
	ChatTemplate string
	// Path and Format ("llama2c", "gguf", "safetensors") say where the model came from.
	Path, Format string

	invFreq []float64
	family  *Family // Arch's, set by Prepare
	closers []io.Closer
}

// Close releases the model's file mappings. The model must not be used after.
func (m *Model) Close() error {
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// WeightBytes is the total size of the weights as stored.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, w := range m.weights() {
		n += w.Bytes()
	}
	return n
}

func (m *Model) weights() []*tensor.Weight {
	ws := []*tensor.Weight{m.Embed}
	if m.Output != m.Embed {
		ws = append(ws, m.Output)
	}
	for i := range m.Layers {
		for _, t := range m.tensors() {
			for _, w := range t.matrices(&m.Layers[i]) {
				if w != nil {
					ws = append(ws, w)
				}
			}
			if t.Experts != nil {
				ws = append(ws, *t.Experts(&m.Layers[i])...)
			}
		}
	}
	return ws
}

// tensors are the per-layer tensors of the model's family (the Llama
// family's for a model not yet prepared).
func (m *Model) tensors() []LayerTensor {
	if m.family != nil {
		return m.family.Tensors
	}
	return llamaFamily.Tensors
}

// DTypes lists the distinct storage types of the weight matrices, most
// common first ("BF16", or "Q8_0, F32").
func (m *Model) DTypes() []string {
	count := map[string]int64{}
	for _, w := range m.weights() {
		count[w.DType.String()] += int64(w.Rows) * int64(w.Cols)
	}
	var out []string
	for k := range count {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if count[out[i]] != count[out[j]] {
			return count[out[i]] > count[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Params is the number of parameters (weights and norms).
func (m *Model) Params() int64 {
	var n int64
	for _, w := range m.weights() {
		n += int64(w.Rows) * int64(w.Cols)
	}
	n += int64(len(m.Norm))
	for i := range m.Layers {
		for _, t := range m.tensors() {
			if t.Vector != nil {
				n += int64(len(*t.Vector(&m.Layers[i])))
			}
		}
	}
	return n
}

// Prepare validates the weights' shapes against the config and precomputes
// the RoPE frequencies. The loaders call it; code that assembles a Model
// by hand (random test models) must call it before use.
func (m *Model) Prepare() error {
	c := &m.Config
	if c.RopeDim == 0 {
		c.RopeDim = c.HeadDim
	}
	if err := c.Validate(); err != nil {
		return err
	}
	f, _ := lookupArch(func(a *Arch) bool { return a.Name == c.Arch })
	if f == nil {
		return fmt.Errorf("%w: architecture %q (kvq runs %s)", ErrUnsupported, c.Arch, archNames(false))
	}
	m.family = f
	if f.Prepare != nil {
		if err := f.Prepare(m); err != nil {
			return err
		}
	}
	check := func(w *tensor.Weight, name string, rows, cols int, optional bool) error {
		if w == nil && optional {
			return nil
		}
		if w == nil {
			return fmt.Errorf("%w: missing tensor %s", ErrModel, name)
		}
		if w.Rows != rows || w.Cols != cols {
			return fmt.Errorf("%w: tensor %s has shape [%d %d], config implies [%d %d]", ErrModel, name, w.Rows, w.Cols, rows, cols)
		}
		return w.Validate()
	}
	vec := func(v []float32, name string, n int, optional bool) error {
		if v == nil && optional {
			return nil
		}
		if len(v) != n {
			return fmt.Errorf("%w: tensor %s has %d values, config implies %d", ErrModel, name, len(v), n)
		}
		return nil
	}
	errs := []error{check(m.Embed, "token embedding", c.Vocab, c.Dim, false), check(m.Output, "output", c.Vocab, c.Dim, false), vec(m.Norm, "final norm", c.Dim, false)}
	if len(m.Layers) != c.Layers {
		errs = append(errs, fmt.Errorf("%w: %d layers loaded, config says %d", ErrModel, len(m.Layers), c.Layers))
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("layer %d ", i)
		for _, t := range f.Tensors {
			sh := t.Shape(c)
			if t.In != nil && !t.In(c, i) {
				continue
			}
			if t.Experts != nil {
				errs = append(errs, checkExperts(*t.Experts(l), c.Experts, p+t.Label, sh, check))
				continue
			}
			switch {
			case t.Parts != nil:
				rows := t.PartRows(c)
				for k, part := range t.Parts {
					errs = append(errs, check(*part(l), fmt.Sprintf("%s%s (part %d of %d)", p, t.Label, k+1, len(t.Parts)), rows[k], sh[1], t.Optional))
				}
			case t.Matrix != nil:
				errs = append(errs, check(*t.Matrix(l), p+t.Label, sh[0], sh[1], t.Optional))
			default:
				errs = append(errs, vec(*t.Vector(l), p+t.Label, sh[0], t.Optional))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if m.RopeFactors != nil && len(m.RopeFactors) != c.RopeDim/2 {
		return fmt.Errorf("%w: rope_freqs has %d values, want %d", ErrModel, len(m.RopeFactors), c.RopeDim/2)
	}
	m.invFreq = InvFreq(c, m.RopeFactors)
	_, _, err := m.layerGeometry()
	return err
}

// InvFreq returns the RoPE inverse frequencies θ_i, i < RopeDim/2, after
// scaling. factors, when given, divide them (GGUF rope_freqs).
func InvFreq(c *Config, factors []float32) []float64 {
	half := c.RopeDim / 2
	f := make([]float64, half)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.RopeDim))
	}
	s := c.Scaling
	switch s.Type {
	case "linear":
		for i := range f {
			f[i] /= s.Factor
		}
	case "yarn":
		yarnInvFreq(f, c.RopeTheta, c.RopeDim, s)
	case "llama3":
		orig := float64(s.OriginalContext)
		lowWave, highWave := orig/s.LowFreqFactor, orig/s.HighFreqFactor
		for i, inv := range f {
			wave := 2 * math.Pi / inv
			switch {
			case wave < highWave:
			case wave > lowWave:
				f[i] = inv / s.Factor
			default:
				smooth := (orig/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				f[i] = (1-smooth)*inv/s.Factor + smooth*inv
			}
		}
	case "longrope":
		for i := range f {
			if i < len(s.ShortFactor) {
				f[i] /= s.ShortFactor[i]
			}
		}
	}
	for i := range factors {
		f[i] /= float64(factors[i])
	}
	return f
}
