package train

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// span is one parameter tensor inside the flat parameter buffer: rows×cols
// float32 values from off, row-major (a vector has rows 1).
type span struct {
	name       string // Hugging Face name; fused tensors are split on export
	off        int
	rows, cols int
	decay      bool // AdamW weight decay applies (linear layers only)
	matrix     bool // a linear layer: the trainer keeps its transpose
}

func (s span) n() int                     { return s.rows * s.cols }
func (s span) of(buf []float32) []float32 { return buf[s.off : s.off+s.n() : s.off+s.n()] }
func (s span) end() int                   { return s.off + s.n() }

// layerSpans are one block's parameters. The q, k and v projections are
// stored back to back as one (Heads+2·KVHeads)·HeadDim × Dim matrix, and
// gate and up as one 2·Hidden × Dim matrix, so that each pair of products
// is one matrix product; Export splits them.
type layerSpans struct {
	attnNorm, wqkv, wo, ffnNorm, w13, w2 span
}

// layout places every parameter in one flat buffer: the embedding, the
// layers in order, the final norm and the output head.
type layout struct {
	embed, norm, head span
	layers            []layerSpans
	all               []span
	size              int
}

func newLayout(c *Config) *layout {
	l := &layout{}
	add := func(name string, rows, cols int, matrix bool) span {
		s := span{name: name, off: l.size, rows: rows, cols: cols, decay: matrix, matrix: matrix}
		l.size += rows * cols
		l.all = append(l.all, s)
		return s
	}
	l.embed = add("model.embed_tokens.weight", c.Vocab, c.Dim, false)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		l.layers = append(l.layers, layerSpans{
			attnNorm: add(p+"input_layernorm.weight", 1, c.Dim, false),
			wqkv:     add(p+"self_attn.qkv_proj.weight", c.qkvRows(), c.Dim, true),
			wo:       add(p+"self_attn.o_proj.weight", c.Dim, c.Heads*c.HeadDim, true),
			ffnNorm:  add(p+"post_attention_layernorm.weight", 1, c.Dim, false),
			w13:      add(p+"mlp.gate_up_proj.weight", 2*c.Hidden, c.Dim, true),
			w2:       add(p+"mlp.down_proj.weight", c.Dim, c.Hidden, true),
		})
	}
	l.norm = add("model.norm.weight", 1, c.Dim, false)
	l.head = add("lm_head.weight", c.Vocab, c.Dim, true)
	return l
}

// Model is a probe model being trained: its config and float32 master
// weights. A Model is not safe for concurrent use.
type Model struct {
	cfg Config
	lay *layout
	w   []float32
}

// NewModel returns a model with freshly initialised weights drawn from
// cfg.Seed: matrices from N(0, InitStd²), the attention and MLP output
// projections from N(0, InitStd²/(2·Layers)) (GPT-2's residual scaling),
// the embedding from N(0, InitStd²), norms at 1.
func NewModel(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, lay: newLayout(&cfg)}
	m.w = make([]float32, m.lay.size)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x696e6974)) // "init"
	normal := func(s span, std float64) {
		v := s.of(m.w)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
	}
	ones := func(s span) {
		for i, v := 0, s.of(m.w); i < len(v); i++ {
			v[i] = 1
		}
	}
	std := cfg.InitStd
	resid := std / math.Sqrt(2*float64(cfg.Layers))
	normal(m.lay.embed, std)
	for _, l := range m.lay.layers {
		ones(l.attnNorm)
		normal(l.wqkv, std)
		normal(l.wo, resid)
		ones(l.ffnNorm)
		normal(l.w13, std)
		normal(l.w2, resid)
	}
	ones(m.lay.norm)
	normal(m.lay.head, std)
	return m, nil
}

// Config returns the model's config.
func (m *Model) Config() Config { return m.cfg }

// Params returns the number of parameters.
func (m *Model) Params() int { return len(m.w) }
