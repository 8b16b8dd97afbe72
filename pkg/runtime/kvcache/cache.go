package kvcache

import (
	"fmt"
	"math"
	"sort"
)

// SeqID names a sequence in a cache.
type SeqID int

// FullError reports that a step or a new sequence needed more memory than
// the cache had free: blocks of the pool, or bytes of its budget.
type FullError struct {
	Seq          SeqID
	Needed, Free int // blocks
	Total        int
	BlockTokens  int
	// NeededBytes and FreeBytes are set when the byte budget (not the
	// pool) was short.
	NeededBytes, FreeBytes int64
}

func (e *FullError) Error() string {
	if e.NeededBytes > 0 {
		return fmt.Sprintf("kvcache: over budget: sequence %d needs %d more bytes, %d of the budget free", e.Seq, e.NeededBytes, e.FreeBytes)
	}
	return fmt.Sprintf("kvcache: out of blocks: sequence %d needs %d more blocks of %d tokens, %d of %d free",
		e.Seq, e.Needed, e.BlockTokens, e.Free, e.Total)
}

func (e *FullError) Unwrap() error { return ErrFull }

// Options configure a Cache.
type Options struct {
	// Blocks is the pool size. With Budget it may be 0: as many blocks as
	// the budget holds.
	Blocks int
	// SlideBlocks is the sliding layers' pool when the layout keeps only
	// their window (Layout.Sliding): 0 means Blocks, or with Budget and
	// no Blocks, Layout.SlideBlocksForBudget. Their block ids follow the
	// full pool's: Blocks .. Blocks+SlideBlocks-1.
	SlideBlocks int
	// Budget, when > 0, bounds the cache's memory in bytes: the blocks in
	// use, the fp16 windows of the live sequences and the codec state
	// (Stats().InUse.Total) never exceed it. AddSeq and Reserve fail with a
	// *FullError instead.
	Budget int64
	// Storage allocates the cache's memory (a compute backend). Required.
	Storage Allocator
	// BlockTokens is the page size; 0 means the layout's.
	BlockTokens int
	// RoPE applies the rotary embedding in place to consecutive key head
	// vectors (len(rows)/head_dim of them) at positions pos0, pos0+1, ...:
	// one call per chunk of rows, so that a model can rotate them with its
	// cos/sin table without a call per row. Required when the layout stores
	// pre-RoPE keys.
	RoPE func(rows []float32, pos0 int)
	// RoPEFreqs and RoPENeoX describe the same rotation (inverse
	// frequencies; pairs (i, i+d/2) or (2i, 2i+1)) for device backends.
	RoPEFreqs []float64
	RoPENeoX  bool
	// PoisonFreed overwrites every freed block with garbage when the
	// storage is a Poisoner (a debugging aid: a read of stale data then
	// shows).
	PoisonFreed bool
}

// Cache is a paged KV cache for one model geometry and one spec: the
// bookkeeping of sequences, block tables and fp16 windows over a backend's
// Storage.
type Cache struct {
	layout *Layout
	store  Storage
	codecs *Codecs
	blocks int
	slide  int // sliding pool size (0 without window-only storage)
	budget int64
	ref    []int32 // per block reference count, both pools
	free   []int32 // free block ids (stack)
	sfree  []int32 // free sliding-pool block ids (stack)
	seqs   map[SeqID]*sequence
	poison bool
	shapes []Shape
	side   [][2]int // per layer, the shape index of K and V
	// pending is the reserved, not yet committed step; primed is set once
	// a step has committed (formats that learn from the first batch have
	// learned).
	pending *Plan
	primed  bool
	plan    Plan // reused by Reserve
}

type sequence struct {
	n      int     // tokens stored
	prompt int     // tokens of the first step (see quant.PromptFlusher)
	blocks []int32 // block table
	win    int     // window slot, -1 without windows
	// sblocks is the sliding pool's block table (Layout.Sliding), indexed
	// as blocks; entries before sfirst were released (-1): no query of a
	// later step reads them.
	sblocks []int32
	sfirst  int
}

// New allocates a cache with layout l in storage from opts.Storage.
func New(l *Layout, opts Options) (*Cache, error) {
	if opts.Storage == nil {
		return nil, fmt.Errorf("%w: no storage allocator", ErrGeometry)
	}
	if opts.Blocks == 0 && opts.Budget > 0 {
		opts.Blocks = l.BlocksForBudget(opts.Budget, 0)
		if opts.SlideBlocks == 0 {
			opts.SlideBlocks = l.SlideBlocksForBudget(opts.Budget, 0)
		}
	}
	switch {
	case !l.Sliding():
		opts.SlideBlocks = 0
	case opts.SlideBlocks == 0:
		opts.SlideBlocks = opts.Blocks
	case opts.SlideBlocks < 0 || opts.SlideBlocks > math.MaxInt32-opts.Blocks:
		return nil, fmt.Errorf("%w: sliding pool of %d blocks", ErrGeometry, opts.SlideBlocks)
	}
	if opts.Blocks <= 0 || opts.Budget < 0 {
		return nil, fmt.Errorf("%w: pool of %d blocks (budget %d bytes)", ErrGeometry, opts.Blocks, opts.Budget)
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
	codecs, err := newCodecs(l)
	if err != nil {
		return nil, err
	}
	store, err := opts.Storage.NewStorage(StorageParams{Layout: l, Codecs: codecs, Blocks: opts.Blocks, SlideBlocks: opts.SlideBlocks,
		RoPE: opts.RoPE, RoPEFreqs: opts.RoPEFreqs, RoPENeoX: opts.RoPENeoX})
	if err != nil {
		return nil, err
	}
	c := &Cache{
		layout: l,
		store:  store,
		codecs: codecs,
		blocks: opts.Blocks,
		slide:  opts.SlideBlocks,
		budget: opts.Budget,
		ref:    make([]int32, opts.Blocks+opts.SlideBlocks),
		free:   make([]int32, opts.Blocks),
		sfree:  make([]int32, opts.SlideBlocks),
		seqs:   map[SeqID]*sequence{},
		poison: opts.PoisonFreed,
	}
	c.shapes, c.side = l.Shapes()
	for i := range c.free {
		c.free[i] = int32(opts.Blocks - 1 - i) // pop yields 0, 1, 2, ...
	}
	for i := range c.sfree {
		c.sfree[i] = int32(opts.Blocks + opts.SlideBlocks - 1 - i)
	}
	return c, nil
}

// Layout returns the cache's memory plan.
func (c *Cache) Layout() *Layout { return c.layout }

// Storage returns the backend memory the cache manages.
func (c *Cache) Storage() Storage { return c.store }

// Codecs returns the cache's own codecs.
func (c *Cache) Codecs() *Codecs { return c.codecs }

// AddSeq registers an empty sequence. With a budget, it fails with a
// *FullError when the sequence's windows do not fit.
func (c *Cache) AddSeq(id SeqID) error {
	if _, ok := c.seqs[id]; ok {
		return fmt.Errorf("%w: %d", ErrSequence, id)
	}
	if c.pending != nil {
		return ErrPending
	}
	if need := c.layout.SeqBytes; c.budget > 0 && need > c.FreeBytes() {
		return &FullError{Seq: id, NeededBytes: need, FreeBytes: c.FreeBytes(), Total: c.blocks, BlockTokens: c.layout.BlockTokens}
	}
	s, err := c.newSeq()
	if err != nil {
		return err
	}
	c.seqs[id] = s
	return nil
}

func (c *Cache) newSeq() (*sequence, error) {
	s := &sequence{win: -1}
	if c.layout.Windowed() {
		w, err := c.store.AllocWindow()
		if err != nil {
			return nil, err
		}
		s.win = w
	}
	return s, nil
}

// Remove drops a sequence and releases its blocks and windows.
func (c *Cache) Remove(id SeqID) error {
	s, ok := c.seqs[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoSequence, id)
	}
	if c.pending != nil {
		return ErrPending
	}
	for _, b := range s.blocks {
		c.release(b)
	}
	for _, b := range s.sblocks[s.sfirst:] {
		c.release(b)
	}
	if s.win >= 0 {
		c.store.FreeWindow(s.win)
	}
	delete(c.seqs, id)
	return nil
}

func (c *Cache) release(b int32) {
	c.ref[b]--
	if c.ref[b] == 0 {
		if int(b) >= c.blocks {
			c.sfree = append(c.sfree, b)
		} else {
			c.free = append(c.free, b)
		}
		if p, ok := c.store.(Poisoner); ok && c.poison {
			p.Poison(int(b))
		}
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

// FreeBlocks is the number of unused blocks of the pool (the full
// layers' pool with window-only storage; see FreeSlideBlocks).
func (c *Cache) FreeBlocks() int { return len(c.free) }

// FreeSlideBlocks is the number of unused blocks of the sliding layers'
// pool (0 without window-only storage).
func (c *Cache) FreeSlideBlocks() int { return len(c.sfree) }

// InUseBytes is the memory the live sequences hold: their blocks, their
// windows and the codec state (Stats().InUse.Total).
func (c *Cache) InUseBytes() int64 {
	return c.layout.PoolBytes(c.blocks-len(c.free), c.slide-len(c.sfree), len(c.seqs)).Total
}

// FreeBytes is what can still be admitted: the budget less InUseBytes,
// or without a budget, the free blocks' bytes.
func (c *Cache) FreeBytes() int64 {
	if c.budget > 0 {
		return max(0, c.budget-c.InUseBytes())
	}
	if c.layout.Sliding() {
		return int64(len(c.free))*c.layout.FullBlockBytes + int64(len(c.sfree))*c.layout.SlideBlockBytes
	}
	return int64(len(c.free)) * c.layout.BlockBytes
}

// growth is what a step of n tokens takes from the pools for sequence s
// (of length s.n): full blocks, sliding blocks and their bytes.
func (c *Cache) growth(s *sequence, n int) (full, slide int, bytes int64) {
	full = c.layout.BlocksFor(s.n+n) - len(s.blocks)
	if !c.layout.Sliding() {
		return full, 0, int64(full) * c.layout.BlockBytes
	}
	slide = c.layout.BlocksFor(s.n+n) - len(s.sblocks)
	return full, slide, int64(full)*c.layout.FullBlockBytes + int64(slide)*c.layout.SlideBlockBytes
}

// CanAdmit reports whether a new sequence of tokens tokens, given in one
// step, fits now: its blocks in the pools and, with a budget, its blocks
// and windows in the free bytes.
func (c *Cache) CanAdmit(tokens int) bool {
	if tokens < 0 {
		return false
	}
	full, slide, _ := c.growth(&sequence{}, tokens)
	if full > len(c.free) || slide > len(c.sfree) {
		return false
	}
	return c.budget <= 0 || c.layout.SeqCost(tokens) <= c.FreeBytes()
}

// CanGrow reports whether sequence id can take n more tokens now.
func (c *Cache) CanGrow(id SeqID, n int) bool {
	s, ok := c.seqs[id]
	if !ok || n < 0 {
		return false
	}
	full, slide, bytes := c.growth(s, n)
	return full <= len(c.free) && slide <= len(c.sfree) && (c.budget <= 0 || bytes <= c.FreeBytes())
}

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
	if c.pending != nil {
		return ErrPending
	}
	shared := c.pendingFrom(s) / c.layout.BlockTokens
	copies := c.layout.BlocksFor(s.n) - shared
	scopies := 0
	if c.layout.Sliding() {
		scopies = c.layout.BlocksFor(s.n) - max(shared, s.sfirst)
	}
	if copies > len(c.free) || scopies > len(c.sfree) {
		return &FullError{Seq: dst, Needed: copies + scopies, Free: len(c.free) + len(c.sfree), Total: c.blocks + c.slide, BlockTokens: c.layout.BlockTokens}
	}
	need := int64(copies)*c.layout.BlockBytes + c.layout.SeqBytes
	if c.layout.Sliding() {
		need = int64(copies)*c.layout.FullBlockBytes + int64(scopies)*c.layout.SlideBlockBytes + c.layout.SeqBytes
	}
	if c.budget > 0 && need > c.FreeBytes() {
		return &FullError{Seq: dst, NeededBytes: need, FreeBytes: c.FreeBytes(), Total: c.blocks, BlockTokens: c.layout.BlockTokens}
	}
	d, err := c.newSeq()
	if err != nil {
		return err
	}
	d.n, d.prompt = s.n, s.prompt
	d.blocks = make([]int32, 0, len(s.blocks))
	for _, b := range s.blocks[:shared] {
		c.ref[b]++
		d.blocks = append(d.blocks, b)
	}
	for _, ob := range s.blocks[shared:c.layout.BlocksFor(s.n)] {
		nb := c.alloc()
		c.store.CopyBlock(int(nb), int(ob))
		d.blocks = append(d.blocks, nb)
	}
	if c.layout.Sliding() {
		d.sfirst = s.sfirst
		d.sblocks = make([]int32, 0, len(s.sblocks))
		for i, b := range s.sblocks[:c.layout.BlocksFor(s.n)] {
			switch {
			case i < s.sfirst:
				d.sblocks = append(d.sblocks, -1)
			case i < shared:
				c.ref[b]++
				d.sblocks = append(d.sblocks, b)
			default:
				nb := c.salloc()
				c.store.CopyBlock(int(nb), int(b))
				d.sblocks = append(d.sblocks, nb)
			}
		}
	}
	if s.win >= 0 {
		c.store.CopyWindow(d.win, s.win)
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
	for _, sh := range c.shapes {
		if sh.PromptFlush {
			from, _ := sh.staging(s.n, s.prompt)
			p = min(p, from)
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

// salloc takes a block of the sliding pool.
func (c *Cache) salloc() int32 {
	b := c.sfree[len(c.sfree)-1]
	c.sfree = c.sfree[:len(c.sfree)-1]
	c.ref[b] = 1
	return b
}

// slideKeep is the first position that sequence s's sliding layers must
// still hold: the first one the window of its next token reads, or the
// first staged row of a sliding side (its group is encoded into its
// blocks when it completes).
func (c *Cache) slideKeep(s *sequence) int {
	p := s.n + 1 - c.layout.Window
	for _, sh := range c.shapes {
		if sh.Slide {
			from, _ := sh.staging(s.n, s.prompt)
			p = min(p, from)
		}
	}
	return max(0, p)
}

// dropSlid releases the sliding blocks of s that no later step reads:
// those whose every position is before slideKeep.
func (c *Cache) dropSlid(s *sequence) {
	if !c.layout.Sliding() {
		return
	}
	keep := c.slideKeep(s) / c.layout.BlockTokens
	for ; s.sfirst < min(keep, len(s.sblocks)); s.sfirst++ {
		c.release(s.sblocks[s.sfirst])
		s.sblocks[s.sfirst] = -1
	}
}

// Truncate drops the tokens of sequence id from position n on (rejected
// speculative drafts; preemption). It is exact — the sequence then reads as
// if it had only ever held its first n tokens — when no fp16 window row the
// first n tokens need was overwritten by the tail: always for sides
// without residual or staging windows, for n = 0, and for tails of up to
// Layout.Rollback tokens (LayoutOptions.Rollback). Otherwise it returns
// ErrTruncate and changes nothing. A prompt-flushed sequence (quant.
// PromptFlusher) cannot be truncated into its prompt except to 0. With
// window-only storage (Layout.Sliding), a sequence cannot be truncated to
// n > 0 when its sliding layers have already released positions that
// the window of the token after n reads: Truncate refuses with
// ErrTruncate (the caller recomputes from an empty sequence).
func (c *Cache) Truncate(id SeqID, n int) error {
	s, ok := c.seqs[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoSequence, id)
	}
	if c.pending != nil {
		return ErrPending
	}
	if n < 0 || n > s.n {
		return fmt.Errorf("%w: to %d tokens, sequence %d holds %d", ErrTruncate, n, id, s.n)
	}
	if n == s.n {
		return nil
	}
	if n > 0 {
		for _, sh := range c.shapes {
			if sh.PromptFlush && n < s.prompt {
				return fmt.Errorf("%w: sequence %d to %d tokens: inside its %d-token prompt, which a prompt-flushed format quantized at once", ErrTruncate, id, n, s.prompt)
			}
			if (sh.Ring > 0 || sh.Staging > 0) && s.n-n > c.layout.Rollback {
				return fmt.Errorf("%w: sequence %d by %d tokens: its fp16 windows keep %d extra rows (raise LayoutOptions.Rollback)", ErrTruncate, id, s.n-n, c.layout.Rollback)
			}
		}
		if c.layout.Sliding() {
			t := *s
			t.n = n
			if n < s.prompt {
				t.prompt = n
			}
			if need := c.slideKeep(&t); need < s.sfirst*c.layout.BlockTokens {
				return fmt.Errorf("%w: sequence %d to %d tokens: its sliding-window layers keep positions from %d on only, and the window reads from %d", ErrTruncate, id, n, s.sfirst*c.layout.BlockTokens, need)
			}
		}
	}
	keep := c.layout.BlocksFor(n)
	// Blocks the sequence will write again must be its own: count the
	// shared ones first, so that a failure changes nothing.
	after := *s
	after.n, after.blocks = n, s.blocks[:keep]
	if n == 0 {
		after.prompt = 0
	}
	from := c.pendingFrom(&after) / c.layout.BlockTokens
	copies, scopies := 0, 0
	for _, b := range after.blocks[from:] {
		if c.ref[b] > 1 {
			copies++
		}
	}
	if c.layout.Sliding() {
		if n == 0 {
			after.sfirst = 0
		}
		after.sblocks = s.sblocks[:min(keep, len(s.sblocks))]
		for _, b := range after.sblocks[max(from, after.sfirst):] {
			if c.ref[b] > 1 {
				scopies++
			}
		}
	}
	if copies > len(c.free) || scopies > len(c.sfree) {
		return &FullError{Seq: id, Needed: copies + scopies, Free: len(c.free) + len(c.sfree), Total: c.blocks + c.slide, BlockTokens: c.layout.BlockTokens}
	}
	for _, b := range s.blocks[keep:] {
		c.release(b)
	}
	if c.layout.Sliding() {
		for _, b := range s.sblocks[max(keep, s.sfirst):] {
			c.release(b)
		}
	}
	s.blocks, s.n, s.prompt = after.blocks, after.n, after.prompt
	s.sblocks, s.sfirst = after.sblocks, after.sfirst
	for i := from; i < len(s.blocks); i++ {
		if ob := s.blocks[i]; c.ref[ob] > 1 {
			nb := c.alloc()
			c.store.CopyBlock(int(nb), int(ob))
			c.ref[ob]--
			s.blocks[i] = nb
		}
	}
	for i := max(from, s.sfirst); i < len(s.sblocks); i++ {
		if ob := s.sblocks[i]; c.ref[ob] > 1 {
			nb := c.salloc()
			c.store.CopyBlock(int(nb), int(ob))
			c.ref[ob]--
			s.sblocks[i] = nb
		}
	}
	return nil
}

// HeldBytes sums the lengths of every buffer the cache's storage holds for
// K/V data and windows (not codec state). It is computed from the buffers
// themselves, to check Stats and Layout against reality.
func (c *Cache) HeldBytes() int64 { return c.store.HeldBytes() }

// Stats reports the cache's memory.
type Stats struct {
	BlockTokens int
	Blocks      int   // pool size
	BlocksUsed  int   // blocks referenced by at least one sequence
	Seqs        int   // live sequences
	Tokens      int   // tokens stored over all sequences
	BlockBytes  int64 // one block, all layers, K and V
	Budget      int64 // the byte budget, 0 for none
	Allocated   Bytes // what the cache holds in memory
	InUse       Bytes // the part holding live tokens' blocks and live windows
	// SlideBlocks and SlideBlocksUsed are the sliding layers' pool and the
	// part of it in use, with window-only storage (Layout.Sliding).
	SlideBlocks, SlideBlocksUsed int
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
		Budget:      c.budget,
		Allocated:   c.layout.PoolBytes(c.blocks, c.slide, len(c.seqs)),
		InUse:       c.layout.PoolBytes(used, c.slide-len(c.sfree), len(c.seqs)),
		SlideBlocks: c.slide, SlideBlocksUsed: c.slide - len(c.sfree),
	}
	for _, s := range c.seqs {
		st.Tokens += s.n
	}
	return st
}

// Read decodes what attention reads for positions [from, to) of one KV head
// of layer (keys when key is true) into dst ((to-from)·HeadDim values). It is
// the dequantized view that test oracles and diagnostics compare against.
// It panics on a range outside the sequence (a programmer error), as Runs
// does.
func (c *Cache) Read(dst []float32, layer int, id SeqID, key bool, h, from, to int) {
	runs := c.Runs(nil, layer, id, key, from, to)
	c.store.Read(dst, layer, key, h, runs, c.seqs[id].win, from, to)
}
