//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// The KV cache on the device: caches of per-token-row formats — fp32,
// fp16, bf16, fp8 (E4M3, E5M2; static scales, or dynamic ones learnt from
// the first step on the host), the llama.cpp blocks q8_0,
// q4_0, q4_1, q5_0, q5_1, iq4_nl, and int8/int4/int2 per-token groups —
// each side (K, V, every layer) in its own format, with or without sink
// and residual fp16 windows. Staging rows for token groups (per-channel
// ints, KIVI, quanto), rotations and the codebook formats have no CUDA
// kernels yet. Which formats run, and each side's kernel code and row
// bytes, are decided from the formats' traits alone (kvformat.go).
//
// Layout: per layer and side one device buffer of KVHeads × Blocks tiles,
// head-major — KV head h's tile of block b at (h·Blocks + b)·TileBytes —
// each tile exactly the CPU's (kvcache.Side.TileBytes: BlockTokens rows in
// the format's bytes), so that HeldBytes is the layout's accounting to the
// byte and the CPU storage's, and a tile read back is byte for byte what
// pkg/quant's encoder writes (kernels/kvformats.cuh).

// SupportsKV implements backend.Backend, as the Registration's KV: the
// formats whose traits the kernels store (supportsKV, kvformat.go).
func (b *Backend) SupportsKV(f quant.Format) error { return supportsKV(f) }

// kvState is the backend's part of the KV ops: the dynamic shared memory
// each kernel has been allowed beyond the default, and the device memory
// of storages that became unreachable.
type kvState struct {
	shared map[string]int
	dead   *graveyard
}

func (s *kvState) init(b *Backend) error {
	s.shared = map[string]int{}
	s.dead = &graveyard{}
	return nil
}

// graveyard holds the device memory of storages the Go collector found
// unreachable. Their cleanups run on a goroutine of the runtime's while
// the backend may be in use, and the backend is not safe for concurrent
// use, so they only queue the memory here; the backend frees it on its
// own goroutine (reap) when it makes a storage or uploads a step.
type graveyard struct {
	mu   sync.Mutex
	mems []*storageMem
}

func (g *graveyard) bury(m *storageMem) {
	g.mu.Lock()
	g.mems = append(g.mems, m)
	g.mu.Unlock()
}

// reap frees the queued storages' memory.
func (b *Backend) reap() {
	g := b.kv.dead
	g.mu.Lock()
	mems := g.mems
	g.mems = nil
	g.mu.Unlock()
	for _, m := range mems {
		m.release(b.d)
	}
}

// defaultShared is the dynamic shared memory a kernel may use without
// asking (48 KiB).
const defaultShared = 48 << 10

// launchShared is launch for kernels with more than defaultShared bytes of
// dynamic shared memory: it raises the kernel's limit once.
func (b *Backend) launchShared(name string, grid, block dim3, shared int, a args) {
	if shared > defaultShared && b.kv.shared[name] < shared {
		k, err := b.kernel(name)
		if err != nil {
			b.fail(err)
			return
		}
		if err := b.d.setMaxDynamicShared(k, shared); err != nil {
			b.fail(fmt.Errorf("gpu: kernel %s: %w", name, err))
			return
		}
		b.kv.shared[name] = shared
	}
	b.launch(name, grid, block, shared, a)
}

// Storage is one cache's memory on the device (kvcache.Storage). Its
// device buffers are freed once it is unreachable (the caches of package
// kvcache have no Close): its cleanup queues them, and the backend frees
// them at its next NewStorage or step upload.
type Storage struct {
	b      *Backend
	l      *kvcache.Layout
	codecs *kvcache.Codecs
	blocks int // the full layers' pool; the sliding layers' ids follow
	slide  int // the sliding layers' pool (kvcache.StorageParams.SlideBlocks)
	rope   func(rows []float32, pos0 int)
	sides  [][2]kvSide
	mem    *storageMem
	// gen counts the ends of steps (Discard, Restore): a plan's upload is
	// valid for the step it was made in.
	gen  uint64
	meta planMeta
	rd   []byte // Read's staging buffer
	// fp16 windows: slots handed out (nwin), free ones, the capacity of
	// the window buffers, and the layer sides whose saves this step ran
	// (Restore writes them back).
	nwin, winCap int
	freeWin      []int
	saved        [][2]int
	fp16         quant.Codec
	// Tests force an attention path and the decode chunk (0: chosen),
	// and the quantized decode's generic loader.
	path     attnPath
	chunk    int
	qgeneric bool
}

var (
	_ kvcache.Storage  = (*Storage)(nil)
	_ kvcache.Poisoner = (*Storage)(nil)
)

// kvSide is one layer side's buffer.
type kvSide struct {
	p         devptr
	tileBytes int
	// blocks is the side's pool (the full layers' or, with window-only
	// storage, the sliding layers'), whose block ids start at base: the
	// kernels see ids less base (planMeta.build).
	blocks, base int
	kvFmt
	scales devptr // fp8: the scale of each KV head (float32s), else 0
	// fp16 windows: the buffer of winCap slots of KVHeads × wrows rows
	// (0 when the side has none).
	win   devptr
	wrows int
}

// windowed reports whether the side keeps fp16 window rows.
func (sd *kvSide) windowed() bool { return sd.wrows > 0 }

// storageMem is what a Storage holds on the device, buried by a cleanup
// once the Storage is unreachable.
type storageMem struct {
	dead    *graveyard
	pages   []devptr
	wins    map[devptr]bool // window buffers (replaced when they grow)
	meta    devbuf
	scratch devbuf
	undo    devbuf // the step's saved window rows
}

func (m *storageMem) release(d driver) {
	for _, p := range m.pages {
		d.free(p)
	}
	m.pages = nil
	for p := range m.wins {
		d.free(p)
	}
	m.wins = nil
	m.meta.release(d)
	m.scratch.release(d)
	m.undo.release(d)
}

// devbuf is a device buffer that grows.
type devbuf struct {
	p     devptr
	bytes int64
}

// ensure makes the buffer hold at least n bytes, keeping nothing of its
// contents when it grows.
func (buf *devbuf) ensure(b *Backend, n int64) error {
	if n <= buf.bytes {
		return nil
	}
	n = max(n, 2*buf.bytes)
	if buf.p != 0 {
		// Work issued before may still read the old buffer.
		if err := b.d.sync(); err != nil {
			return err
		}
		b.d.free(buf.p)
		buf.p, buf.bytes = 0, 0
	}
	p, err := b.d.alloc(n)
	if err != nil {
		return err
	}
	buf.p, buf.bytes = p, n
	return nil
}

func (buf *devbuf) release(d driver) {
	if buf.p != 0 {
		d.free(buf.p)
		buf.p, buf.bytes = 0, 0
	}
}

// NewStorage implements kvcache.Allocator. It fails, wrapping
// backend.ErrUnsupported, for layouts with formats SupportsKV refuses,
// token groups (staging rows) or pre-RoPE keys; sink and residual fp16
// windows are kept on the device.
func (b *Backend) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	l := p.Layout
	if p.Blocks <= 0 {
		return nil, fmt.Errorf("%w: gpu: pool of %d blocks", kvcache.ErrGeometry, p.Blocks)
	}
	b.reap()
	s := &Storage{b: b, l: l, codecs: p.Codecs, blocks: p.Blocks, slide: p.SlideBlocks, rope: p.RoPE,
		sides: make([][2]kvSide, len(l.Layers)), mem: &storageMem{dead: b.kv.dead, wins: map[devptr]bool{}}}
	fp, err := quant.FP16.NewCodec(quant.CodecParams{Dim: l.HeadDim})
	if err != nil {
		return nil, err
	}
	s.fp16 = fp
	fmts, err := kvLayout(l)
	if err != nil {
		return nil, err
	}
	var scales []float32 // fp8 sides' scales, KVHeads per side
	for i := range l.Layers {
		for j, side := range [2]*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
			kf := fmts[i][j]
			s.sides[i][j].wrows = side.WindowRows()
			if kf.fp8 {
				off := len(scales)
				for h := 0; h < l.KVHeads; h++ {
					c, ok := p.Codecs.Sides[i][j][h].(interface{ Scale() float32 })
					sc := float32(0)
					if ok {
						sc = c.Scale()
					}
					if kf.dynamic {
						sc = 1 // until the first step's rows set it (WriteKV)
					}
					if !(sc > 0 && sc <= math.MaxFloat32) {
						return nil, fmt.Errorf("%w: gpu: layer %d %s: KV head %d has no static scale", backend.ErrUnsupported, i, side.Format.Name(), h)
					}
					scales = append(scales, sc)
				}
				s.sides[i][j].scales = devptr(4 * off) // an offset until the upload below
			}
			nb, base := p.Blocks, 0
			if l.Layers[i].Slide {
				nb, base = p.SlideBlocks, p.Blocks
			}
			s.sides[i][j].blocks, s.sides[i][j].base = nb, base
			bytes := int64(l.KVHeads) * int64(nb) * int64(side.TileBytes)
			ptr, err := s.allocPage(max(bytes, 1))
			if err != nil {
				s.mem.release(b.d)
				return nil, fmt.Errorf("gpu: KV storage of layer %d (%d blocks): %w", i, nb, err)
			}
			s.sides[i][j].p, s.sides[i][j].tileBytes, s.sides[i][j].kvFmt = ptr, side.TileBytes, kf
		}
	}
	if len(scales) > 0 {
		ptr, err := s.allocPage(int64(4 * len(scales)))
		if err == nil {
			err = b.d.htod(ptr, unsafe.Pointer(&scales[0]), int64(4*len(scales)))
		}
		if err != nil {
			s.mem.release(b.d)
			return nil, fmt.Errorf("gpu: KV storage's fp8 scales: %w", err)
		}
		for i := range s.sides {
			for j := range s.sides[i] {
				if sd := &s.sides[i][j]; sd.fp8 {
					sd.scales += ptr
				}
			}
		}
	}
	runtime.AddCleanup(s, func(m *storageMem) { m.dead.bury(m) }, s.mem)
	return s, nil
}

// allocPage allocates and zeroes a layer side's buffer. When the device
// is full it collects garbage first, once: dropped caches free their
// device memory only when the Go collector finds them.
func (s *Storage) allocPage(bytes int64) (devptr, error) {
	p, err := s.b.d.alloc(bytes)
	if err != nil {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // let the cleanups run
		s.b.reap()
		if p, err = s.b.d.alloc(bytes); err != nil {
			return 0, err
		}
	}
	s.mem.pages = append(s.mem.pages, p)
	return p, s.b.d.memset8(p, 0, bytes)
}

// CopyBlock implements kvcache.Storage: one kernel per layer side copies
// the block's tile of every KV head.
func (s *Storage) CopyBlock(dst, src int) { s.blockOp(dst, src) }

// Poison implements kvcache.Poisoner: every byte of the block becomes
// 0xFF (NaN in fp16, bf16 and fp32 tiles).
func (s *Storage) Poison(block int) { s.blockOp(block, -1) }

// blockOp copies block src to block dst in every tile, or fills dst with
// 0xFF bytes when src < 0.
func (s *Storage) blockOp(dst, src int) {
	if dst < 0 || dst >= s.blocks+s.slide || src >= s.blocks+s.slide {
		panic(fmt.Sprintf("gpu: block %d from %d of a pool of %d", dst, src, s.blocks+s.slide))
	}
	for i := range s.sides {
		for j := range s.sides[i] {
			sd := &s.sides[i][j]
			d, sr := dst-sd.base, src
			if src >= 0 {
				sr = src - sd.base
			}
			if d < 0 || d >= sd.blocks || src >= 0 && (sr < 0 || sr >= sd.blocks) {
				continue // the other pool's block
			}
			gx := max(1, min(64, (sd.tileBytes+16*256-1)/(16*256)))
			s.b.launch("kvq_kv_block", dim3{uint32(gx), uint32(s.l.KVHeads), 1}, dim3{256, 1, 1}, 0,
				args{}.ptr(sd.p).int(sd.blocks*sd.tileBytes).int(sd.tileBytes).int(d).int(sr)) // long long, long long, int, int
		}
	}
}

// slotBytes is the bytes of one window slot of side sd: KVHeads × wrows
// fp16 rows.
func (s *Storage) slotBytes(sd *kvSide) int64 {
	return int64(s.l.KVHeads) * int64(sd.wrows) * int64(2*s.l.HeadDim)
}

// AllocWindow implements kvcache.Storage: a free slot, or a new one; the
// window buffers grow (doubling, contents kept) when every slot is used.
func (s *Storage) AllocWindow() (int, error) {
	if n := len(s.freeWin); n > 0 {
		w := s.freeWin[n-1]
		s.freeWin = s.freeWin[:n-1]
		return w, nil
	}
	if s.nwin == s.winCap {
		if err := s.growWindows(max(4, 2*s.winCap)); err != nil {
			return 0, fmt.Errorf("gpu: KV windows of %d slots: %w", 2*s.winCap, err)
		}
	}
	s.nwin++
	return s.nwin - 1, nil
}

// growWindows makes every windowed side's buffer hold slots slots,
// copying the old slots on the device.
func (s *Storage) growWindows(slots int) error {
	for i := range s.sides {
		for j := range s.sides[i] {
			sd := &s.sides[i][j]
			if !sd.windowed() {
				continue
			}
			sb := s.slotBytes(sd)
			p, err := s.b.d.alloc(int64(slots) * sb)
			if err != nil {
				return err
			}
			s.mem.wins[p] = true
			if err := s.b.d.memset8(p, 0, int64(slots)*sb); err != nil {
				return err
			}
			if old := int64(s.winCap) * sb; sd.win != 0 && old > 0 {
				if err := s.b.d.dtod(p, sd.win, old); err != nil {
					return err
				}
				// The old buffer goes once the copy and the work issued
				// before it have finished.
				if err := s.b.d.sync(); err != nil {
					return err
				}
				s.b.d.free(sd.win)
				delete(s.mem.wins, sd.win)
			}
			sd.win = p
		}
	}
	s.winCap = slots
	return nil
}

// FreeWindow implements kvcache.Storage; the slot is kept for the next
// AllocWindow.
func (s *Storage) FreeWindow(w int) { s.freeWin = append(s.freeWin, w) }

// CopyWindow implements kvcache.Storage: one kernel per windowed side.
func (s *Storage) CopyWindow(dst, src int) {
	for i := range s.sides {
		for j := range s.sides[i] {
			sd := &s.sides[i][j]
			if !sd.windowed() {
				continue
			}
			sb := s.slotBytes(sd)
			gx := max(1, min(64, int((sb+16*256-1)/(16*256))))
			s.b.launch("kvq_kv_block", dim3{uint32(gx), 1, 1}, dim3{256, 1, 1}, 0,
				args{}.ptr(sd.win).int(0).int(int(sb)).int(dst).int(src))
		}
	}
}

// Restore implements kvcache.Storage: the window rows that this step's
// saves (OpSave) copied to the undo buffer are written back, and the
// step's plan upload ends.
func (s *Storage) Restore() {
	m := &s.meta
	if m.plan != nil && m.gen == s.gen {
		for _, ls := range s.saved {
			layer, j := ls[0], ls[1]
			sh := &m.shapes[m.plan.SideShape[layer][j]]
			sd := &s.sides[layer][j]
			s.b.launch("kvq_kv_restore", dim3{uint32(sh.nsaves), 1, 1}, dim3{256, 1, 1}, 0,
				args{}.ptr(sd.win).ptr(s.undoAt(m, layer, j)).ptr(m.at(sh.ops)).int(sh.nsaves).
					int(s.l.KVHeads).int(s.l.HeadDim).int(sd.wrows))
		}
	}
	s.Discard()
}

// Discard implements kvcache.Storage; the step's plan upload ends.
func (s *Storage) Discard() {
	s.saved = s.saved[:0]
	s.gen++
}

// undoAt is the first undo entry of a layer side in step m.
func (s *Storage) undoAt(m *planMeta, layer, j int) devptr {
	return s.mem.undo.p + devptr(int64(layer*2+j)*int64(m.maxSaves)*int64(s.l.KVHeads*s.l.HeadDim*2))
}

// HeldBytes implements kvcache.Storage: the tile buffers and the windows
// of the slots in use (as the CPU storage counts them; the window buffers'
// spare capacity is not counted).
func (s *Storage) HeldBytes() int64 {
	var n int64
	live := int64(s.nwin - len(s.freeWin))
	for i := range s.sides {
		for j := range s.sides[i] {
			sd := &s.sides[i][j]
			n += int64(s.l.KVHeads) * int64(sd.blocks) * int64(sd.tileBytes)
			n += live * s.slotBytes(sd)
		}
	}
	return n
}

// Read implements kvcache.Storage: the rows are downloaded (after every
// op issued before) and decoded on the host by the cache's codecs, as the
// CPU storage decodes them. A device failure is reported at the next
// Download.
func (s *Storage) Read(dst []float32, layer int, key bool, h int, runs []kvcache.Run, win, from, to int) {
	j := 1
	if key {
		j = 0
	}
	dim := s.l.HeadDim
	sd := &s.sides[layer][j]
	side := &s.l.Layers[layer].K
	if !key {
		side = &s.l.Layers[layer].V
	}
	codec := s.codecs.Sides[layer][j][h]
	for _, r := range runs {
		p0, p1 := max(from, int(r.Pos)), min(to, int(r.Pos+r.N))
		if p0 >= p1 {
			continue
		}
		row, cnt := int(r.Row)+p0-int(r.Pos), p1-p0
		if r.Block < 0 {
			if !sd.windowed() {
				panic("gpu: a run in an fp16 window of a side without windows")
			}
			n := cnt * 2 * dim
			if cap(s.rd) < n {
				s.rd = make([]byte, n)
			}
			buf := s.rd[:n]
			off := ((int64(win)*int64(s.l.KVHeads)+int64(h))*int64(sd.wrows) + int64(row)) * int64(2*dim)
			if err := s.b.d.dtoh(unsafe.Pointer(&buf[0]), sd.win+devptr(off), int64(n)); err != nil {
				s.b.fail(err)
				return
			}
			s.fp16.Decode(dst[(p0-from)*dim:(p1-from)*dim], buf, 0, cnt)
			continue
		}
		// Rows of contiguous formats are downloaded alone; int tiles
		// (scales, zeros, codes in regions) whole.
		off := (int64(h)*int64(sd.blocks) + int64(int(r.Block)-sd.base)) * int64(sd.tileBytes)
		n := sd.tileBytes
		if sd.rows {
			off += int64(row) * int64(sd.rowBytes)
			n = cnt * sd.rowBytes
		}
		if cap(s.rd) < n {
			s.rd = make([]byte, n)
		}
		buf := s.rd[:n]
		if err := s.b.d.dtoh(unsafe.Pointer(&buf[0]), sd.p+devptr(off), int64(n)); err != nil {
			s.b.fail(err)
			return
		}
		out := dst[(p0-from)*dim : (p1-from)*dim]
		if sd.rows {
			codec.Decode(out, buf, 0, cnt)
		} else {
			codec.Decode(out, buf, row, cnt)
		}
		if side.PreRoPE {
			s.rope(out, p0)
		}
	}
}

// primeFP8 shows a dynamic fp8 side's format the step's rows of x (the
// sequences' rows, downloaded), as the CPU storage's prime does
// (quant.PrimeFP8Scales, vLLM's calculate_kv_scales), and uploads the
// scales its codecs then hold, one per KV head.
func (s *Storage) primeFP8(layer, j int, x *tensor, p *kvcache.Plan) error {
	kvd := s.l.KVHeads * s.l.HeadDim
	var rows []float32
	for _, st := range p.Seqs {
		if (st.Row+st.N)*kvd > x.n {
			panic(fmt.Sprintf("gpu: WriteKV of rows [%d, %d) from a tensor of %d values (rows of %d)", st.Row, st.Row+st.N, x.n, kvd))
		}
		n := len(rows)
		rows = append(rows, make([]float32, st.N*kvd)...)
		if err := s.b.d.dtoh(unsafe.Pointer(&rows[n]), x.p+devptr(4*st.Row*kvd), int64(4*st.N*kvd)); err != nil {
			return err
		}
	}
	quant.PrimeFP8Scales(s.codecs.Formats[layer][j], layer, j == 0, s.l.KVHeads, s.l.HeadDim, rows)
	sc := make([]float32, s.l.KVHeads)
	for h := range sc {
		c, ok := s.codecs.Sides[layer][j][h].(interface{ Scale() float32 })
		if !ok || !(c.Scale() > 0 && c.Scale() <= math.MaxFloat32) {
			return fmt.Errorf("%w: gpu: layer %d side %d KV head %d: no fp8 scale after the first step", backend.ErrUnsupported, layer, j, h)
		}
		sc[h] = c.Scale()
	}
	return s.b.d.htod(s.sides[layer][j].scales, unsafe.Pointer(&sc[0]), int64(4*len(sc)))
}

// unlocked returns the storage behind a Device's locked one.
func unlocked(kv kvcache.Storage) kvcache.Storage {
	if l, ok := kv.(*lockedStorage); ok {
		return l.s
	}
	return kv
}

// planMeta is a step's metadata on the device (kernels/attn.cu): the
// sequence table, per window shape the block tables, the runs and the
// write ops. It is made once per step and reused by every layer's WriteKV
// and Attention: a cache's Reserve returns the same *Plan every step, so
// the upload is keyed by the plan and the storage's step count (gen, bumped
// when the step commits or rolls back), and checked against the plan's
// sequence list, which a plan built by hand could change in place.
type planMeta struct {
	plan   *kvcache.Plan
	gen    uint64
	err    error // why the plan cannot run on this storage
	host   []int32
	dev    devbuf
	seqs   []seqMeta
	shapes []shapeMeta
	maxN   int
	// maxSaves is the most OpSave's of a shape: the undo entries of each
	// layer side.
	maxSaves int
}

// seqMeta is what the host needs of a sequence's step to shape launches.
type seqMeta struct {
	row, n, pos int
	exact       bool
}

// shapeMeta holds offsets (in int32s) of a window shape's tables, runs,
// run index and write ops in the metadata, and their counts.
type shapeMeta struct {
	tab, runs, runIdx, ops int
	nops, maxSrc           int
	nsaves                 int // the first nsaves ops are OpSave's
	nplan                  int // len(Plan.Writes[shape])
}

// Window runs per sequence and shape in the metadata (kernels/attn.cu,
// KVQ_WIN_INTS, KVQ_WIN_RUNS): a header before each block table.
const (
	winInts = 20
	winRuns = 6
)

// Write op kinds of the kernels (kernels/kvwrite.cu, KVQ_OP_*).
const (
	opEncode = 0
	opWindow = 1
	opSave   = 2
)

// Sequence table entries (kernels/attn.cu, KVQ_SEQ_INTS).
const seqInts = 8

// at is the device address of int32 i of the metadata.
func (m *planMeta) at(i int) devptr { return m.dev.p + devptr(4*i) }

// matches reports whether plan p still describes the sequences m was made
// from.
func (m *planMeta) matches(p *kvcache.Plan) bool {
	if len(p.Seqs) != len(m.seqs) || len(p.Writes) != len(m.shapes) {
		return false
	}
	for i, st := range p.Seqs {
		if sm := m.seqs[i]; sm.row != st.Row || sm.n != st.N || sm.pos != st.Pos || sm.exact != st.Exact {
			return false
		}
	}
	for k := range p.Writes {
		if len(p.Writes[k]) != m.shapes[k].nplan {
			return false
		}
	}
	return true
}

// prepare returns p's metadata on the device, uploading it on the first
// call of the step; nil (with the error recorded) when the plan cannot
// run here.
func (s *Storage) prepare(p *kvcache.Plan) *planMeta {
	if c := p.Cache(); c != nil && unlocked(c.Storage()) != s {
		panic("gpu: a plan of another cache")
	}
	m := &s.meta
	if m.plan == p && m.gen == s.gen && p.Cache() != nil && m.matches(p) {
		if m.err != nil {
			s.b.fail(m.err)
			return nil
		}
		return m
	}
	s.b.reap()
	m.plan, m.gen = p, s.gen
	m.err = m.build(s, p)
	if m.err == nil {
		m.err = m.dev.ensure(s.b, int64(4*max(1, len(m.host))))
	}
	if m.err == nil && m.maxSaves > 0 {
		m.err = s.mem.undo.ensure(s.b, int64(len(s.sides)*2*m.maxSaves*s.l.KVHeads*s.l.HeadDim*2))
	}
	if m.err == nil && len(m.host) > 0 {
		m.err = s.b.d.htod(m.dev.p, unsafe.Pointer(&m.host[0]), int64(4*len(m.host)))
	}
	if m.err != nil {
		m.plan = nil
		s.b.fail(m.err)
		return nil
	}
	return m
}

// build encodes plan p into m.host.
func (m *planMeta) build(s *Storage, p *kvcache.Plan) error {
	bt := s.l.BlockTokens
	nseq := len(p.Seqs)
	m.host = m.host[:0]
	m.seqs = m.seqs[:0]
	m.shapes = m.shapes[:0]
	m.maxN, m.maxSaves = 0, 0
	// The sequence table, then per shape: block tables (each after its
	// window runs), runs, run index, ops.
	m.host = append(m.host, make([]int32, nseq*seqInts)...)
	tabLen := 0
	for i, st := range p.Seqs {
		if st.N <= 0 || st.Pos < 0 {
			return fmt.Errorf("gpu: plan sequence %d with %d tokens at %d", st.Seq, st.N, st.Pos)
		}
		e := m.host[i*seqInts : (i+1)*seqInts]
		tabLen += winInts
		e[0], e[1], e[2], e[4], e[5] = int32(st.Row), int32(st.N), int32(st.Pos), int32(tabLen), int32(st.Window)
		if st.Exact {
			e[3] = 1
		}
		tabLen += (st.Pos + st.N + bt - 1) / bt
		m.seqs = append(m.seqs, seqMeta{row: st.Row, n: st.N, pos: st.Pos, exact: st.Exact})
		m.maxN = max(m.maxN, st.N)
	}
	for k := range p.Writes {
		sh := shapeMeta{tab: len(m.host), nplan: len(p.Writes[k])}
		// Sliding shapes' blocks are the sliding pool's, whose ids start
		// after the full pool's; the kernels index each pool from 0.
		pbase, pool := 0, s.blocks
		slide := k < len(p.Shapes) && p.Shapes[k].Slide
		if slide {
			pbase, pool = s.blocks, s.slide
		}
		m.host = append(m.host, make([]int32, tabLen)...)
		tab := m.host[sh.tab:]
		for i, st := range p.Seqs {
			if k >= len(st.Runs) {
				return fmt.Errorf("gpu: plan sequence %d has no runs for shape %d", st.Seq, k)
			}
			base := int(m.host[i*seqInts+4])
			hdr := tab[base-winInts : base]
			nblk := (st.Pos + st.N + bt - 1) / bt
			for b := 0; b < nblk; b++ {
				tab[base+b] = -1
			}
			covered := 0 // positions in window runs
			for _, r := range st.Runs[k] {
				if r.Block < 0 {
					n := int(hdr[0])
					if n == winRuns || st.Window < 0 {
						return fmt.Errorf("%w: gpu: sequence %d reads more than %d fp16 window runs (or has no window)", backend.ErrUnsupported, st.Seq, winRuns)
					}
					hdr[1+3*n], hdr[2+3*n], hdr[3+3*n] = r.Pos, r.N, r.Row
					hdr[0]++
					covered += int(r.N)
					continue
				}
				if int(r.Block) < pbase || int(r.Block) >= pbase+pool || int(r.Row) != int(r.Pos)%bt || int(r.Row+r.N) > bt || int(r.Pos+r.N) > st.Pos+st.N {
					return fmt.Errorf("gpu: sequence %d: run %+v does not fit %d-token blocks of a pool of %d", st.Seq, r, bt, pool)
				}
				tab[base+int(r.Pos)/bt] = r.Block - int32(pbase)
			}
			if slide {
				// Blocks released before the window: the decode kernels
				// load whole 32-position tiles, rows below the window's
				// first position included (masked: weight 0), so these
				// entries name a block the sequence still holds (its
				// first) rather than -1, an address outside the pool.
				// Its rows hold keys and values of the sequence, finite
				// unless the block is also the tail and the row not yet
				// written (a window shorter than a block).
				first := 0
				for first < nblk && tab[base+first] < 0 {
					first++
				}
				for b := 0; b < first && first < nblk; b++ {
					tab[base+b] = tab[base+first]
				}
			}
			if covered == 0 {
				for b := 0; b < nblk; b++ {
					if tab[base+b] < 0 {
						return fmt.Errorf("gpu: sequence %d: runs leave positions [%d, %d) unplaced", st.Seq, b*bt, (b+1)*bt)
					}
				}
			}
		}
		sh.runs = len(m.host)
		for _, st := range p.Seqs {
			for _, r := range st.Runs[k] {
				blk := r.Block
				if blk >= 0 {
					blk -= int32(pbase)
				}
				m.host = append(m.host, r.Pos, r.N, blk, r.Row)
			}
		}
		sh.runIdx = len(m.host)
		n := int32(0)
		m.host = append(m.host, 0)
		for _, st := range p.Seqs {
			n += int32(len(st.Runs[k]))
			m.host = append(m.host, n)
		}
		// Ops: the saves first (they read the rows before the step
		// writes them), then the writes, of which only the last to a
		// window row (a step longer than the ring writes a row twice; the
		// runs read the later position).
		sh.ops = len(m.host)
		last := map[[2]int32]int{}
		for i, op := range p.Writes[k] {
			switch op.Kind {
			case kvcache.OpSave:
				m.host = append(m.host, opSave, int32(sh.nsaves), op.Win, op.Row)
				sh.nsaves++
			case kvcache.OpWindow:
				last[[2]int32{op.Win, op.Row}] = i
			}
		}
		for i, op := range p.Writes[k] {
			switch op.Kind {
			case kvcache.OpSave:
			case kvcache.OpWindow:
				if last[[2]int32{op.Win, op.Row}] != i {
					continue
				}
				if op.Src < 0 || op.Win < 0 || int(op.Win) >= s.nwin {
					return fmt.Errorf("gpu: write op %+v outside %d window slots", op, s.nwin)
				}
				m.host = append(m.host, opWindow, op.Src, op.Win, op.Row)
				sh.maxSrc = max(sh.maxSrc, int(op.Src))
			case kvcache.OpEncode:
				if op.Src < 0 || int(op.Block) < pbase || int(op.Block) >= pbase+pool || op.Slot < 0 || int(op.Slot) >= bt {
					return fmt.Errorf("gpu: write op %+v outside a pool of %d blocks of %d tokens", op, pool, bt)
				}
				m.host = append(m.host, opEncode, op.Src, op.Block-int32(pbase), op.Slot)
				sh.maxSrc = max(sh.maxSrc, int(op.Src))
			default:
				return fmt.Errorf("%w: gpu: write op kind %d (token groups)", backend.ErrUnsupported, op.Kind)
			}
		}
		sh.nops = (len(m.host) - sh.ops) / 4
		m.maxSaves = max(m.maxSaves, sh.nsaves)
		m.shapes = append(m.shapes, sh)
	}
	return nil
}

// WriteKV implements backend.Backend: one kernel per side quantizes and
// stores the step's rows for the layer, the bytes of pkg/quant's encoder
// (kernels/kvformats.cuh). On a cache's first step (p.Prime), dynamic fp8
// sides learn their scales from the step's rows first, on the host, as
// the CPU storage does (primeFP8).
func (b *Backend) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	s := kv.(*Storage)
	m := s.prepare(p)
	if m == nil {
		return
	}
	if p.Prime {
		for j, x := range [2]backend.Tensor{k, v} {
			if s.sides[layer][j].dynamic {
				if err := s.primeFP8(layer, j, dev(x), p); err != nil {
					b.fail(err)
					return
				}
			}
		}
	}
	kvd := s.l.KVHeads * s.l.HeadDim
	for j, x := range [2]backend.Tensor{k, v} {
		sh := &m.shapes[p.SideShape[layer][j]]
		if sh.nops == 0 {
			continue
		}
		xt := dev(x)
		if (sh.maxSrc+1)*kvd > xt.n {
			panic(fmt.Sprintf("gpu: WriteKV of row %d from a tensor of %d values (rows of %d)", sh.maxSrc, xt.n, kvd))
		}
		sd := &s.sides[layer][j]
		units := s.l.KVHeads * sd.units(s.l.HeadDim)
		if sd.windowed() {
			units = max(units, s.l.KVHeads*s.l.HeadDim)
		}
		var undo devptr
		if sh.nsaves > 0 {
			undo = s.undoAt(m, layer, j)
			s.saved = append(s.saved, [2]int{layer, j})
		}
		// The saves, then the writes (kvq_kv_write runs a launch's ops
		// in any order).
		for _, part := range [2][2]int{{0, sh.nsaves}, {sh.nsaves, sh.nops}} {
			if part[1] <= part[0] {
				continue
			}
			b.launch("kvq_kv_write", dim3{uint32(part[1] - part[0]), 1, 1}, dim3{uint32(min(256, (units+31)/32*32)), 1, 1}, 0,
				args{}.ptr(sd.p).ptr(xt.p).ptr(m.at(sh.ops+4*part[0])).int(part[1]-part[0]).int(s.l.KVHeads).int(s.l.HeadDim).
					int(sd.blocks).int(s.l.BlockTokens).int(sd.code).ptr(sd.scales).ptr(sd.win).int(sd.wrows).ptr(undo))
		}
	}
}
