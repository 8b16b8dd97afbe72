package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// The model layer. Each architecture family is one definition, a Family in
// its own file (family_llama.go): how its checkpoints are recognised, the
// names of its tensors, its attention and KV geometry per layer, and its
// block, composed from the backend's ops. The runner (forward.go), the KV
// bookkeeping, eval, calibrate's observer and the engine never branch on
// the family. docs/model-layer.md says how a family is added.

// Family is one architecture family's definition.
type Family struct {
	// Archs are the checkpoint architectures the family runs, each a
	// Config.Arch value.
	Archs []Arch
	// Tensors name each layer's tensors in a Hugging Face checkpoint and
	// a GGUF file, in the order the loaders read them (the first missing
	// one is the error reported).
	Tensors []LayerTensor
	// Layer states layer li's attention and KV geometry. c is prepared
	// (RopeDim set, Validate passed); invFreq are the model's RoPE
	// inverse frequencies.
	Layer func(c *Config, invFreq []float64, li int) LayerGeometry
	// Block runs layer li over the step's tokens: s.X holds the residual
	// stream on entry and on return.
	Block func(s *Step, li int) error
	// Prepare, when set, refuses configs the family cannot run and sets
	// what the family derives from the config (Phi-3's Layer.QScale);
	// Model.Prepare calls it after Validate, maybe more than once.
	Prepare func(m *Model) error
	// Optional hooks. Needs refuses a backend that lacks ops the block
	// uses beyond backend.Backend (NewRunner calls it). Embedded runs on
	// the embedding rows (s.X) before the first layer (Gemma's scale by
	// √hidden). Logits transforms each row of logits on the host before
	// it is handed out (Gemma 2's final softcapping).
	Needs    func(be backend.Backend) error
	Embedded func(s *Step)
	Logits   func(c *Config, logits []float32)
	// HFLayer, when set, reads the layer tensors a Hugging Face checkpoint
	// stores in a layout of its own (LayerTensor.HF "": GPT-OSS's stacked
	// experts), after the others; prefix starts layer li's names, get
	// finds a tensor.
	HFLayer func(l *Layer, c *Config, prefix string, get func(name string) (hfTensor, bool)) error
}

// Arch is one checkpoint architecture of a family.
type Arch struct {
	// Name is kvq's name (Config.Arch) and the GGUF general.architecture.
	Name string
	// HF is the config.json "architectures" entry.
	HF string
	// GGUFNeoX: the GGUF file's RoPE pairs (i, i+d/2). llama.cpp's
	// converter permutes the Q/K rows of "llama" and "mistral" models so
	// that they use adjacent pairs; qwen2 and qwen3 keep the NeoX layout.
	// (Hugging Face checkpoints are always NeoX.)
	GGUFNeoX bool
	// HFWindow: config.json's sliding_window applies whenever it is set
	// (Mistral); otherwise only with use_sliding_window (Qwen2).
	HFWindow bool
	// HFRequired are optional tensors of the family (by LayerTensor.HF)
	// that this architecture's Hugging Face checkpoints must have.
	HFRequired []string
	// GGUF is the general.architecture of the architecture's GGUF files
	// when it is not Name: files of that architecture with experts
	// (<arch>.expert_count > 0) are this one (Mixtral's files say "llama").
	GGUF string
	// Routing is a mixture-of-experts architecture's routing
	// (Config.Routing).
	Routing backend.Routing
	// NormPlusOne: the Hugging Face checkpoints store RMSNorm weights as w
	// in x·(1+w) (Gemma); the loader adds 1 (GGUF files hold w+1).
	NormPlusOne bool
	// HFPrefixes are prefixes the text model's tensor names may have in
	// this architecture's Hugging Face checkpoints instead of "model."
	// (multimodal checkpoints: "language_model.model."), tried in order.
	HFPrefixes []string
}

// LayerTensor names one per-layer tensor of a family and where it goes in
// a Layer: exactly one of Matrix, Parts, Vector and Experts is set.
type LayerTensor struct {
	// HF and GGUF are the names after the layer's prefix
	// ("model.layers.N.", "blk.N."); Label names it in messages
	// ("layer 3 q bias").
	HF, GGUF, Label string
	Matrix          func(l *Layer) **tensor.Weight
	Vector          func(l *Layer) *[]float32
	// Experts is a matrix per expert (Config.Experts of them): HF is then
	// a pattern with %d for the expert ("mlp.experts.%d.gate_proj.weight"),
	// GGUF the name of the experts' stacked 3-D tensor.
	Experts func(l *Layer) *[]*tensor.Weight
	// Shape is the shape the config implies: [rows, cols] of a matrix
	// (of each expert's), [n] of a vector (Prepare checks it).
	Shape    func(c *Config) []int
	Optional bool
	// Parts split a fused matrix by rows into the Layer's matrices, in
	// order (Phi-3's qkv_proj into q, k and v), PartRows(c) rows each;
	// the loaders split it (the parts view its data).
	Parts    []func(l *Layer) **tensor.Weight
	PartRows func(c *Config) []int
	// In, when set, says whether layer li has the tensor at all (a dense
	// or an expert FFN); the loaders neither read nor require it in other
	// layers.
	In func(c *Config, li int) bool
}

// matrices are the Layer's matrices t fills: Matrix's, or the Parts'.
func (t *LayerTensor) matrices(l *Layer) []*tensor.Weight {
	if t.Matrix != nil {
		return []*tensor.Weight{*t.Matrix(l)}
	}
	var ws []*tensor.Weight
	for _, p := range t.Parts {
		ws = append(ws, *p(l))
	}
	return ws
}

// split fills the Parts of l from the fused matrix w (nil: absent).
func (t *LayerTensor) split(w *tensor.Weight, l *Layer, c *Config) error {
	if w == nil {
		return nil
	}
	rows := t.PartRows(c)
	sum := 0
	for _, r := range rows {
		sum += r
	}
	if w.Rows != sum {
		return fmt.Errorf("%w: tensor %s has %d rows, the config implies %d (%v)", ErrModel, w.Name, w.Rows, sum, rows)
	}
	r0 := 0
	for i, p := range t.Parts {
		*p(l) = rowsOf(w, r0, r0+rows[i])
		r0 += rows[i]
	}
	return nil
}

// rowsOf is rows [r0, r1) of w, viewing its data.
func rowsOf(w *tensor.Weight, r0, r1 int) *tensor.Weight {
	v := &tensor.Weight{Name: fmt.Sprintf("%s[%d:%d]", w.Name, r0, r1), DType: w.DType, Rows: r1 - r0, Cols: w.Cols}
	switch {
	case w.F32 != nil:
		v.F32 = w.F32[r0*w.Cols : r1*w.Cols]
	case w.U16 != nil:
		v.U16 = w.U16[r0*w.Cols : r1*w.Cols]
	default:
		rb := w.DType.RowBytes(w.Cols)
		v.Raw = w.Raw[r0*rb : r1*rb]
	}
	return v
}

// LayerGeometry is one layer's attention and KV shape. The KV cache holds
// KVHeads·HeadDim values per position and side in every layer (kvcache
// Geometry): Prepare refuses a family whose layers differ from the config
// there; RoPE and the window may differ from layer to layer.
type LayerGeometry struct {
	Heads, KVHeads, HeadDim int
	// RopeDim dimensions of each head are rotated, pairs (i, i+RopeDim/2)
	// with RopeNeoX, else (2i, 2i+1), at angles pos·InvFreq[i] (RopeDim/2
	// values: the RoPE base and scaling of the layer).
	RopeDim  int
	RopeNeoX bool
	InvFreq  []float64
	// Window > 0 limits attention to the last Window positions.
	Window int
	// Scale multiplies q·k before the softmax.
	Scale float32
	// Softcap > 0 caps the scaled scores: Softcap·tanh(s/Softcap).
	Softcap float32
}

// families is the registry of the model layer, in the order the loaders'
// messages list them.
var families = []*Family{&llamaFamily, &olmo2Family, &phi3Family, &mixtralFamily, &qwen3moeFamily, &gemmaFamily, &gptossFamily}

// lookupArch returns the family and architecture whose match is true.
func lookupArch(match func(a *Arch) bool) (*Family, *Arch) {
	for _, f := range families {
		for i := range f.Archs {
			if match(&f.Archs[i]) {
				return f, &f.Archs[i]
			}
		}
	}
	return nil, nil
}

// archNames lists the architectures kvq runs by name (GGUF) or by
// config.json architectures entry (hf).
func archNames(hf bool) string {
	var s []string
	for _, f := range families {
		for _, a := range f.Archs {
			n := a.Name
			if hf {
				n = a.HF
			}
			if !slices.Contains(s, n) { // a name with several HF architectures
				s = append(s, n)
			}
		}
	}
	return strings.Join(s, ", ")
}

// Step is what a family's block sees of a forward step: the backend's ops,
// the step's activations and the cache's attention. The block composes
// the ops over NT token rows; the runner owns everything else.
type Step struct {
	// Ops runs the block's compute (the runner's backend, or its
	// interruptible view).
	Ops backend.Backend
	// NT is the number of token rows of the step.
	NT int
	// Config is the model's; Layer and Weights are the block's layer's
	// geometry and uploaded weights.
	Config  *Config
	Layer   *LayerGeometry
	Weights *LayerWeights
	// The activations, NT rows each: X the residual stream (Dim), XN and
	// O Dim, Q and Att Heads·HeadDim, K and V KVHeads·HeadDim, Gate and
	// Up Hidden values; in a model with experts, Router Experts values
	// (the router's logits) and Route 2·ExpertsUsed (backend.MoE's Route).
	X, XN, O, Q, K, V, Att, Gate, Up backend.Tensor
	Router, Route                    backend.Tensor

	r      *Runner
	ctx    context.Context
	groups []*group
}

// LayerWeights are one layer's weights on the backend (nil when absent).
type LayerWeights struct {
	AttnNorm, FFNNorm              backend.Tensor
	PostAttnNorm, PostFFNNorm      backend.Tensor // Gemma's norms after attention and MLP
	Bq, Bk, Bv, QNorm, KNorm       backend.Tensor
	Wq, Wk, Wv, Wo, Gate, Up, Down backend.Matrix
	QScale                         backend.Matrix // Layer.QScale
	// Router and Experts: an expert layer's (moe.go).
	Router  backend.Matrix
	Experts *backend.Experts
	// GPT-OSS: the output projection's and router's biases, and the
	// attention sinks (host values, backend.AttnParams.Sinks).
	Bo, RouterBias backend.Tensor
	Sinks          []float32
}

// Check returns an error when the step's context has ended: a block calls
// it after ops that may stop early (MatMul, Attention), before their output
// is read.
func (s *Step) Check(li int) error {
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("runtime: forward stopped in layer %d: %w", li, err)
	}
	return nil
}

// Attention is the cache's part of layer li: given the step's queries q,
// keys k (before RoPE) and values v, it rotates q and k by the layer's
// RoPE, shows the observer the keys and values, writes them to every
// cache of the step and sets dst to the attention of each query over its
// sequence.
func (s *Step) Attention(li int, dst, q, k, v backend.Tensor) error {
	r, be, g, nt := s.r, s.Ops, s.Layer, s.NT
	b := &r.buf
	if err := s.Check(li); err != nil { // before the keys and values are written
		return err
	}
	pre := r.obs != nil
	for _, gr := range s.groups {
		pre = pre || gr.cache.Layout().PreRoPE(li)
	}
	if pre {
		be.Copy(b.kpre, k, nt*g.KVHeads*g.HeadDim)
	}
	cs := b.angles[r.ropeOf[li]]
	be.RoPE(q, nt, g.Heads, g.HeadDim, g.RopeDim, cs, g.RopeNeoX)
	be.RoPE(k, nt, g.KVHeads, g.HeadDim, g.RopeDim, cs, g.RopeNeoX)
	if r.obs != nil {
		if err := r.observe(be, li, nt, k, v); err != nil {
			return err
		}
	}
	for _, gr := range s.groups {
		kk := k
		if gr.cache.Layout().PreRoPE(li) {
			kk = b.kpre
		}
		be.WriteKV(gr.cache.Storage(), li, kk, v, gr.plan)
	}
	a := backend.AttnParams{Heads: g.Heads, Scale: g.Scale, Window: g.Window, Softcap: g.Softcap, Sinks: s.Weights.Sinks}
	for _, gr := range s.groups {
		be.Attention(dst, q, k, v, gr.cache.Storage(), li, gr.plan, a)
	}
	return s.Check(li)
}

// layerGeometry finds the config's family and states every layer's
// geometry. Prepare calls it to check the model; NewRunner, to run it (on
// the config as it is then).
func (m *Model) layerGeometry() (*Family, []LayerGeometry, error) {
	c := &m.Config
	f, _ := lookupArch(func(a *Arch) bool { return a.Name == c.Arch })
	if f == nil {
		return nil, nil, fmt.Errorf("%w: architecture %q (kvq runs %s)", ErrUnsupported, c.Arch, archNames(false))
	}
	geo := make([]LayerGeometry, c.Layers)
	for li := range geo {
		g := f.Layer(c, m.invFreq, li)
		if g.KVHeads != c.KVHeads || g.HeadDim != c.HeadDim || g.Heads != c.Heads {
			return nil, nil, fmt.Errorf("%w: layer %d has %d heads, %d KV heads × %d, the model %d, %d × %d (kvq's caches hold one geometry in every layer)",
				ErrUnsupported, li, g.Heads, g.KVHeads, g.HeadDim, c.Heads, c.KVHeads, c.HeadDim)
		}
		if g.RopeDim <= 0 || g.RopeDim > g.HeadDim || len(g.InvFreq) != g.RopeDim/2 {
			return nil, nil, fmt.Errorf("%w: layer %d: %d RoPE frequencies for %d rotated of %d dimensions", ErrModel, li, len(g.InvFreq), g.RopeDim, g.HeadDim)
		}
		geo[li] = g
	}
	return f, geo, nil
}

// defaultScale is 1/sqrt(headDim), the attention scale of most families.
func defaultScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }
