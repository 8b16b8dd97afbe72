package kvcache

import (
	"fmt"
	"math"
)

// A step over a cache is reserved, computed, then committed or rolled back:
//
//	p, err := c.Reserve(appends) // blocks allocated, lengths advanced
//	... for each layer: backend.WriteKV(c.Storage(), layer, k, v, p)
//	...                 backend.Attention(out, q, c.Storage(), layer, p, ...)
//	c.Commit(p)                  // or c.Rollback(p) on error or cancellation
//
// The Plan says, for each window shape of the layout, what to write where
// (Ops, in order) and, per sequence, where every position is read from
// (Runs). A backend executes it for every layer; layers whose K (or V)
// sides have the same Shape share ops and runs.

// Append is one sequence's share of a step: N tokens, held in rows
// [Row, Row+N) of the step's activations, appended at the end of Seq.
// Exact asks that the step's tokens attend to each other's exact keys and
// values (the step's activations) rather than to the cache's encoding of
// them, as Hugging Face's QuantizedCache does within a prefill; earlier
// positions are read from the cache either way.
type Append struct {
	Seq    SeqID
	Row, N int
	Exact  bool
}

// OpKind says what an Op does.
type OpKind uint8

// Op kinds.
const (
	// OpSave saves window row Row of window Win (every head) into the
	// storage's undo log before the step overwrites it (Storage.Restore).
	OpSave OpKind = iota
	// OpWindow stores activation row Src in fp16 at window row Row of Win.
	OpWindow
	// OpEncode encodes activation row Src into slot Slot of block Block.
	OpEncode
	// OpFlushGroup decodes the N fp16 window rows from Row of Win and
	// encodes them as one token group at slots [Slot, Slot+N) of Block.
	OpFlushGroup
	// OpFlushRows is OpFlushGroup for formats whose rows encode one by one
	// (quant.PromptFlusher): the same rows, encoded independently.
	OpFlushRows
)

// Op is one write of a step, for every KV head.
type Op struct {
	Kind  OpKind
	Src   int32 // activation row (OpWindow, OpEncode)
	Win   int32 // window slot
	Row   int32 // window row
	N     int32 // rows (flushes)
	Block int32 // destination block (OpEncode, flushes)
	Slot  int32 // first destination slot in the block
}

// Run is a maximal range of positions [Pos, Pos+N) that one source holds
// contiguously: rows [Row, Row+N) of a block's tile (Block ≥ 0) or of the
// sequence's fp16 window (Block < 0).
type Run struct {
	Pos, N, Block, Row int32
}

// SeqStep is one sequence's part of a Plan.
type SeqStep struct {
	Seq SeqID
	// Row is the first activation row of its N new tokens, at positions
	// [Pos, Pos+N).
	Row, N, Pos int
	// Window is the sequence's window slot (-1 without windows).
	Window int
	// Exact: positions [Pos, Pos+N) are read from the step's activations
	// (see Append.Exact).
	Exact bool
	// Runs, per shape, cover positions [0, Pos+N) after the step's writes;
	// for sliding shapes (Shape.Slide) they start at the first position
	// the sequence's sliding layers still hold, at most Pos+1-Window (what
	// the step's first query reads).
	Runs [][]Run
}

// Plan is a reserved step over one cache. It is valid until Commit or
// Rollback; a backend may upload it once per step.
type Plan struct {
	Seqs []SeqStep
	// Shapes are the layout's distinct window shapes; SideShape[layer]
	// gives the shape index of the layer's K and V sides.
	Shapes    []Shape
	SideShape [][2]int
	// Writes, per shape, are the step's writes in order (the ops of one
	// sequence in token order; different sequences touch different
	// blocks and windows).
	Writes [][]Op
	// Prime is set on the cache's first step: formats that learn state from
	// the first batch (fp8:dynamic) learn it from this step's rows.
	Prime bool

	cache *Cache
	old   []seqState
}

// seqState is what Rollback restores.
type seqState struct {
	s                    *sequence
	n, prompt, nbl, nsbl int
}

// Cache returns the cache the plan belongs to.
func (p *Plan) Cache() *Cache { return p.cache }

// Reserve starts a step that appends tokens to sequences: it allocates
// their blocks, advances their lengths and returns the plan of what the
// step writes and reads. Nothing changes when it fails (an unknown
// sequence, a sequence twice, no tokens, a full pool or budget). The step
// must end with Commit or Rollback before the cache is used otherwise.
func (c *Cache) Reserve(appends []Append) (*Plan, error) {
	if c.pending != nil {
		return nil, ErrPending
	}
	if len(appends) == 0 {
		return nil, fmt.Errorf("%w: empty step", ErrGeometry)
	}
	need, sneed := 0, 0
	var bytes int64
	for i, a := range appends {
		s, ok := c.seqs[a.Seq]
		if !ok {
			return nil, fmt.Errorf("%w: %d", ErrNoSequence, a.Seq)
		}
		for _, b := range appends[:i] {
			if b.Seq == a.Seq {
				return nil, fmt.Errorf("%w: sequence %d appears twice in one step", ErrSequence, a.Seq)
			}
		}
		if a.N <= 0 || a.Row < 0 || s.n > math.MaxInt32-a.N {
			return nil, fmt.Errorf("%w: cannot add %d tokens to sequence %d of %d", ErrGeometry, a.N, a.Seq, s.n)
		}
		full, slide, b := c.growth(s, a.N)
		need, sneed, bytes = need+full, sneed+slide, bytes+b
	}
	if need > len(c.free) {
		return nil, &FullError{Seq: appends[0].Seq, Needed: need, Free: len(c.free), Total: c.blocks, BlockTokens: c.layout.BlockTokens}
	}
	if sneed > len(c.sfree) {
		return nil, &FullError{Seq: appends[0].Seq, Needed: sneed, Free: len(c.sfree), Total: c.slide, BlockTokens: c.layout.BlockTokens}
	}
	if c.budget > 0 && bytes > c.FreeBytes() {
		return nil, &FullError{Seq: appends[0].Seq, Needed: need + sneed, Free: len(c.free) + len(c.sfree), Total: c.blocks + c.slide, BlockTokens: c.layout.BlockTokens, NeededBytes: bytes, FreeBytes: c.FreeBytes()}
	}
	p := &c.plan
	p.cache = c
	p.Shapes, p.SideShape = c.shapes, c.side
	p.Prime = !c.primed && c.codecs.Stateful
	p.Seqs = p.Seqs[:0]
	p.old = p.old[:0]
	if len(p.Writes) != len(c.shapes) {
		p.Writes = make([][]Op, len(c.shapes))
	}
	for k := range p.Writes {
		p.Writes[k] = p.Writes[k][:0]
	}
	bt := c.layout.BlockTokens
	for _, a := range appends {
		s := c.seqs[a.Seq]
		p.old = append(p.old, seqState{s: s, n: s.n, prompt: s.prompt, nbl: len(s.blocks), nsbl: len(s.sblocks)})
		for len(s.blocks) < c.layout.BlocksFor(s.n+a.N) {
			s.blocks = append(s.blocks, c.alloc())
		}
		for c.layout.Sliding() && len(s.sblocks) < c.layout.BlocksFor(s.n+a.N) {
			s.sblocks = append(s.sblocks, c.salloc())
		}
		pos := s.n
		if pos == 0 {
			s.prompt = a.N
		}
		s.n += a.N
		for k, sh := range c.shapes {
			p.Writes[k] = sh.writes(p.Writes[k], s, bt, a.Row, pos, a.N)
		}
		p.Seqs = append(p.Seqs, SeqStep{Seq: a.Seq, Row: a.Row, N: a.N, Pos: pos, Window: s.win, Exact: a.Exact})
	}
	for i := range p.Seqs {
		st := &p.Seqs[i]
		s := c.seqs[st.Seq]
		if cap(st.Runs) >= len(c.shapes) {
			st.Runs = st.Runs[:len(c.shapes)]
		} else {
			st.Runs = make([][]Run, len(c.shapes))
		}
		for k, sh := range c.shapes {
			from := 0
			if sh.Slide {
				from = s.sfirst * bt
			}
			st.Runs[k] = sh.runs(st.Runs[k][:0], s, bt, from, s.n)
		}
	}
	c.pending = p
	return p, nil
}

// Commit ends a reserved step whose writes all completed.
func (c *Cache) Commit(p *Plan) {
	if p != c.pending {
		panic("kvcache: Commit of a plan that is not the cache's pending step")
	}
	c.store.Discard()
	if p.Prime {
		c.primed = true
	}
	for _, o := range p.old {
		c.dropSlid(o.s)
	}
	c.pending = nil
}

// Rollback ends a reserved step that failed or was cancelled: the
// sequences get back their lengths, blocks and window rows, and formats
// that learned from the step's data forget it, so nothing of the step
// remains.
func (c *Cache) Rollback(p *Plan) {
	if p != c.pending {
		panic("kvcache: Rollback of a plan that is not the cache's pending step")
	}
	c.store.Restore()
	for i := len(p.old) - 1; i >= 0; i-- {
		o := p.old[i]
		for _, b := range o.s.blocks[o.nbl:] {
			c.release(b)
		}
		o.s.blocks = o.s.blocks[:o.nbl]
		for _, b := range o.s.sblocks[o.nsbl:] {
			c.release(b)
		}
		o.s.sblocks = o.s.sblocks[:o.nsbl]
		o.s.n, o.s.prompt = o.n, o.prompt
	}
	if p.Prime {
		// The codecs were made when the cache was; making them again
		// cannot fail.
		if err := c.codecs.renew(c.layout); err != nil {
			panic(err)
		}
	}
	c.pending = nil
}

// staging returns the first position that a shape holds in its fp16
// staging rows (n when none: the group in progress starts there) and the
// phase its groups are counted from: 0, or the end of the prompt for
// prompt-flushed shapes, whose prompt rows are never staged.
func (sh *Shape) staging(n, prompt int) (from, phase int) {
	if sh.Group <= 1 {
		return n, 0
	}
	if sh.PromptFlush {
		phase = prompt
	}
	if n <= phase {
		return n, phase
	}
	return n - (n-phase)%sh.Group, phase
}

// writes appends the ops that store k new tokens of s (rows row.., from
// position pos; s already counts them) for sides of shape sh.
func (sh *Shape) writes(ops []Op, s *sequence, bt, row, pos, k int) []Op {
	w := int32(s.win)
	g := sh.Group
	table := s.blocks
	if sh.Slide {
		table = s.sblocks
	}
	for i := 0; i < k; i++ {
		p, src := pos+i, int32(row+i)
		block, slot := table[p/bt], int32(p%bt)
		if p < sh.Sink {
			ops = append(ops, Op{Kind: OpWindow, Src: src, Win: w, Row: int32(p)})
		}
		if sh.Ring > 0 {
			r := int32(sh.Sink + p%sh.Ring)
			// The row held position p-Ring; save it on its first
			// overwrite of the step.
			if p >= sh.Ring && p < pos+sh.Ring {
				ops = append(ops, Op{Kind: OpSave, Win: w, Row: r})
			}
			ops = append(ops, Op{Kind: OpWindow, Src: src, Win: w, Row: r})
		}
		if g <= 1 || sh.PromptFlush && p < s.prompt {
			ops = append(ops, Op{Kind: OpEncode, Src: src, Block: block, Slot: slot})
			continue
		}
		phase := 0
		if sh.PromptFlush {
			phase = s.prompt
		}
		base := sh.Sink + sh.Ring
		r := int32(base + (p-phase)%sh.Staging)
		if p-phase >= sh.Staging && p < pos+sh.Staging {
			ops = append(ops, Op{Kind: OpSave, Win: w, Row: r})
		}
		ops = append(ops, Op{Kind: OpWindow, Src: src, Win: w, Row: r})
		if (p-phase)%g != g-1 {
			continue
		}
		// The group [p+1-g, p] is complete: encode it from its fp16 rows.
		first := p + 1 - g
		r0 := r - int32(g-1)
		if !sh.PromptFlush {
			ops = append(ops, Op{Kind: OpFlushGroup, Win: w, Row: r0, N: int32(g), Block: table[first/bt], Slot: int32(first % bt)})
			continue
		}
		// Counted from the prompt, a group may straddle blocks.
		for q := first; q <= p; {
			e := min(p+1, (q/bt+1)*bt)
			ops = append(ops, Op{Kind: OpFlushRows, Win: w, Row: r0 + int32(q-first), N: int32(e - q), Block: table[q/bt], Slot: int32(q % bt)})
			q = e
		}
	}
	return ops
}

// runs appends the maximal runs of positions in [from, to) of s that one
// source holds contiguously, for sides of shape sh: the fp16 sink, the fp16
// residual ring, the fp16 staging rows of an incomplete group, or a block
// tile.
func (sh *Shape) runs(dst []Run, s *sequence, bt, from, to int) []Run {
	table := s.blocks
	if sh.Slide {
		table = s.sblocks
	}
	ringFrom := s.n - sh.Residual
	stageFrom, phase := sh.staging(s.n, s.prompt)
	p := from
	for p < to {
		switch {
		case p < sh.Sink:
			e := min(to, sh.Sink)
			dst = append(dst, Run{Pos: int32(p), N: int32(e - p), Block: -1, Row: int32(p)})
			p = e
		case sh.Residual > 0 && p >= ringFrom:
			r := p % sh.Ring
			e := min(to, p+sh.Ring-r)
			dst = append(dst, Run{Pos: int32(p), N: int32(e - p), Block: -1, Row: int32(sh.Sink + r)})
			p = e
		case p >= stageFrom:
			e := to
			if sh.Residual > 0 {
				e = min(to, ringFrom)
			}
			dst = append(dst, Run{Pos: int32(p), N: int32(e - p), Block: -1, Row: int32(sh.Sink + sh.Ring + (p-phase)%sh.Staging)})
			p = e
		default:
			b := p / bt
			e := min(to, (b+1)*bt)
			if sh.Residual > 0 {
				e = min(e, max(ringFrom, p+1))
			}
			e = min(e, max(stageFrom, p+1))
			if table[b] < 0 {
				panic(fmt.Sprintf("kvcache: position %d of a sliding layer was released (the window reads from %d)", p, s.sfirst*bt))
			}
			dst = append(dst, Run{Pos: int32(p), N: int32(e - p), Block: table[b], Row: int32(p % bt)})
			p = e
		}
	}
	return dst
}

// Runs appends the runs of positions [from, to) of sequence id's keys (key
// true) or values in layer, for diagnostics and backends that read outside
// a step.
func (c *Cache) Runs(dst []Run, layer int, id SeqID, key bool, from, to int) []Run {
	s := c.seqs[id]
	if s == nil || from < 0 || to > s.n || from > to {
		panic(fmt.Sprintf("kvcache: Runs over [%d,%d) of sequence %d (length %d)", from, to, id, c.Len(id)))
	}
	j := 1
	if key {
		j = 0
	}
	return c.shapes[c.side[layer][j]].runs(dst, s, c.layout.BlockTokens, from, to)
}

// Window returns sequence id's window slot (-1 if it has none).
func (c *Cache) Window(id SeqID) int {
	if s, ok := c.seqs[id]; ok {
		return s.win
	}
	return -1
}
