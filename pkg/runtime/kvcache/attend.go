package kvcache

import (
	"fmt"

	"github.com/kvqlabs/kvq/internal/simd"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Prime shows a layer's whole batch of new keys and values (rows of
// KVHeads·HeadDim) to formats whose scales are set by the first data they see
// (fp8:dynamic, like vLLM's calculate_kv_scales on the first batch). Call it
// before the layer's Puts of a step; it does nothing for other formats.
func (c *Cache) Prime(layer int, k, v []float32) {
	sides := c.sides(layer)
	quant.PrimeFP8Scales(sides[0].Format, layer, true, c.layout.KVHeads, c.layout.HeadDim, k)
	quant.PrimeFP8Scales(sides[1].Format, layer, false, c.layout.KVHeads, c.layout.HeadDim, v)
}

// Put stores the keys and values of one token at position pos of sequence id
// in layer. k and v hold KVHeads·HeadDim values each. pos must lie in a range
// returned by Begin. Put panics on a bad position or slice length: those are
// programmer errors.
func (c *Cache) Put(layer int, id SeqID, pos int, k, v []float32) {
	s := c.seqs[id]
	if s == nil || pos < 0 || pos >= s.n {
		panic(fmt.Sprintf("kvcache: Put at position %d of sequence %d (length %d)", pos, id, c.Len(id)))
	}
	dim := c.layout.HeadDim
	bt := c.layout.BlockTokens
	block, slot := int(s.blocks[pos/bt]), pos%bt
	var tmp []float32
	for j, side := range c.sides(layer) {
		x := k
		if j == 1 {
			x = v
		}
		win := s.win[layer][j]
		rows := side.WindowRows()
		for h, codec := range side.Codecs {
			row := x[h*dim : (h+1)*dim]
			tile := c.tile(layer, j, h, block)
			wt := win[h*rows*2*dim : (h+1)*rows*2*dim]
			if pos < side.Sink {
				c.fp16[0].Encode(wt, pos, row, 1)
			}
			if side.Residual > 0 {
				c.fp16[0].Encode(wt, side.Sink+pos%side.Residual, row, 1)
			}
			if side.Group == 1 || side.PromptFlush && pos < s.prompt {
				codec.Encode(tile, slot, row, 1)
				continue
			}
			g := side.Group
			base := side.Sink + side.Residual
			_, phase := side.staging(s)
			k := (pos - phase) % g
			c.fp16[0].Encode(wt, base+k, row, 1)
			if k < g-1 {
				continue
			}
			if tmp == nil {
				tmp = make([]float32, g*dim)
			}
			c.fp16[0].Decode(tmp, wt, base, g)
			if !side.PromptFlush {
				codec.Encode(tile, slot+1-g, tmp, g)
				continue
			}
			// Counted from the prompt, a group may straddle blocks: its
			// rows encode one by one into theirs.
			for r := 0; r < g; r++ {
				p := pos + 1 - g + r
				codec.Encode(c.tile(layer, j, h, int(s.blocks[p/bt])), p%bt, tmp[r*dim:(r+1)*dim], 1)
			}
		}
	}
}

// tile returns KV head h's tile of block in layer, side j (0 keys, 1 values).
func (c *Cache) tile(layer, j, h, block int) []byte {
	tb := c.sides(layer)[j].TileBytes
	return c.pages[layer][j][h][block*tb:][:tb]
}

// staging returns the first position of s that side still holds in its
// fp16 staging rows (s.n when none: the group in progress starts there)
// and the phase its groups are counted from: 0, or the end of the prompt
// for prompt-flushed sides, whose prompt rows are never staged.
func (side *Side) staging(s *sequence) (from, phase int) {
	if side.Group <= 1 {
		return s.n, 0
	}
	if side.PromptFlush {
		phase = s.prompt
	}
	if s.n <= phase {
		return s.n, phase
	}
	return s.n - (s.n-phase)%side.Group, phase
}

// Scratch is per-goroutine working memory for Attend.
type Scratch struct {
	scores   []float32
	acc      []float32
	qr, racc []float32 // rotated queries and value sums (quant.Rotator)
	rows     []float32 // decoded pre-RoPE key rows
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Attend computes causal attention for one query token of sequence id in
// layer: for each of nHeads query heads (q holds nHeads·HeadDim values, head i
// reading KV head i/(nHeads/KVHeads)), softmax(scale·q·K[from:to]ᵀ)·V[from:to]
// is written to dst. Positions [from, to) must have been written with Put.
func (c *Cache) Attend(dst, q []float32, nHeads, layer int, id SeqID, from, to int, scale float32, scr *Scratch) {
	for h := 0; h < c.layout.KVHeads; h++ {
		c.AttendHead(dst, q, nHeads, layer, id, h, from, to, scale, scr)
	}
}

// AttendHead is Attend restricted to the query heads of KV head h: it reads
// and writes only their part of q and dst, so different heads may run
// concurrently.
func (c *Cache) AttendHead(dst, q []float32, nHeads, layer int, id SeqID, h, from, to int, scale float32, scr *Scratch) {
	s := c.seqs[id]
	if s == nil || from < 0 || to > s.n || from >= to {
		panic(fmt.Sprintf("kvcache: Attend over [%d,%d) of sequence %d (length %d)", from, to, id, c.Len(id)))
	}
	dim, kvh := c.layout.HeadDim, c.layout.KVHeads
	nq := nHeads / kvh
	n := to - from
	scr.scores = grow(scr.scores, nq*n)
	scr.acc = grow(scr.acc, nq*dim)
	sides := c.sides(layer)
	qh := q[h*nq*dim : (h+1)*nq*dim]
	sc := scr.scores
	// Formats that store rows rotated get the query rotated once.
	kc := sides[0].Codecs[h]
	kr, kRot := kc.(quant.Rotator)
	var qr []float32
	if kRot {
		scr.qr = grow(scr.qr, nq*dim)
		qr = scr.qr
		kr.RotateQueries(qr, qh, nq)
	}
	if sides[0].PreRoPE {
		c.scoresPreRoPE(s, layer, sides[0], h, from, to, qh, nq, sc, n, scr)
	} else {
		c.runs(s, layer, 0, sides[0], h, from, to, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
			if kRot && cd == kc {
				kr.ScoresRotated(sc[off:], n, qr, nq, tile, row0, cnt)
				return
			}
			cd.Scores(sc[off:], n, qh, nq, tile, row0, cnt)
		})
	}
	for i := 0; i < nq; i++ {
		softmax(sc[i*n:(i+1)*n], scale)
	}
	acc := scr.acc
	clear(acc)
	vc := sides[1].Codecs[h]
	vr, vRot := vc.(quant.Rotator)
	var racc []float32
	if vRot {
		scr.racc = grow(scr.racc, nq*dim)
		racc = scr.racc
		clear(racc)
	}
	c.runs(s, layer, 1, sides[1], h, from, to, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
		if vRot && cd == vc {
			vr.AccumulateRotated(racc, sc[off:], n, nq, tile, row0, cnt)
			return
		}
		cd.Accumulate(acc, sc[off:], n, nq, tile, row0, cnt)
	})
	if vRot {
		vr.UnrotateAdd(acc, racc, nq)
	}
	copy(dst[h*nq*dim:(h+1)*nq*dim], acc)
}

// Read decodes what attention reads for positions [from, to) of one KV head
// of layer (keys when key is true) into dst ((to-from)·HeadDim values). It is
// the dequantized view that test oracles and diagnostics compare against.
func (c *Cache) Read(dst []float32, layer int, id SeqID, key bool, h, from, to int) {
	s := c.seqs[id]
	if s == nil || from < 0 || to > s.n || from > to {
		panic(fmt.Sprintf("kvcache: Read over [%d,%d) of sequence %d (length %d)", from, to, id, c.Len(id)))
	}
	j := 1
	if key {
		j = 0
	}
	dim := c.layout.HeadDim
	side := c.sides(layer)[j]
	c.runs(s, layer, j, side, h, from, to, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
		cd.Decode(dst[off*dim:(off+cnt)*dim], tile, row0, cnt)
		if side.PreRoPE {
			c.rope(dst[off*dim:(off+cnt)*dim], from+off)
		}
	})
}

// preRoPEChunk is how many pre-RoPE key rows are decoded at a time.
const preRoPEChunk = 64

// scoresPreRoPE computes scores for a side stored before RoPE: rows are
// decoded a chunk at a time, rotated to their positions, and dotted with the
// queries.
func (c *Cache) scoresPreRoPE(s *sequence, layer int, side *Side, h, from, to int, qh []float32, nq int, sc []float32, n int, scr *Scratch) {
	dim := c.layout.HeadDim
	scr.rows = grow(scr.rows, preRoPEChunk*dim)
	rows := scr.rows
	c.runs(s, layer, 0, side, h, from, to, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
		for r0 := 0; r0 < cnt; r0 += preRoPEChunk {
			m := min(preRoPEChunk, cnt-r0)
			cd.Decode(rows[:m*dim], tile, row0+r0, m)
			c.rope(rows[:m*dim], from+off+r0)
			simd.ScoresF32(sc[off+r0:], n, qh, nq, dim, rows[:m*dim], m)
		}
	})
}

// runs calls fn for maximal runs of positions in [from, to) that one source
// holds contiguously: the fp16 sink, the fp16 residual ring, the fp16 staging
// rows of an incomplete group, or a block tile. off is the run's offset from
// from.
func (c *Cache) runs(s *sequence, layer, j int, side *Side, h, from, to int, fn func(cd quant.Codec, tile []byte, row0, cnt, off int)) {
	dim := c.layout.HeadDim
	rows := side.WindowRows()
	var wt []byte
	if rows > 0 {
		wt = s.win[layer][j][h*rows*2*dim : (h+1)*rows*2*dim]
	}
	fp := c.fp16[0]
	bt := c.layout.BlockTokens
	ringFrom := s.n - side.Residual
	stageFrom, phase := side.staging(s)
	p := from
	for p < to {
		switch {
		case p < side.Sink:
			e := min(to, side.Sink)
			fn(fp, wt, p, e-p, p-from)
			p = e
		case side.Residual > 0 && p >= ringFrom:
			r := p % side.Residual
			e := min(to, p+side.Residual-r)
			fn(fp, wt, side.Sink+r, e-p, p-from)
			p = e
		case p >= stageFrom:
			e := min(to, ringFrom)
			if side.Residual == 0 {
				e = to
			}
			fn(fp, wt, side.Sink+side.Residual+(p-phase)%side.Group, e-p, p-from)
			p = e
		default:
			b := p / bt
			e := min(to, (b+1)*bt)
			if side.Residual > 0 {
				e = min(e, max(ringFrom, p+1))
			}
			e = min(e, max(stageFrom, p+1))
			block := int(s.blocks[b])
			tile := c.tile(layer, j, h, block)
			fn(side.Codecs[h], tile, p%bt, e-p, p-from)
			p = e
		}
	}
}
