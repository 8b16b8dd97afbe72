package kvcache

import (
	"errors"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Sentinel errors of the package.
var (
	ErrFull       = errors.New("kvcache: out of blocks")
	ErrNoSequence = errors.New("kvcache: no such sequence")
	ErrSequence   = errors.New("kvcache: sequence already exists")
	ErrGeometry   = errors.New("kvcache: bad geometry")
	ErrPending    = errors.New("kvcache: a reserved step is pending")
	ErrTruncate   = errors.New("kvcache: cannot truncate exactly")
)

// DefaultBlockTokens is the page size in tokens, as in vLLM on CUDA.
const DefaultBlockTokens = 16

// DefaultChunk is the prefill chunk, in tokens, that kvq's engine feeds
// prompts in by default (engine.Options.Chunk): with window-only storage
// it sets what a request of a sliding-window model holds at most
// (Layout.SeqCostChunked).
const DefaultChunk = 256

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
	// Sliding marks the layers that attend over a sliding window (Gemma's
	// local layers): a spec's sliding= override sets their formats.
	Sliding LayerSet
	// Window, when > 0, is the sliding layers' window: a query at position
	// q reads keys q-Window+1 .. q. Their cache then keeps only the blocks
	// that attention over the window still reads (window-only storage, in
	// a pool of their own); 0 keeps every position in every layer.
	Window int
}

// LayerSet is a set of layer indices below MaxSetLayers, comparable (so
// that Geometry stays comparable). The zero value is empty.
type LayerSet struct{ bits [MaxSetLayers / 64]uint64 }

// MaxSetLayers bounds the layers a LayerSet holds.
const MaxSetLayers = 512

// Add puts layer i in the set; it panics on i outside [0, MaxSetLayers).
func (s *LayerSet) Add(i int) { s.bits[i/64] |= 1 << (i % 64) }

// Has reports whether layer i is in the set.
func (s LayerSet) Has(i int) bool {
	return i >= 0 && i < MaxSetLayers && s.bits[i/64]&(1<<(i%64)) != 0
}

// Empty reports whether the set has no layer.
func (s LayerSet) Empty() bool { return s == LayerSet{} }

// Layout is the memory plan of a cache: formats, codecs and exact bytes.
type Layout struct {
	Geometry
	Spec        quant.Spec
	BlockTokens int
	Layers      []LayerLayout

	// Rollback is how many tokens a sequence can be truncated by exactly
	// (see LayoutOptions.Rollback).
	Rollback int

	// BlockBytes is one block across all layers, K and V.
	BlockBytes int64
	// FullBlockBytes and SlideBlockBytes split BlockBytes between the
	// layers that keep every position and the sliding layers whose cache
	// keeps only their window (Windowed: SlideBlockBytes is 0 otherwise).
	FullBlockBytes, SlideBlockBytes int64
	// SlideSpan is how many positions back from a sequence's end its
	// sliding layers' blocks are kept: Window, or more when a sliding
	// side's fp16 staging rows (a token group in progress) reach further
	// back, since the group is encoded into its blocks when it completes.
	SlideSpan int
	// SeqBytes is the per-sequence fp16 side windows, all layers.
	SeqBytes int64
	// StateBytes is codec state (scales, codebooks), independent of tokens.
	StateBytes int64
}

// LayerLayout is the plan of one layer.
type LayerLayout struct {
	K, V Side
	// Slide: the layer's blocks live in the sliding pool, which keeps only
	// the blocks its window reads (see Geometry.Window).
	Slide bool
}

// Side is the plan of one layer's keys or values.
type Side struct {
	Format quant.Format
	Codecs []quant.Codec // one per KV head
	// TileBytes is one head's share of a block; PageBytes = KVHeads × TileBytes.
	TileBytes, PageBytes int
	// Window rows kept in fp16 per sequence and KV head: the first Sink
	// positions; a ring of Ring rows (position p in row p mod Ring) of
	// which attention reads the last Residual positions; and Staging rows
	// (a multiple of Group) holding the token group in progress. Ring and
	// Staging exceed Residual and Group only with LayoutOptions.Rollback.
	Sink, Residual, Ring, Staging int
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
func (s *Side) WindowRows() int { return s.Sink + s.Ring + s.Staging }

// Shape is the window geometry of a side: what the cache's bookkeeping
// (write ops and read runs, see Plan) depends on. Sides of equal shape
// share them.
type Shape struct {
	Sink, Residual, Ring, Staging, Group int
	PromptFlush                          bool
	// Slide: the sides' blocks are the sequence's sliding-pool blocks,
	// of which only those the window reads are kept.
	Slide bool
}

// Shape returns the side's window geometry.
func (s *Side) Shape() Shape {
	return Shape{Sink: s.Sink, Residual: s.Residual, Ring: s.Ring, Staging: s.Staging, Group: s.Group, PromptFlush: s.PromptFlush}
}

// Windowed reports whether the shape keeps per-sequence fp16 rows.
func (sh Shape) Windowed() bool { return sh.Sink+sh.Ring+sh.Staging > 0 }

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

// LayoutOptions tune NewLayoutWith.
type LayoutOptions struct {
	// BlockTokens is the page size; 0 means DefaultBlockTokens. It is
	// raised to a multiple of every codec's TokenGroup.
	BlockTokens int
	// Rollback is how many tokens Cache.Truncate can drop from a sequence
	// exactly (speculative decoding's rejected drafts): sides with an fp16
	// residual ring or staging rows keep that many more rows per sequence,
	// so that the rows a truncated tail overwrote are still there. 0 (the
	// engines' accounting, and kvq estimate's) keeps exactly the windows the
	// formats define; Truncate then works exactly only for sides without
	// them, or back to an empty sequence.
	Rollback int
	// FullSliding keeps every position in the sliding layers too, in the
	// one pool (the storage before window-only storage; a reference for
	// tests and comparisons).
	FullSliding bool
}

// NewLayout plans a cache for geometry g and spec. blockTokens 0 means
// DefaultBlockTokens; it is raised to a multiple of every codec's TokenGroup.
func NewLayout(g Geometry, spec quant.Spec, blockTokens int) (*Layout, error) {
	return NewLayoutWith(g, spec, LayoutOptions{BlockTokens: blockTokens})
}

// checkGeometry asks every format of spec that carries calibrated data
// (quant.GeometryChecker, through wrappers) whether it fits g.
func checkGeometry(g Geometry, spec quant.Spec) error {
	fs := []quant.Format{spec.K, spec.V}
	for _, o := range spec.Overrides {
		fs = append(fs, o.K, o.V)
		if o.Sliding && g.Sliding.Empty() {
			return fmt.Errorf("%w %q: sliding=: the model has no sliding-window layers", quant.ErrBadSpec, spec.String())
		}
	}
	for _, f := range fs {
		for f != nil {
			if gc, ok := f.(quant.GeometryChecker); ok {
				if err := gc.CheckGeometry(g.Layers, g.KVHeads); err != nil {
					return err
				}
			}
			u, ok := f.(interface{ Unwrap() quant.Format })
			if !ok {
				break
			}
			f = u.Unwrap()
		}
	}
	return nil
}

// NewLayoutWith is NewLayout with options.
func NewLayoutWith(g Geometry, spec quant.Spec, opts LayoutOptions) (*Layout, error) {
	blockTokens := opts.BlockTokens
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
	if g.Window < 0 {
		return nil, fmt.Errorf("%w: sliding window of %d tokens", ErrGeometry, g.Window)
	}
	if opts.Rollback < 0 {
		return nil, fmt.Errorf("%w: rollback of %d tokens", ErrGeometry, opts.Rollback)
	}
	if err := spec.CheckLayers(g.Layers); err != nil {
		return nil, err
	}
	if err := checkGeometry(g, spec); err != nil {
		return nil, err
	}
	l := &Layout{Geometry: g, Spec: spec, Layers: make([]LayerLayout, g.Layers), Rollback: opts.Rollback}
	for i := range l.Layers {
		kf, vf := spec.ForLayerKind(i, g.Layers, g.Sliding.Has(i))
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
		l.Layers[i].Slide = g.Window > 0 && g.Sliding.Has(i) && !opts.FullSliding
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
			if s.Residual > 0 {
				s.Ring = s.Residual + opts.Rollback
			}
			if s.Group > 1 {
				// A multiple of the group, so that a group's rows are
				// contiguous, holding opts.Rollback rows more than a group.
				s.Staging = (s.Group + opts.Rollback + s.Group - 1) / s.Group * s.Group
			}
			l.BlockBytes += int64(s.PageBytes)
			if l.Layers[i].Slide {
				l.SlideBlockBytes += int64(s.PageBytes)
				l.SlideSpan = max(l.SlideSpan, g.Window, s.Staging)
			} else {
				l.FullBlockBytes += int64(s.PageBytes)
			}
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

// Sliding reports whether the layout keeps only the window of some layers
// (window-only storage, Geometry.Window), in a pool of their own.
func (l *Layout) Sliding() bool { return l.Window > 0 && l.SlideBlockBytes > 0 }

// SlideBlocksFor is the number of sliding-pool blocks one sequence holds
// while a step of chunk new tokens brings it to tokens tokens: the blocks
// of positions tokens-chunk-Window+1 .. tokens-1, which may straddle one
// block more than they fill,
//
//	min(⌈tokens/bs⌉, ⌈min(Window-1+chunk, tokens)/bs⌉ + 1),
//
// (with SlideSpan for Window when staged groups reach further back)
//
// vLLM's per-request need of a sliding-window group
// (SlidingWindowSpec.max_memory_usage_bytes, with chunk its
// max_num_batched_tokens). Between steps a sequence holds the value for
// chunk 0 or less. 0 without window-only storage.
func (l *Layout) SlideBlocksFor(tokens, chunk int) int {
	if !l.Sliding() || tokens <= 0 {
		return 0
	}
	chunk = max(1, min(chunk, tokens))
	return min(l.BlocksFor(tokens), l.BlocksFor(min(l.SlideSpan-1+chunk, tokens))+1)
}

// SeqCost is the memory one sequence of tokens tokens takes at most: its
// blocks and its fp16 windows (what a scheduler admits against a budget),
// when its tokens may come in one step (see SeqCostChunked).
func (l *Layout) SeqCost(tokens int) int64 { return l.SeqCostChunked(tokens, tokens) }

// SeqCostChunked is SeqCost for a sequence fed at most chunk tokens per
// step: the full layers' blocks of every token, the sliding layers' blocks
// of their window (SlideBlocksFor) and the fp16 windows.
func (l *Layout) SeqCostChunked(tokens, chunk int) int64 {
	if !l.Sliding() {
		return int64(l.BlocksFor(tokens))*l.BlockBytes + l.SeqBytes
	}
	return int64(l.BlocksFor(tokens))*l.FullBlockBytes + int64(l.SlideBlocksFor(tokens, chunk))*l.SlideBlockBytes + l.SeqBytes
}

// BlocksForBudget is the largest pool of blocks that, with seqs live
// sequences' windows and the codec state, fits in budget bytes (0 when
// nothing does). With window-only storage it is the full layers' pool:
// the blocks of tokens whose full layers fit (or, when every layer
// slides, whose sliding layers fit); see SlideBlocksForBudget.
func (l *Layout) BlocksForBudget(budget int64, seqs int) int {
	rest := budget - l.StateBytes - int64(seqs)*l.SeqBytes
	per := l.BlockBytes
	if l.Sliding() {
		per = l.FullBlockBytes
		if per == 0 {
			per = l.SlideBlockBytes
		}
	}
	if rest <= 0 || per <= 0 {
		return 0
	}
	return int(min(rest/per, math.MaxInt32))
}

// SlideBlocksForBudget is the sliding pool that goes with
// BlocksForBudget: as many sliding blocks as the budget holds, at most
// the full pool's count (a sequence never holds more sliding blocks than
// blocks of tokens). The two pools can each take the whole budget, so
// that whatever mix of short and long sequences runs, the budget, not a
// split fixed in advance, bounds what they hold (Options.Budget).
func (l *Layout) SlideBlocksForBudget(budget int64, seqs int) int {
	if !l.Sliding() {
		return 0
	}
	rest := budget - l.StateBytes - int64(seqs)*l.SeqBytes
	if rest <= 0 {
		return 0
	}
	return int(min(rest/l.SlideBlockBytes, int64(l.BlocksForBudget(budget, seqs))))
}

// Windowed reports whether some side keeps per-sequence fp16 rows.
func (l *Layout) Windowed() bool { return l.SeqBytes > 0 }

// Shapes returns the distinct window shapes of the layout's sides and,
// per layer, the index of its K and V side's shape.
func (l *Layout) Shapes() ([]Shape, [][2]int) {
	var shapes []Shape
	idx := make([][2]int, len(l.Layers))
	for i := range l.Layers {
		for j, s := range []*Side{&l.Layers[i].K, &l.Layers[i].V} {
			sh := s.Shape()
			sh.Slide = l.Layers[i].Slide
			k := 0
			for k < len(shapes) && shapes[k] != sh {
				k++
			}
			if k == len(shapes) {
				shapes = append(shapes, sh)
			}
			idx[i][j] = k
		}
	}
	return shapes, idx
}

// Bytes is the memory of a cache with blocks blocks (in both pools) and
// seqs live sequences, split into its parts.
func (l *Layout) Bytes(blocks, seqs int) Bytes { return l.PoolBytes(blocks, blocks, seqs) }

// PoolBytes is the memory of a cache with full blocks in the full layers'
// pool, slide blocks in the sliding layers' (Sliding; ignored otherwise)
// and seqs live sequences, split into its parts. It is exactly what Cache
// allocates.
func (l *Layout) PoolBytes(full, slide, seqs int) Bytes {
	var b Bytes
	d := fp16Row(l.HeadDim) * int64(l.KVHeads) * int64(seqs)
	for i := range l.Layers {
		blocks := full
		if l.Layers[i].Slide {
			blocks = slide
		}
		for j, s := range []*Side{&l.Layers[i].K, &l.Layers[i].V} {
			p := int64(s.PageBytes) * int64(blocks)
			if j == 0 {
				b.K += p
			} else {
				b.V += p
			}
			b.Sink += int64(s.Sink) * d
			b.Residual += int64(s.Ring) * d
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
