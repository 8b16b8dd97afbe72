package kvcache

import (
	"errors"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Sentinel errors of the package.
var (
	ErrFull       = errors.New("kvcache: out of blocks")
	ErrNoSequence = errors.New("kvcache: no such sequence")
	ErrSequence   = errors.New("kvcache: sequence already exists")
	ErrGeometry   = errors.New("kvcache: bad geometry")
)

// DefaultBlockTokens is the page size in tokens, as in vLLM on CUDA.
const DefaultBlockTokens = 16

// Geometry is the KV-relevant shape of a model.
type Geometry struct {
	Layers  int
	KVHeads int
	HeadDim int
	// Latent marks multi-head latent attention (DeepSeek MLA): one shared
	// latent vector of HeadDim values per token and layer serves as both K
	// and V, so only the K side is stored. The runtime cannot run such
	// models; the layout serves kvq estimate.
	Latent bool
}

// Layout is the memory plan of a cache: formats, codecs and exact bytes.
type Layout struct {
	Geometry
	Spec        quant.Spec
	BlockTokens int
	Layers      []LayerLayout

	// BlockBytes is one block across all layers, K and V.
	BlockBytes int64
	// SeqBytes is the per-sequence fp16 side windows, all layers.
	SeqBytes int64
	// StateBytes is codec state (scales, codebooks), independent of tokens.
	StateBytes int64
}

// LayerLayout is the plan of one layer.
type LayerLayout struct {
	K, V Side
}

// Side is the plan of one layer's keys or values.
type Side struct {
	Format quant.Format
	Codecs []quant.Codec // one per KV head
	// TileBytes is one head's share of a block; PageBytes = KVHeads × TileBytes.
	TileBytes, PageBytes int
	// Window rows kept in fp16 per sequence and KV head.
	Sink, Residual, Staging int
	// Group is the codec's TokenGroup.
	Group int
	// PromptFlush: the codec is a quant.PromptFlusher, so staged groups
	// are counted from the end of each sequence's prompt, and rows encode
	// one by one.
	PromptFlush bool
	// PreRoPE: rows (keys) are stored before rotary embedding; the cache
	// applies Options.RoPE when reading them.
	PreRoPE bool
}

// WindowRows is the number of fp16 rows per sequence and head.
func (s *Side) WindowRows() int { return s.Sink + s.Residual + s.Staging }

// Bytes splits memory into its parts.
type Bytes struct {
	K, V     int64 // block storage
	Sink     int64
	Residual int64
	Staging  int64
	State    int64
	Total    int64
}

var fp16Row = func(dim int) int64 { return int64(2 * dim) }

// NewLayout plans a cache for geometry g and spec. blockTokens 0 means
// DefaultBlockTokens; it is raised to a multiple of every codec's TokenGroup.
func NewLayout(g Geometry, spec quant.Spec, blockTokens int) (*Layout, error) {
	if g.Layers <= 0 || g.KVHeads <= 0 || g.HeadDim <= 0 {
		return nil, fmt.Errorf("%w: layers %d, KV heads %d, head size %d", ErrGeometry, g.Layers, g.KVHeads, g.HeadDim)
	}
	if spec.K == nil || spec.V == nil {
		return nil, fmt.Errorf("%w: spec %q has no formats", ErrGeometry, spec.String())
	}
	if blockTokens == 0 {
		blockTokens = DefaultBlockTokens
	}
	if blockTokens < 0 {
		return nil, fmt.Errorf("%w: block size %d", ErrGeometry, blockTokens)
	}
	l := &Layout{Geometry: g, Spec: spec, Layers: make([]LayerLayout, g.Layers)}
	for i := range l.Layers {
		kf, vf := spec.ForLayer(i, g.Layers)
		sides := []struct {
			dst *Side
			f   quant.Format
			key bool
		}{{&l.Layers[i].K, kf, true}, {&l.Layers[i].V, vf, false}}
		if g.Latent {
			sides = sides[:1]
		}
		for _, side := range sides {
			s := side.dst
			s.Format = side.f
			s.Codecs = make([]quant.Codec, g.KVHeads)
			for h := range s.Codecs {
				c, err := side.f.NewCodec(quant.CodecParams{Dim: g.HeadDim, Layer: i, Head: h, Key: side.key})
				if err != nil {
					return nil, fmt.Errorf("layer %d: %w", i, err)
				}
				s.Codecs[h] = c
			}
			s.Group = s.Codecs[0].TokenGroup()
			if pr, ok := s.Codecs[0].(quant.PreRoPE); ok && side.key && pr.PreRoPE() {
				s.PreRoPE = true
			}
			if pf, ok := s.Codecs[0].(quant.PromptFlusher); ok && pf.FlushesFromPrompt() {
				s.PromptFlush = true
			}
			if s.Group > 1 && !s.PromptFlush { // prompt-flushed rows encode one by one
				blockTokens = lcm(blockTokens, s.Group)
			}
		}
	}
	l.BlockTokens = blockTokens
	for i := range l.Layers {
		for _, s := range []*Side{&l.Layers[i].K, &l.Layers[i].V} {
			if s.Codecs == nil { // the V side of a latent layout
				continue
			}
			s.TileBytes = s.Codecs[0].TileBytes(blockTokens)
			s.PageBytes = s.TileBytes * g.KVHeads
			if quant.Quantized(s.Format) {
				s.Sink, s.Residual = spec.Sink, spec.Residual
			}
			if w, ok := s.Codecs[0].(quant.Windowed); ok {
				s.Residual = max(s.Residual, w.ResidualRows())
			}
			if s.Group > 1 {
				s.Staging = s.Group
			}
			l.BlockBytes += int64(s.PageBytes)
			l.SeqBytes += int64(s.WindowRows()) * fp16Row(g.HeadDim) * int64(g.KVHeads)
			for _, c := range s.Codecs {
				l.StateBytes += int64(c.StateBytes())
			}
		}
	}
	return l, nil
}

// PreRoPE reports whether layer stores its keys before rotary embedding, in
// which case Cache.Put must be given pre-RoPE keys for it.
func (l *Layout) PreRoPE(layer int) bool { return l.Layers[layer].K.PreRoPE }

// AnyPreRoPE reports whether some layer stores pre-RoPE keys.
func (l *Layout) AnyPreRoPE() bool {
	for i := range l.Layers {
		if l.Layers[i].K.PreRoPE {
			return true
		}
	}
	return false
}

// BlocksFor is the number of blocks one sequence of n tokens needs.
func (l *Layout) BlocksFor(tokens int) int {
	return (tokens + l.BlockTokens - 1) / l.BlockTokens
}

// Bytes is the memory of a cache with blocks blocks and seqs live sequences,
// split into its parts. It is exactly what Cache allocates.
func (l *Layout) Bytes(blocks, seqs int) Bytes {
	var b Bytes
	d := fp16Row(l.HeadDim) * int64(l.KVHeads) * int64(seqs)
	for i := range l.Layers {
		for j, s := range []*Side{&l.Layers[i].K, &l.Layers[i].V} {
			p := int64(s.PageBytes) * int64(blocks)
			if j == 0 {
				b.K += p
			} else {
				b.V += p
			}
			b.Sink += int64(s.Sink) * d
			b.Residual += int64(s.Residual) * d
			b.Staging += int64(s.Staging) * d
		}
	}
	b.State = l.StateBytes
	b.Total = b.K + b.V + b.Sink + b.Residual + b.Staging + b.State
	return b
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }
