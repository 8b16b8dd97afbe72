package kvcache

import (
	"fmt"
	"math"
	"sort"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// SeqID names a sequence in a cache.
type SeqID int

// FullError reports that a sequence needed more blocks than were free.
type FullError struct {
	Seq          SeqID
	Needed, Free int // blocks
	Total        int
	BlockTokens  int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("kvcache: out of blocks: sequence %d needs %d more blocks of %d tokens, %d of %d free",
		e.Seq, e.Needed, e.BlockTokens, e.Free, e.Total)
}

func (e *FullError) Unwrap() error { return ErrFull }

// Options configure a Cache.
type Options struct {
	// Blocks is the pool size. Required.
	Blocks int
	// BlockTokens is the page size; 0 means DefaultBlockTokens.
	BlockTokens int
	// RoPE applies the rotary embedding in place to consecutive key head
	// vectors (len(rows)/head_dim of them) at positions pos0, pos0+1, ...:
	// one call per chunk of rows, so that a model can rotate them with its
	// cos/sin table without a call per row. Required when the layout stores
	// pre-RoPE keys.
	RoPE func(rows []float32, pos0 int)
}

// Cache is a paged KV cache for one model geometry and one spec.
type Cache struct {
	layout *Layout
	blocks int
	// pages[layer][side][head] holds numBlocks tiles of that head, so that
	// one head's consecutive blocks are contiguous in memory.
	pages [][2][][]byte
	ref   []int32 // per block reference count
	free  []int32 // free block ids (stack)
	seqs  map[SeqID]*sequence
	fp16  []quant.Codec // fp16 codec for side windows (per head; identical)
	rope  func(rows []float32, pos0 int)
}

type sequence struct {
	n      int     // tokens stored (committed by Begin)
	prompt int     // tokens of the first Begin (see quant.PromptFlusher)
	blocks []int32 // block table
	// win[layer][side] holds KVHeads tiles of WindowRows fp16 rows each:
	// [sink rows][residual ring rows][staging rows].
	win [][2][]byte
}

// New allocates a cache with layout l.
func New(l *Layout, opts Options) (*Cache, error) {
	if opts.Blocks <= 0 {
		return nil, fmt.Errorf("%w: pool of %d blocks", ErrGeometry, opts.Blocks)
	}
	if l.Latent {
		return nil, fmt.Errorf("%w: the runtime does not run latent-attention (MLA) models", ErrGeometry)
	}
	if l.AnyPreRoPE() && opts.RoPE == nil {
		return nil, fmt.Errorf("%w: spec %q stores pre-RoPE keys but no RoPE function was given", ErrGeometry, l.Spec.String())
	}
	if opts.BlockTokens != 0 && opts.BlockTokens != l.BlockTokens {
		return nil, fmt.Errorf("%w: layout has %d-token blocks, options ask for %d", ErrGeometry, l.BlockTokens, opts.BlockTokens)
	}
	c := &Cache{
		layout: l,
		blocks: opts.Blocks,
		pages:  make([][2][][]byte, len(l.Layers)),
		ref:    make([]int32, opts.Blocks),
		free:   make([]int32, opts.Blocks),
		seqs:   map[SeqID]*sequence{},
		rope:   opts.RoPE,
	}
	for i := range l.Layers {
		for j, side := range c.sides(i) {
			c.pages[i][j] = make([][]byte, l.KVHeads)
			for h := range c.pages[i][j] {
				c.pages[i][j][h] = make([]byte, opts.Blocks*side.TileBytes)
			}
		}
	}
	for i := range c.free {
		c.free[i] = int32(opts.Blocks - 1 - i) // pop yields 0, 1, 2, ...
	}
	fp, _ := quant.FP16.NewCodec(quant.CodecParams{Dim: l.HeadDim})
	c.fp16 = []quant.Codec{fp}
	return c, nil
}

// Layout returns the cache's memory plan.
func (c *Cache) Layout() *Layout { return c.layout }

// AddSeq registers an empty sequence.
func (c *Cache) AddSeq(id SeqID) error {
	if _, ok := c.seqs[id]; ok {
		return fmt.Errorf("%w: %d", ErrSequence, id)
	}
	c.seqs[id] = c.newSeq()
	return nil
}

func (c *Cache) newSeq() *sequence {
	s := &sequence{win: make([][2][]byte, len(c.layout.Layers))}
	for i := range c.layout.Layers {
		for j, side := range c.sides(i) {
			if r := side.WindowRows(); r > 0 {
				s.win[i][j] = make([]byte, int(fp16Row(c.layout.HeadDim))*r*c.layout.KVHeads)
			}
		}
	}
	return s
}

func (c *Cache) sides(layer int) [2]*Side {
	l := &c.layout.Layers[layer]
	return [2]*Side{&l.K, &l.V}
}

// Remove drops a sequence and releases its blocks.
func (c *Cache) Remove(id SeqID) error {
	s, ok := c.seqs[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoSequence, id)
	}
	for _, b := range s.blocks {
		c.release(b)
	}
	delete(c.seqs, id)
	return nil
}

func (c *Cache) release(b int32) {
	c.ref[b]--
	if c.ref[b] == 0 {
		c.free = append(c.free, b)
	}
}

// Has reports whether the sequence exists.
func (c *Cache) Has(id SeqID) bool { _, ok := c.seqs[id]; return ok }

// Len is the number of tokens stored for a sequence (0 if unknown).
func (c *Cache) Len(id SeqID) int {
	if s, ok := c.seqs[id]; ok {
		return s.n
	}
	return 0
}

// Seqs lists live sequences in id order.
func (c *Cache) Seqs() []SeqID {
	ids := make([]SeqID, 0, len(c.seqs))
	for id := range c.seqs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// FreeBlocks is the number of unused blocks.
func (c *Cache) FreeBlocks() int { return len(c.free) }

// Fork makes dst a copy of src's first src.Len tokens. Full blocks are shared;
// the partially filled tail block, any block that a staged group will still
// be written into (prompt-flushed sides, see quant.PromptFlusher) and the
// fp16 windows are copied.
func (c *Cache) Fork(dst, src SeqID) error {
	s, ok := c.seqs[src]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoSequence, src)
	}
	if _, ok := c.seqs[dst]; ok {
		return fmt.Errorf("%w: %d", ErrSequence, dst)
	}
	shared := c.pendingFrom(s) / c.layout.BlockTokens
	copies := c.layout.BlocksFor(s.n) - shared
	if copies > len(c.free) {
		return &FullError{Seq: dst, Needed: copies, Free: len(c.free), Total: c.blocks, BlockTokens: c.layout.BlockTokens}
	}
	d := c.newSeq()
	d.n, d.prompt = s.n, s.prompt
	d.blocks = make([]int32, 0, len(s.blocks))
	for _, b := range s.blocks[:shared] {
		c.ref[b]++
		d.blocks = append(d.blocks, b)
	}
	for _, ob := range s.blocks[shared:c.layout.BlocksFor(s.n)] {
		nb := c.alloc()
		for i := range c.pages {
			for j := 0; j < 2; j++ {
				tb := c.sides(i)[j].TileBytes
				for _, hp := range c.pages[i][j] {
					copy(hp[int(nb)*tb:int(nb+1)*tb], hp[int(ob)*tb:int(ob+1)*tb])
				}
			}
		}
		d.blocks = append(d.blocks, nb)
	}
	for i := range s.win {
		for j := 0; j < 2; j++ {
			copy(d.win[i][j], s.win[i][j])
		}
	}
	c.seqs[dst] = d
	return nil
}

// pendingFrom is the first position of s whose block may still be written:
// the end of its tokens, or the first staged row of a prompt-flushed side
// (its group is encoded into earlier blocks when it completes). Blocks
// from there on are copied by Fork: both sequences would write the same
// rows into them, but possibly at the same time.
func (c *Cache) pendingFrom(s *sequence) int {
	p := s.n
	for i := range c.layout.Layers {
		for _, side := range c.sides(i) {
			if side.PromptFlush {
				from, _ := side.staging(s)
				p = min(p, from)
			}
		}
	}
	return p
}

func (c *Cache) alloc() int32 {
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.ref[b] = 1
	return b
}

// Begin makes room for n more tokens of sequence id and returns the position
// of the first. The new positions must then be written with Put for every
// layer before they are read.
func (c *Cache) Begin(id SeqID, n int) (int, error) {
	s, ok := c.seqs[id]
	if !ok {
		return 0, fmt.Errorf("%w: %d", ErrNoSequence, id)
	}
	if n < 0 || s.n > math.MaxInt32-n {
		return 0, fmt.Errorf("%w: cannot add %d tokens to a sequence of %d", ErrGeometry, n, s.n)
	}
	need := c.layout.BlocksFor(s.n+n) - len(s.blocks)
	if need > len(c.free) {
		return 0, &FullError{Seq: id, Needed: need, Free: len(c.free), Total: c.blocks, BlockTokens: c.layout.BlockTokens}
	}
	for i := 0; i < need; i++ {
		s.blocks = append(s.blocks, c.alloc())
	}
	pos := s.n
	if pos == 0 {
		s.prompt = n
	}
	s.n += n
	return pos, nil
}

// HeldBytes sums the lengths of every buffer the cache holds for K/V data and
// windows (not codec state). It is computed from the buffers themselves, to
// check Stats and Layout against reality.
func (c *Cache) HeldBytes() int64 {
	var n int64
	for _, p := range c.pages {
		for _, side := range p {
			for _, hp := range side {
				n += int64(len(hp))
			}
		}
	}
	for _, s := range c.seqs {
		for _, w := range s.win {
			n += int64(len(w[0]) + len(w[1]))
		}
	}
	return n
}

// Stats reports the cache's memory.
type Stats struct {
	BlockTokens int
	Blocks      int   // pool size
	BlocksUsed  int   // blocks referenced by at least one sequence
	Seqs        int   // live sequences
	Tokens      int   // tokens stored over all sequences
	BlockBytes  int64 // one block, all layers, K and V
	Allocated   Bytes // what the cache holds in memory
	InUse       Bytes // the part holding live tokens' blocks and live windows
}

// Stats returns current memory statistics.
func (c *Cache) Stats() Stats {
	used := c.blocks - len(c.free)
	st := Stats{
		BlockTokens: c.layout.BlockTokens,
		Blocks:      c.blocks,
		BlocksUsed:  used,
		Seqs:        len(c.seqs),
		BlockBytes:  c.layout.BlockBytes,
		Allocated:   c.layout.Bytes(c.blocks, len(c.seqs)),
		InUse:       c.layout.Bytes(used, len(c.seqs)),
	}
	for _, s := range c.seqs {
		st.Tokens += s.n
	}
	return st
}
