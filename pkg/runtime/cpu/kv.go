package cpu

import (
	"fmt"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Storage is a cache's memory in host RAM. Tiles of one KV head's blocks are
// contiguous (pages[layer][side][head] holds Blocks tiles), so that a
// sequence's consecutive blocks of one head are read front to back. A
// window slot holds, per layer and side, KVHeads regions of WindowRows fp16
// rows.
type Storage struct {
	l       *kvcache.Layout
	codecs  *kvcache.Codecs
	blocks  int // the full layers' pool; the sliding layers' ids follow
	slide   int // the sliding layers' pool (kvcache.StorageParams.SlideBlocks)
	pages   [][2][][]byte
	wins    []window // by slot; nil when free
	free    []int    // free window slots
	undo    [][]undoRow
	rope    func(rows []float32, pos0 int)
	fp16    quant.Codec
	workers par.Workers
	tasks   []task    // Attend's, reused
	job     attendJob // Attend's work over tasks, reused
	// queryRows bounds a task's query rows (0: maxQueryRows); tests and
	// benchmarks lower it to compare with per-query attention.
	queryRows int
}

// window is one slot: [layer][side] KVHeads·WindowRows fp16 rows.
type window [][2][]byte

// undoRow is one saved window row of one head (OpSave).
type undoRow struct {
	layer, side, win, row int
	data                  []byte
}

var (
	_ kvcache.Storage  = (*Storage)(nil)
	_ kvcache.Poisoner = (*Storage)(nil)
)

// NewStorage implements kvcache.Allocator.
func (b *Backend) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	return NewStorage(p, b.workers)
}

// NewStorage allocates host storage; workers bound the goroutines of its
// writes.
func NewStorage(p kvcache.StorageParams, workers par.Workers) (*Storage, error) {
	l := p.Layout
	if p.Blocks <= 0 {
		return nil, fmt.Errorf("%w: cpu: pool of %d blocks", kvcache.ErrGeometry, p.Blocks)
	}
	fp, err := quant.FP16.NewCodec(quant.CodecParams{Dim: l.HeadDim})
	if err != nil {
		return nil, err
	}
	s := &Storage{l: l, codecs: p.Codecs, blocks: p.Blocks, slide: p.SlideBlocks, rope: p.RoPE, fp16: fp, workers: workers,
		pages: make([][2][][]byte, len(l.Layers)), undo: make([][]undoRow, l.KVHeads)}
	for i := range l.Layers {
		n := p.Blocks
		if l.Layers[i].Slide {
			n = p.SlideBlocks
		}
		for j, side := range sides(l, i) {
			s.pages[i][j] = make([][]byte, l.KVHeads)
			for h := range s.pages[i][j] {
				s.pages[i][j][h] = make([]byte, n*side.TileBytes)
			}
		}
	}
	return s, nil
}

func sides(l *kvcache.Layout, layer int) [2]*kvcache.Side {
	ll := &l.Layers[layer]
	return [2]*kvcache.Side{&ll.K, &ll.V}
}

// tile returns KV head h's tile of block in layer, side j (0 keys, 1 values).
func (s *Storage) tile(layer, j, h, block int) []byte {
	tb := sides(s.l, layer)[j].TileBytes
	if s.l.Layers[layer].Slide {
		block -= s.blocks
	}
	return s.pages[layer][j][h][block*tb:][:tb]
}

// index is block's tile index in layer's pool, or -1 when block belongs to
// the other pool.
func (s *Storage) index(layer, block int) int {
	slide := s.l.Layers[layer].Slide
	switch {
	case !slide && block < s.blocks:
		return block
	case slide && block >= s.blocks:
		return block - s.blocks
	}
	return -1
}

// winRows returns KV head h's fp16 rows of window w in layer, side j.
func (s *Storage) winRows(w, layer, j, h int) []byte {
	rows := sides(s.l, layer)[j].WindowRows()
	rb := rows * 2 * s.l.HeadDim
	return s.wins[w][layer][j][h*rb : (h+1)*rb]
}

// CopyBlock implements kvcache.Storage.
func (s *Storage) CopyBlock(dst, src int) {
	for i := range s.pages {
		dst, src := s.index(i, dst), s.index(i, src)
		if dst < 0 || src < 0 {
			continue
		}
		for j := 0; j < 2; j++ {
			tb := sides(s.l, i)[j].TileBytes
			for _, hp := range s.pages[i][j] {
				copy(hp[dst*tb:(dst+1)*tb], hp[src*tb:(src+1)*tb])
			}
		}
	}
}

// Poison implements kvcache.Poisoner: every byte of the block becomes 0xFF
// (NaN in fp16 and fp32 tiles, extreme codes elsewhere).
func (s *Storage) Poison(block int) {
	for i := range s.pages {
		block := s.index(i, block)
		if block < 0 {
			continue
		}
		for j := 0; j < 2; j++ {
			tb := sides(s.l, i)[j].TileBytes
			for _, hp := range s.pages[i][j] {
				b := hp[block*tb : (block+1)*tb]
				for k := range b {
					b[k] = 0xFF
				}
			}
		}
	}
}

// AllocWindow implements kvcache.Storage.
func (s *Storage) AllocWindow() (int, error) {
	if n := len(s.free); n > 0 {
		w := s.free[n-1]
		s.free = s.free[:n-1]
		return w, nil
	}
	win := make(window, len(s.l.Layers))
	for i := range win {
		for j, side := range sides(s.l, i) {
			if r := side.WindowRows(); r > 0 {
				win[i][j] = make([]byte, r*2*s.l.HeadDim*s.l.KVHeads)
			}
		}
	}
	s.wins = append(s.wins, win)
	return len(s.wins) - 1, nil
}

// FreeWindow implements kvcache.Storage. The slot's memory is kept for
// the next AllocWindow.
func (s *Storage) FreeWindow(w int) { s.free = append(s.free, w) }

// CopyWindow implements kvcache.Storage.
func (s *Storage) CopyWindow(dst, src int) {
	for i := range s.wins[src] {
		for j := 0; j < 2; j++ {
			copy(s.wins[dst][i][j], s.wins[src][i][j])
		}
	}
}

// Restore implements kvcache.Storage.
func (s *Storage) Restore() {
	for h, log := range s.undo {
		for i := len(log) - 1; i >= 0; i-- {
			u := log[i]
			copy(s.winRows(u.win, u.layer, u.side, h)[u.row*2*s.l.HeadDim:], u.data)
		}
	}
	s.Discard()
}

// Discard implements kvcache.Storage.
func (s *Storage) Discard() {
	for h := range s.undo {
		s.undo[h] = s.undo[h][:0]
	}
}

// HeldBytes implements kvcache.Storage: the pages and the windows of the
// live slots.
func (s *Storage) HeldBytes() int64 {
	var n int64
	for _, p := range s.pages {
		for _, side := range p {
			for _, hp := range side {
				n += int64(len(hp))
			}
		}
	}
	freed := map[int]bool{}
	for _, w := range s.free {
		freed[w] = true
	}
	for k, w := range s.wins {
		if freed[k] {
			continue
		}
		for _, lw := range w {
			n += int64(len(lw[0]) + len(lw[1]))
		}
	}
	return n
}

// Read implements kvcache.Storage.
func (s *Storage) Read(dst []float32, layer int, key bool, h int, runs []kvcache.Run, win, from, to int) {
	j := 1
	if key {
		j = 0
	}
	dim := s.l.HeadDim
	side := sides(s.l, layer)[j]
	s.eachRun(runs, from, to, layer, j, h, win, func(cd quant.Codec, tile []byte, row0, cnt, off int) {
		cd.Decode(dst[off*dim:(off+cnt)*dim], tile, row0, cnt)
		if side.PreRoPE {
			s.rope(dst[off*dim:(off+cnt)*dim], from+off)
		}
	})
}

// eachRun calls fn for the parts of runs inside [from, to): the codec and
// tile (block or window rows) that hold them, the first row, the count and
// the offset from from.
func (s *Storage) eachRun(runs []kvcache.Run, from, to, layer, j, h, win int, fn func(cd quant.Codec, tile []byte, row0, cnt, off int)) {
	codec := s.codecs.Sides[layer][j][h]
	for _, r := range runs {
		p0, p1 := max(from, int(r.Pos)), min(to, int(r.Pos+r.N))
		if p0 >= p1 {
			continue
		}
		row := int(r.Row) + p0 - int(r.Pos)
		if r.Block < 0 {
			fn(s.fp16, s.winRows(win, layer, j, h), row, p1-p0, p0-from)
			continue
		}
		fn(codec, s.tile(layer, j, h, int(r.Block)), row, p1-p0, p0-from)
	}
}

// writeWork is the number of values written below which WriteKV runs on
// the calling goroutine.
const writeWork = 1 << 14

// WriteKV implements backend.Backend.
func (b *Backend) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	kv.(*Storage).Write(layer, host(k), host(v), p)
}

// Write executes p's writes for layer from host rows k and v.
func (s *Storage) Write(layer int, k, v []float32, p *kvcache.Plan) {
	kvd := s.l.KVHeads * s.l.HeadDim
	if p.Prime {
		s.prime(layer, k, v, p)
	}
	for j, src := range [2][]float32{k, v} {
		ops := p.Writes[p.SideShape[layer][j]]
		if len(ops) == 0 {
			continue
		}
		per := max(1, writeWork/max(1, len(ops)*kvd))
		if s.workers.Serial(s.l.KVHeads, 1, per) { // a decode step: no closure
			s.applyHeads(0, s.l.KVHeads, layer, j, ops, src)
			continue
		}
		s.workers.For(s.l.KVHeads, 1, per, func(lo, hi int) { s.applyHeads(lo, hi, layer, j, ops, src) })
	}
}

// applyHeads runs ops for KV heads [lo, hi) of layer side j.
func (s *Storage) applyHeads(lo, hi, layer, j int, ops []kvcache.Op, src []float32) {
	var tmp []float32
	for h := lo; h < hi; h++ {
		tmp = s.apply(tmp, layer, j, h, ops, src)
	}
}

// prime shows formats that learn from the first batch (fp8:dynamic) the
// rows of this cache's tokens, as vLLM's calculate_kv_scales sees the first
// forward batch.
func (s *Storage) prime(layer int, k, v []float32, p *kvcache.Plan) {
	kvd := s.l.KVHeads * s.l.HeadDim
	for j, src := range [2][]float32{k, v} {
		var rows []float32
		for _, st := range p.Seqs {
			rows = append(rows, src[st.Row*kvd:(st.Row+st.N)*kvd]...)
		}
		quant.PrimeFP8Scales(s.codecs.Formats[layer][j], layer, j == 0, s.l.KVHeads, s.l.HeadDim, rows)
	}
}

// apply runs ops for KV head h of layer side j; tmp is reusable scratch.
func (s *Storage) apply(tmp []float32, layer, j, h int, ops []kvcache.Op, src []float32) []float32 {
	dim, kvd := s.l.HeadDim, s.l.KVHeads*s.l.HeadDim
	codec := s.codecs.Sides[layer][j][h]
	row := func(r int32) []float32 { return src[int(r)*kvd+h*dim : int(r)*kvd+(h+1)*dim] }
	for _, op := range ops {
		switch op.Kind {
		case kvcache.OpSave:
			wr := s.winRows(int(op.Win), layer, j, h)[int(op.Row)*2*dim:][:2*dim]
			s.undo[h] = append(s.undo[h], undoRow{layer: layer, side: j, win: int(op.Win), row: int(op.Row), data: append([]byte(nil), wr...)})
		case kvcache.OpWindow:
			s.fp16.Encode(s.winRows(int(op.Win), layer, j, h), int(op.Row), row(op.Src), 1)
		case kvcache.OpEncode:
			codec.Encode(s.tile(layer, j, h, int(op.Block)), int(op.Slot), row(op.Src), 1)
		case kvcache.OpFlushGroup, kvcache.OpFlushRows:
			n := int(op.N)
			if cap(tmp) < n*dim {
				tmp = make([]float32, n*dim)
			}
			tmp = tmp[:n*dim]
			s.fp16.Decode(tmp, s.winRows(int(op.Win), layer, j, h), int(op.Row), n)
			codec.Encode(s.tile(layer, j, h, int(op.Block)), int(op.Slot), tmp, n)
		}
	}
	return tmp
}
