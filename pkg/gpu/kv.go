//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// The KV cache on the device: caches of per-token-row formats without
// fp16 windows — fp32, fp16, bf16, fp8 (E4M3, E5M2; static scales), the
// llama.cpp blocks q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, and int8/int4/int2
// per-token groups — each side (K, V, every layer) in its own format.
// Sink, residual and staging windows, token groups (per-channel ints,
// KIVI, quanto), rotations, dynamic fp8 scales and the codebook formats
// have no CUDA kernels yet.
//
// Layout: per layer and side one device buffer of KVHeads × Blocks tiles,
// head-major — KV head h's tile of block b at (h·Blocks + b)·TileBytes —
// each tile exactly the CPU's (kvcache.Side.TileBytes: BlockTokens rows in
// the format's bytes), so that HeldBytes is the layout's accounting to the
// byte and the CPU storage's, and a tile read back is byte for byte what
// pkg/quant's encoder writes (kernels/kvformats.cuh).

// Side format kinds, as the kernels number them (kernels/kvformats.cuh).
// A side's code is kind | group<<8 | flags.
const (
	kvF32 = iota
	kvF16
	kvBF16
	kvE4M3
	kvE5M2
	kvQ80
	kvQ40
	kvQ41
	kvQ50
	kvQ51
	kvIQ4NL
	kvInt8
	kvInt4
	kvInt2
)

// Format code flags.
const (
	kvSym   = 1 << 20 // symmetric int groups
	kvNoSat = 1 << 21 // fp8, non-saturating cast
)

// kvGroupMax is the largest int group the code holds (12 bits).
const kvGroupMax = 1<<12 - 1

// blockKinds maps the llama.cpp block formats (without :rot) to kinds,
// with their bytes per 32 values.
var blockKinds = []struct {
	f     quant.Format
	kind  int
	bytes int
}{
	{quant.Q80, kvQ80, 34}, {quant.Q40, kvQ40, 18}, {quant.Q41, kvQ41, 20},
	{quant.Q50, kvQ50, 22}, {quant.Q51, kvQ51, 24}, {quant.IQ4NL, kvIQ4NL, 18},
}

// kvFmt is a side's format as the kernels see it.
type kvFmt struct {
	code     int  // kind | group<<8 | flags
	rowBytes int  // bytes per row (token) of a tile
	rows     bool // a tile's rows are contiguous (all but the int groups)
	fp8      bool // the codecs hold a scale (kernels read it per KV head)
}

func (k kvFmt) kind() int { return k.code & 0xff }

// kvKind classifies format f: its kind, the int group (0: the whole row)
// and flags, or an error wrapping backend.ErrUnsupported that says why no
// kernel stores it.
func kvKind(f quant.Format) (kind, group, flags int, err error) {
	switch f {
	case quant.FP32:
		return kvF32, 0, 0, nil
	case quant.FP16:
		return kvF16, 0, 0, nil
	case quant.BF16:
		return kvBF16, 0, 0, nil
	}
	for _, bk := range blockKinds {
		if f == bk.f {
			return bk.kind, 0, 0, nil
		}
	}
	unsupported := func(why string) (int, int, int, error) {
		return 0, 0, 0, fmt.Errorf("%w: the GPU has no kernel for KV format %s yet (%s; use --device cpu for it)", backend.ErrUnsupported, f.Name(), why)
	}
	if ip := quant.IntParams(f); ip.Bits != 0 {
		switch {
		case ip.Channel:
			return unsupported("per-channel int groups span tokens")
		case ip.Group > kvGroupMax:
			return unsupported(fmt.Sprintf("int groups of more than %d values", kvGroupMax))
		}
		if ip.Sym {
			flags = kvSym
		}
		switch ip.Bits {
		case 8:
			return kvInt8, ip.Group, flags, nil
		case 4:
			return kvInt4, ip.Group, flags, nil
		case 2:
			return kvInt2, ip.Group, flags, nil
		}
		return unsupported(fmt.Sprintf("%d-bit ints", ip.Bits))
	}
	name := f.Name()
	parts := strings.Split(name, ":")
	switch parts[0] {
	case "fp8-e4m3":
		kind = kvE4M3
	case "fp8-e5m2":
		kind = kvE5M2
	default:
		if len(parts) > 1 && parts[len(parts)-1] == "rot" {
			return unsupported("Hadamard-rotated rows")
		}
		return unsupported("fp32, fp16, bf16, fp8 with static scales, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl and per-token int8/int4/int2 groups run there")
	}
	for _, o := range parts[1:] {
		switch {
		case o == "head", strings.HasPrefix(o, "scales@"):
		case o == "nosat":
			flags |= kvNoSat
		case o == "dynamic":
			return unsupported("dynamic fp8 scales are learnt from the first batch on the host; give static scales with scales@FILE")
		case o == "rot":
			return unsupported("Hadamard-rotated rows")
		default:
			return unsupported(fmt.Sprintf("fp8 option %q", o))
		}
	}
	return kind, 0, flags, nil
}

// kvFormat returns the kernels' view of format f for rows of dim values.
func kvFormat(f quant.Format, dim int) (kvFmt, error) {
	kind, group, flags, err := kvKind(f)
	if err != nil {
		return kvFmt{}, err
	}
	k := kvFmt{code: kind | flags, rows: true}
	switch kind {
	case kvF32:
		k.rowBytes = 4 * dim
	case kvF16, kvBF16:
		k.rowBytes = 2 * dim
	case kvE4M3, kvE5M2:
		k.rowBytes, k.fp8 = dim, true
	case kvInt8, kvInt4, kvInt2:
		bits := map[int]int{kvInt8: 8, kvInt4: 4, kvInt2: 2}[kind]
		if group == 0 || group > dim {
			group = dim // the whole row, as pkg/quant's tokenCodec
		}
		if dim%group != 0 || dim*bits%8 != 0 || group > kvGroupMax {
			return kvFmt{}, fmt.Errorf("%w: gpu: %s with head size %d", kvcache.ErrGeometry, f.Name(), dim)
		}
		meta := 4
		if flags&kvSym != 0 {
			meta = 2
		}
		k.code |= group << 8
		k.rowBytes, k.rows = dim*bits/8+dim/group*meta, false
	default:
		for _, bk := range blockKinds {
			if bk.kind == kind {
				k.rowBytes = dim / 32 * bk.bytes
			}
		}
	}
	return k, nil
}

// units is the number of encoding units of one KV head's row (the write
// kernel's threads; kernels/kvformats.cuh, kvq_units).
func (k kvFmt) units(dim int) int {
	switch kind := k.kind(); {
	case kind <= kvE5M2:
		return dim
	case kind >= kvInt8:
		group := k.code >> 8 & 0xfff
		if kind == kvInt4 && group%32 != 0 || kind == kvInt2 && group%4 != 0 {
			return 1
		}
		return dim / group
	}
	return dim / 32
}

// SupportsKV implements backend.Backend: the formats kvKind accepts.
func (b *Backend) SupportsKV(f quant.Format) error {
	_, _, _, err := kvKind(f)
	return err
}

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
	blocks int
	rope   func(rows []float32, pos0 int)
	sides  [][2]kvSide
	mem    *storageMem
	// gen counts the ends of steps (Discard, Restore): a plan's upload is
	// valid for the step it was made in.
	gen  uint64
	meta planMeta
	rd   []byte // Read's staging buffer
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
	kvFmt
	scales devptr // fp8: the scale of each KV head (float32s), else 0
}

// storageMem is what a Storage holds on the device, buried by a cleanup
// once the Storage is unreachable.
type storageMem struct {
	dead    *graveyard
	pages   []devptr
	meta    devbuf
	scratch devbuf
}

func (m *storageMem) release(d driver) {
	for _, p := range m.pages {
		d.free(p)
	}
	m.pages = nil
	m.meta.release(d)
	m.scratch.release(d)
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
// backend.ErrUnsupported, for layouts with formats SupportsKV refuses or
// with fp16 windows.
func (b *Backend) NewStorage(p kvcache.StorageParams) (kvcache.Storage, error) {
	l := p.Layout
	if p.Blocks <= 0 {
		return nil, fmt.Errorf("%w: gpu: pool of %d blocks", kvcache.ErrGeometry, p.Blocks)
	}
	b.reap()
	s := &Storage{b: b, l: l, codecs: p.Codecs, blocks: p.Blocks, rope: p.RoPE,
		sides: make([][2]kvSide, len(l.Layers)), mem: &storageMem{dead: b.kv.dead}}
	var scales []float32 // fp8 sides' scales, KVHeads per side
	for i := range l.Layers {
		for j, side := range [2]*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
			if side.Codecs == nil {
				return nil, fmt.Errorf("%w: gpu: layer %d stores no values (latent attention)", backend.ErrUnsupported, i)
			}
			kf, err := kvFormat(side.Format, l.HeadDim)
			if err != nil {
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			if sh := side.Shape(); sh.Windowed() || sh.Group > 1 || side.PreRoPE {
				return nil, fmt.Errorf("%w: gpu: layer %d %s: fp16 windows and token groups have no CUDA kernel yet", backend.ErrUnsupported, i, side.Format.Name())
			}
			if want := l.BlockTokens * kf.rowBytes; side.TileBytes != want {
				return nil, fmt.Errorf("%w: gpu: layer %d %s tile of %d bytes, want %d", kvcache.ErrGeometry, i, side.Format.Name(), side.TileBytes, want)
			}
			if kf.fp8 {
				off := len(scales)
				for h := 0; h < l.KVHeads; h++ {
					c, ok := p.Codecs.Sides[i][j][h].(interface{ Scale() float32 })
					sc := float32(0)
					if ok {
						sc = c.Scale()
					}
					if !(sc > 0 && sc <= math.MaxFloat32) {
						return nil, fmt.Errorf("%w: gpu: layer %d %s: KV head %d has no static scale", backend.ErrUnsupported, i, side.Format.Name(), h)
					}
					scales = append(scales, sc)
				}
				s.sides[i][j].scales = devptr(4 * off) // an offset until the upload below
			}
			bytes := int64(l.KVHeads) * int64(p.Blocks) * int64(side.TileBytes)
			ptr, err := s.allocPage(bytes)
			if err != nil {
				s.mem.release(b.d)
				return nil, fmt.Errorf("gpu: KV storage of layer %d (%d blocks): %w", i, p.Blocks, err)
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
	if dst < 0 || dst >= s.blocks || src >= s.blocks {
		panic(fmt.Sprintf("gpu: block %d from %d of a pool of %d", dst, src, s.blocks))
	}
	for i := range s.sides {
		for j := range s.sides[i] {
			sd := &s.sides[i][j]
			gx := max(1, min(64, (sd.tileBytes+16*256-1)/(16*256)))
			s.b.launch("kvq_kv_block", dim3{uint32(gx), uint32(s.l.KVHeads), 1}, dim3{256, 1, 1}, 0,
				args{}.ptr(sd.p).int(s.blocks*sd.tileBytes).int(sd.tileBytes).int(dst).int(src)) // long long, long long, int, int
		}
	}
}

// AllocWindow implements kvcache.Storage. The storage's layouts have no
// windows (NewStorage refuses those that do), so a cache never asks.
func (s *Storage) AllocWindow() (int, error) {
	return 0, fmt.Errorf("%w: gpu: fp16 KV windows have no CUDA kernel yet", backend.ErrUnsupported)
}

// FreeWindow implements kvcache.Storage (no windows: nothing to free).
func (s *Storage) FreeWindow(w int) {}

// CopyWindow implements kvcache.Storage (no windows: nothing to copy).
func (s *Storage) CopyWindow(dst, src int) {}

// Restore implements kvcache.Storage. Without windows a step saves
// nothing (no OpSave), so there is nothing to restore; the step's plan
// upload ends.
func (s *Storage) Restore() { s.gen++ }

// Discard implements kvcache.Storage; the step's plan upload ends.
func (s *Storage) Discard() { s.gen++ }

// HeldBytes implements kvcache.Storage: the tile buffers.
func (s *Storage) HeldBytes() int64 {
	var n int64
	for i := range s.sides {
		for j := range s.sides[i] {
			n += int64(s.l.KVHeads) * int64(s.blocks) * int64(s.sides[i][j].tileBytes)
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
		if r.Block < 0 {
			panic("gpu: a run in an fp16 window of a storage without windows")
		}
		row, cnt := int(r.Row)+p0-int(r.Pos), p1-p0
		// Rows of contiguous formats are downloaded alone; int tiles
		// (scales, zeros, codes in regions) whole.
		off := (int64(h)*int64(s.blocks) + int64(r.Block)) * int64(sd.tileBytes)
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
}

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
		if len(p.Writes[k]) != m.shapes[k].nops {
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
	m.maxN = 0
	// The sequence table, then per shape: block tables, runs, run index,
	// ops.
	m.host = append(m.host, make([]int32, nseq*seqInts)...)
	tabLen := 0
	for i, st := range p.Seqs {
		if st.N <= 0 || st.Pos < 0 {
			return fmt.Errorf("gpu: plan sequence %d with %d tokens at %d", st.Seq, st.N, st.Pos)
		}
		e := m.host[i*seqInts : (i+1)*seqInts]
		e[0], e[1], e[2], e[4] = int32(st.Row), int32(st.N), int32(st.Pos), int32(tabLen)
		if st.Exact {
			e[3] = 1
		}
		tabLen += (st.Pos + st.N + bt - 1) / bt
		m.seqs = append(m.seqs, seqMeta{row: st.Row, n: st.N, pos: st.Pos, exact: st.Exact})
		m.maxN = max(m.maxN, st.N)
	}
	for k := range p.Writes {
		sh := shapeMeta{tab: len(m.host)}
		m.host = append(m.host, make([]int32, tabLen)...)
		tab := m.host[sh.tab:]
		for i, st := range p.Seqs {
			if k >= len(st.Runs) {
				return fmt.Errorf("gpu: plan sequence %d has no runs for shape %d", st.Seq, k)
			}
			base := int(m.host[i*seqInts+4])
			nblk := (st.Pos + st.N + bt - 1) / bt
			for b := 0; b < nblk; b++ {
				tab[base+b] = -1
			}
			for _, r := range st.Runs[k] {
				if r.Block < 0 {
					return fmt.Errorf("%w: gpu: sequence %d reads positions from an fp16 window", backend.ErrUnsupported, st.Seq)
				}
				if int(r.Block) >= s.blocks || int(r.Row) != int(r.Pos)%bt || int(r.Row+r.N) > bt || int(r.Pos+r.N) > st.Pos+st.N {
					return fmt.Errorf("gpu: sequence %d: run %+v does not fit %d-token blocks of a pool of %d", st.Seq, r, bt, s.blocks)
				}
				tab[base+int(r.Pos)/bt] = r.Block
			}
			for b := 0; b < nblk; b++ {
				if tab[base+b] < 0 {
					return fmt.Errorf("gpu: sequence %d: runs leave positions [%d, %d) unplaced", st.Seq, b*bt, (b+1)*bt)
				}
			}
		}
		sh.runs = len(m.host)
		for _, st := range p.Seqs {
			for _, r := range st.Runs[k] {
				m.host = append(m.host, r.Pos, r.N, r.Block, r.Row)
			}
		}
		sh.runIdx = len(m.host)
		n := int32(0)
		m.host = append(m.host, 0)
		for _, st := range p.Seqs {
			n += int32(len(st.Runs[k]))
			m.host = append(m.host, n)
		}
		sh.ops = len(m.host)
		for _, op := range p.Writes[k] {
			if op.Kind != kvcache.OpEncode {
				return fmt.Errorf("%w: gpu: write op kind %d (fp16 windows)", backend.ErrUnsupported, op.Kind)
			}
			if op.Src < 0 || op.Block < 0 || int(op.Block) >= s.blocks || op.Slot < 0 || int(op.Slot) >= bt {
				return fmt.Errorf("gpu: write op %+v outside a pool of %d blocks of %d tokens", op, s.blocks, bt)
			}
			m.host = append(m.host, op.Src, op.Block, op.Slot)
			sh.maxSrc = max(sh.maxSrc, int(op.Src))
		}
		sh.nops = len(p.Writes[k])
		m.shapes = append(m.shapes, sh)
	}
	return nil
}

// WriteKV implements backend.Backend: one kernel per side quantizes and
// stores the step's rows for the layer, the bytes of pkg/quant's encoder
// (kernels/kvformats.cuh). p.Prime concerns formats that learn from the
// first batch (dynamic fp8 scales), which have no kernels here.
func (b *Backend) WriteKV(kv kvcache.Storage, layer int, k, v backend.Tensor, p *kvcache.Plan) {
	s := kv.(*Storage)
	m := s.prepare(p)
	if m == nil {
		return
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
		b.launch("kvq_kv_write", dim3{uint32(sh.nops), 1, 1}, dim3{uint32(min(256, (units+31)/32*32)), 1, 1}, 0,
			args{}.ptr(sd.p).ptr(xt.p).ptr(m.at(sh.ops)).int(sh.nops).int(s.l.KVHeads).int(s.l.HeadDim).
				int(s.blocks).int(s.l.BlockTokens).int(sd.code).ptr(sd.scales))
	}
}
