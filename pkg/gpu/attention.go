//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Attention's kernels (kernels/attn.cu):
//
//   - decode: a sequence whose step has at most decodeRows query rows per
//     KV head (tokens × query heads per KV head: 16 tokens with 4 query
//     heads per KV head, 8 with 8) goes through kvq_attn_decode_*, split-K
//     flash decoding on tensor cores over chunks of its positions, then
//     kvq_attn_merge. fp16 and bf16 caches (K and V of one format) with
//     head size 64, 96 or 128.
//   - quantized decode: the same for caches with a quantized side (fp8,
//     llama.cpp blocks, int groups; K and V may differ) and head size 64,
//     96, 128 or 256, at most qdecodeRows query rows per KV head, through
//     kvq_attn_qdecode_<family>_d{64,128} when both sides are of one
//     format family (the packed bytes staged with 16-byte copies,
//     dequantized by the family's code) or kvq_attn_qdecode_d* otherwise (CUDA cores,
//     fp32, dequantizing as it reads).
//   - prefill: the other sequences, and every sequence of other caches
//     (fp32, fp16/bf16 mixes), go through kvq_attn_prefill_d*, flash
//     attention in fp32 on CUDA cores; head size 64, 96, 128 or 256.
//   - reference: kvq_attn_ref, one thread per query row, for other head
//     sizes (up to 256) and as the tests' oracle.
//
// One plan can hold sequences of both kinds (a prefill next to decodes);
// each kernel skips the other kind's sequences. Every kernel takes
// AttnParams.Softcap as its last parameter (softcap.go).

// attnPath selects attention kernels; tests force one.
type attnPath int

const (
	pathAuto    attnPath = iota
	pathPrefill          // every sequence through the prefill kernel
	pathDecode           // every sequence through the decode kernels
	pathRef              // the reference kernel
)

// decodeRows is the most query rows per KV head of a sequence's step that
// the decode kernels take in the automatic choice: one group of rows, so
// that every K/V row is read once.
const decodeRows = 64

// qdecodeRows is decodeRows for the quantized decode kernel: one group of
// its rows (KVQ_QD_ROWS).
const qdecodeRows = 16

// The kernels' tiles (kernels/attn.cu).
const (
	prefillRows    = 64 // KVQ_PF_TQ
	prefillKeys    = 32 // KVQ_PF_TK
	decodeKeys     = 64 // KVQ_DC_TK
	qdecodeKeys    = 32 // KVQ_QD_TK
	decodeGroup    = 64 // KVQ_DC_ROWS
	attnThreads    = 128
	refMaxHeadDim  = 256 // KVQ_REF_MAX_DIM
	decodeBlocksSM = 4   // decode blocks per SM the chunk size aims at
)

func prefillDim(d int) bool { return d == 64 || d == 96 || d == 128 || d == 256 }
func decodeDim(d int) bool  { return d == 64 || d == 96 || d == 128 }

// prefillShared is the prefill kernel's dynamic shared memory.
func prefillShared(dim int) int {
	return 4 * (prefillRows*(dim+1) + prefillKeys*(dim+1) + prefillKeys*dim + prefillRows*(prefillKeys+1))
}

// decodeShared is the decode kernel's dynamic shared memory: two stages
// of K and V tiles, the row data and the query fragments of wr warps'
// rows in qsplit terms.
func decodeShared(dim, qsplit, wr int) int {
	return 2*2*decodeKeys*(dim+8)*2 + decodeGroup*16 + wr*qsplit*(dim/16)*32*16
}

// decodeRange is the positions [lo, hi) that a decode sequence reads from
// the cache (an exact step's own positions come from its activations).
func decodeRange(sq seqMeta, window int) (lo, hi int) {
	if window > 0 {
		lo = max(0, sq.pos+1-window)
	}
	hi = sq.pos + sq.n
	if sq.exact {
		hi = sq.pos
	}
	return lo, max(lo, hi)
}

// Attention implements backend.Backend.
func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv kvcache.Storage, layer int, p *kvcache.Plan, a backend.AttnParams) {
	s := kv.(*Storage)
	m := s.prepare(p)
	if m == nil {
		return
	}
	dim, kvh := s.l.HeadDim, s.l.KVHeads
	if a.Heads <= 0 || a.Heads%kvh != 0 {
		panic(fmt.Sprintf("gpu: Attention with %d query heads over %d KV heads", a.Heads, kvh))
	}
	var sinks devptr // 0: no sink term, the kernels as without sinks
	if a.Sinks != nil {
		if len(a.Sinks) != a.Heads {
			panic(fmt.Sprintf("gpu: Attention with %d sinks for %d query heads", len(a.Sinks), a.Heads))
		}
		var err error
		if sinks, err = b.sinks.device(b, a.Sinks); err != nil {
			b.fail(err)
			return
		}
	}
	rows, exact := 0, false
	for _, sq := range m.seqs {
		rows = max(rows, sq.row+sq.n)
		exact = exact || sq.exact
	}
	at := attnArgs{s: s, m: m, a: a, nq: a.Heads / kvh, dst: dev(dst), q: dev(q), sinks: sinks,
		ks: &s.sides[layer][0], vs: &s.sides[layer][1],
		shK: &m.shapes[p.SideShape[layer][0]], shV: &m.shapes[p.SideShape[layer][1]]}
	needRows("dst", at.dst, rows, a.Heads*dim)
	needRows("q", at.q, rows, a.Heads*dim)
	if exact {
		at.k, at.v = dev(k), dev(v)
		needRows("k", at.k, rows, kvh*dim)
		needRows("v", at.v, rows, kvh*dim)
	} else {
		at.k, at.v = &tensor{}, &tensor{} // not read
	}
	if len(m.seqs) > math.MaxUint16 || a.Heads > math.MaxUint16 {
		b.fail(fmt.Errorf("gpu: attention over %d sequences and %d heads exceeds the launch grid", len(m.seqs), a.Heads))
		return
	}
	fast := at.tensorCores() || at.quantized()
	path := s.path
	if path == pathAuto && !prefillDim(dim) {
		path = pathRef
	}
	switch path {
	case pathRef:
		if dim > refMaxHeadDim {
			b.fail(fmt.Errorf("%w: gpu: attention with head size %d (at most %d)", backend.ErrUnsupported, dim, refMaxHeadDim))
			return
		}
		at.ref()
		return
	case pathDecode:
		if !fast {
			panic(fmt.Sprintf("gpu: no decode kernel for head size %d and these formats", dim))
		}
		at.decode(math.MaxInt32)
		return
	case pathPrefill:
		at.prefill(0)
		return
	}
	limit := 0
	switch {
	case at.tensorCores():
		limit = decodeRows
	case at.quantized():
		limit = qdecodeRows
	}
	at.prefill(limit)
	at.decode(limit)
}

// tensorCores reports whether the tensor-core decode kernels read the
// layer's caches: fp16 or bf16, K and V alike, head size 64, 96 or 128.
func (at *attnArgs) tensorCores() bool {
	c := at.ks.code
	return c == at.vs.code && (c == kvF16 || c == kvBF16) && decodeDim(at.s.l.HeadDim) && !at.windowed()
}

// windowed reports whether a side of the layer keeps fp16 window rows:
// only the per-value loaders (reference, prefill, the generic quantized
// decode) look positions up in the windows.
func (at *attnArgs) windowed() bool { return at.ks.windowed() || at.vs.windowed() }

// win appends the window operands of the attention kernels (kwin, vwin,
// kwr, vwr).
func (at *attnArgs) win(a args) args {
	return a.ptr(at.ks.win).ptr(at.vs.win).int(at.ks.wrows).int(at.vs.wrows)
}

// quantized reports whether the quantized decode kernel (CUDA cores)
// reads the layer's caches: a quantized side (fp8, blocks, ints), head
// size 64, 96, 128 or 256.
func (at *attnArgs) quantized() bool {
	return (at.ks.kind() >= kvE4M3 || at.vs.kind() >= kvE4M3) && prefillDim(at.s.l.HeadDim)
}

// qdecodeFamilies names the quantized decode's vector loaders by kind
// (kernels/attn.cu, kvq_attn_qdecode_<family>_d<D>).
var qdecodeFamilies = map[int]string{
	kvE4M3: "e4m3", kvE5M2: "e5m2", kvQ80: "q8_0", kvQ40: "q4_0", kvQ41: "q4_1", kvQ50: "q5_0", kvQ51: "q5_1",
	kvIQ4NL: "iq4_nl", kvInt8: "int8", kvInt4: "int4", kvInt2: "int2",
}

// qdecodeKernel is the quantized decode kernel for the layer's sides and
// its dynamic shared memory: a family's vector loader when K and V are of
// one family, the head size 64 or 128 and every 16-byte piece of a
// 32-position tile aligned (BlockTokens 8, 16 or a multiple of 32), else
// the generic loader.
func (at *attnArgs) qdecodeKernel() (string, int) {
	dim, bt := at.s.l.HeadDim, at.s.l.BlockTokens
	fam, ok := qdecodeFamilies[at.ks.kind()]
	vec := ok && at.ks.kind() == at.vs.kind() && (dim == 64 || dim == 128) && (bt == 8 || bt == 16 || bt%32 == 0) &&
		at.ks.rowBytes%2 == 0 && at.vs.rowBytes%2 == 0 && !at.s.qgeneric && !at.windowed()
	shared := qdecodeShared(dim, 0, 0)
	if vec {
		if n := qdecodeShared(dim, at.ks.rowBytes, at.vs.rowBytes); n <= qdecodeMaxShared {
			return fmt.Sprintf("kvq_attn_qdecode_%s_d%d", fam, dim), n
		}
	}
	return fmt.Sprintf("kvq_attn_qdecode_d%d", dim), shared
}

// qdecodeMaxShared bounds the quantized decode's dynamic shared memory
// (sm_80 allows 163 KiB a block); a larger vector loader (int8 in groups
// of 2 at head size 256) falls back to the generic one.
const qdecodeMaxShared = 160 << 10

// qdecodeShared is the quantized decode kernel's dynamic shared memory
// (kernels/attn.cu, kvq_qd_smem): the fp32 tiles, then two stages of the
// K and V rows of a 32-position tile (kRow, vRow bytes a row; 0 for the
// generic loader).
func qdecodeShared(dim, kRow, vRow int) int {
	ld := dim + 1
	floats := qdecodeRows*dim + 2*qdecodeKeys*ld + qdecodeRows*(qdecodeKeys+1) + 3*qdecodeRows + 272
	floats = (floats + 3) / 4 * 4
	return 4*floats + 2*qdecodeKeys*(kRow+vRow)
}

// needRows panics unless t holds rows rows of width values.
func needRows(name string, t *tensor, rows, width int) {
	if t.n < rows*width {
		panic(fmt.Sprintf("gpu: Attention's %s has %d values, the plan needs %d rows of %d", name, t.n, rows, width))
	}
}

// attnArgs are one Attention call's operands.
type attnArgs struct {
	s        *Storage
	m        *planMeta
	a        backend.AttnParams
	nq       int
	dst, q   *tensor
	k, v     *tensor
	ks, vs   *kvSide
	shK, shV *shapeMeta
	sinks    devptr // AttnParams.Sinks on the device, or 0
}

// sinkState holds the device copies of the attention sinks Attention has
// seen (a model's few dozen layers' vectors, uploaded once each), found by
// their values.
type sinkState struct {
	host [][]float32
	dev  []*tensor
}

// sinkCopies bounds sinkState: past it, the copies are dropped and made
// again as needed.
const sinkCopies = 512

// device returns the device copy of sinks, uploaded on first sight.
func (s *sinkState) device(b *Backend, sinks []float32) (devptr, error) {
	for i, h := range s.host {
		if slices.Equal(h, sinks) {
			return s.dev[i].p, nil
		}
	}
	if len(s.host) >= sinkCopies {
		// Every launch that reads them is queued before later copies.
		if err := b.d.sync(); err != nil {
			return 0, err
		}
		for _, t := range s.dev {
			b.Free(t)
		}
		s.host, s.dev = nil, nil
	}
	t, err := b.UploadF32(sinks)
	if err != nil {
		return 0, fmt.Errorf("gpu: attention sinks: %w", err)
	}
	s.host, s.dev = append(s.host, slices.Clone(sinks)), append(s.dev, t.(*tensor))
	return t.(*tensor).p, nil
}

// ref launches the reference kernel over every sequence.
func (at *attnArgs) ref() {
	s, m := at.s, at.m
	s.b.launch("kvq_attn_ref", dim3{uint32(m.maxN), uint32(at.a.Heads), uint32(len(m.seqs))}, dim3{1, 1, 1}, 0,
		at.win(args{}.ptr(at.dst.p).ptr(at.q.p).ptr(at.k.p).ptr(at.v.p).ptr(at.ks.p).ptr(at.vs.p).int(at.ks.code).int(at.vs.code).
			ptr(at.ks.scales).ptr(at.vs.scales).int(at.ks.blocks).int(s.l.BlockTokens).ptr(m.at(0)).
			ptr(m.at(at.shK.runs)).ptr(m.at(at.shK.runIdx)).ptr(m.at(at.shV.runs)).ptr(m.at(at.shV.runIdx)).
			int(at.a.Heads).int(s.l.KVHeads).int(s.l.HeadDim).int(at.a.Window).f32(at.a.Scale)).f32(at.a.Softcap).ptr(at.sinks))
}

// prefill launches the prefill kernel for the sequences with more than
// limit query rows per KV head.
func (at *attnArgs) prefill(limit int) {
	s, m := at.s, at.m
	tiles := 0
	for _, sq := range m.seqs {
		if r := sq.n * at.nq; r > limit {
			tiles = max(tiles, (r+prefillRows-1)/prefillRows)
		}
	}
	if tiles == 0 {
		return
	}
	dim := s.l.HeadDim
	s.b.launchShared(fmt.Sprintf("kvq_attn_prefill_d%d", dim), dim3{uint32(tiles), uint32(s.l.KVHeads), uint32(len(m.seqs))},
		dim3{attnThreads, 1, 1}, prefillShared(dim),
		at.win(args{}.ptr(at.dst.p).ptr(at.q.p).ptr(at.k.p).ptr(at.v.p).ptr(at.ks.p).ptr(at.vs.p).int(at.ks.code).int(at.vs.code).
			ptr(at.ks.scales).ptr(at.vs.scales).int(at.ks.blocks).int(s.l.BlockTokens).ptr(m.at(0)).ptr(m.at(at.shK.tab)).ptr(m.at(at.shV.tab)).
			int(at.a.Heads).int(s.l.KVHeads).int(at.a.Window).f32(at.a.Scale).int(limit).int(tiles)).f32(at.a.Softcap).ptr(at.sinks))
}

// decode launches the decode and merge kernels for the sequences with at
// most limit query rows per KV head.
func (at *attnArgs) decode(limit int) {
	grows := decodeGroup // query rows per block
	if !at.tensorCores() {
		grows = qdecodeRows
	}
	s, m := at.s, at.m
	kvh, dim := s.l.KVHeads, s.l.HeadDim
	work, maxN, maxRows := 0, 0, 0
	for _, sq := range m.seqs {
		r := sq.n * at.nq
		if r > limit {
			continue
		}
		lo, hi := decodeRange(sq, at.a.Window)
		work += (hi - lo) * kvh * ((r + grows - 1) / grows)
		maxN, maxRows = max(maxN, sq.n), max(maxRows, r)
	}
	if maxN == 0 {
		return
	}
	groups := (maxRows + grows - 1) / grows
	rstride := min(grows, maxRows)
	chunk := s.decodeChunk(work)
	chunks := 0
	for _, sq := range m.seqs {
		if sq.n*at.nq <= limit {
			lo, hi := decodeRange(sq, at.a.Window)
			chunks = max(chunks, (hi-lo+chunk-1)/chunk)
		}
	}
	if kvh*groups > math.MaxUint16 {
		s.b.fail(fmt.Errorf("gpu: decode attention with %d row groups of %d KV heads exceeds the launch grid", groups, kvh))
		return
	}
	// Scratch: the partial sums, then the (m, l) pairs.
	items := len(m.seqs) * max(1, chunks) * kvh * groups * rstride
	if err := s.mem.scratch.ensure(s.b, int64(items)*int64(dim+2)*4); err != nil {
		s.b.fail(err)
		return
	}
	part := s.mem.scratch.p
	ml := part + devptr(4*items*dim)
	if chunks > 0 && !at.tensorCores() {
		name, shared := at.qdecodeKernel()
		s.b.launchShared(name, dim3{uint32(chunks), uint32(kvh * groups), uint32(len(m.seqs))},
			dim3{attnThreads, 1, 1}, shared,
			at.win(args{}.ptr(at.ks.p).ptr(at.vs.p).int(at.ks.code).int(at.vs.code).ptr(at.ks.scales).ptr(at.vs.scales).
				int(at.ks.blocks).int(s.l.BlockTokens).ptr(m.at(0)).ptr(m.at(at.shK.tab)).ptr(m.at(at.shV.tab)).
				ptr(at.q.p).ptr(part).ptr(ml).int(at.a.Heads).int(kvh).int(at.a.Window).f32(at.a.Scale).
				int(chunk).int(chunks).int(groups).int(limit).int(rstride)).f32(at.a.Softcap))
	} else if chunks > 0 {
		name, qsplit := "kvq_attn_decode_f16", 2
		if at.ks.code == kvBF16 {
			name, qsplit = "kvq_attn_decode_bf16", 3
		}
		wr := 4
		if g := min(decodeGroup, maxRows); g <= 16 {
			wr = 1
		} else if g <= 32 {
			wr = 2
		}
		s.b.launchShared(fmt.Sprintf("%s_d%d", name, dim), dim3{uint32(chunks), uint32(kvh * groups), uint32(len(m.seqs))},
			dim3{attnThreads, 1, 1}, decodeShared(dim, qsplit, wr),
			args{}.ptr(at.ks.p).ptr(at.vs.p).int(at.ks.blocks).int(s.l.BlockTokens).ptr(m.at(0)).ptr(m.at(at.shK.tab)).ptr(m.at(at.shV.tab)).
				ptr(at.q.p).ptr(part).ptr(ml).int(at.a.Heads).int(kvh).int(at.a.Window).f32(at.a.Scale).
				int(chunk).int(chunks).int(groups).int(limit).int(rstride).f32(at.a.Softcap))
	}
	s.b.launch("kvq_attn_merge", dim3{uint32(maxN), uint32(at.a.Heads), uint32(len(m.seqs))}, dim3{attnThreads, 1, 1}, 0,
		args{}.ptr(at.dst.p).ptr(at.q.p).ptr(at.k.p).ptr(at.v.p).ptr(part).ptr(ml).ptr(m.at(0)).
			int(at.a.Heads).int(kvh).int(dim).int(at.a.Window).f32(at.a.Scale).
			int(chunk).int(max(1, chunks)).int(groups).int(limit).int(rstride).int(grows).f32(at.a.Softcap).ptr(at.sinks))
}

// decodeChunk is the positions per decode block: about decodeBlocksSM
// blocks per SM over the step's work (positions × KV heads × row groups),
// in whole 64-position tiles. One 32K-token sequence with 8 KV heads on
// 132 SMs gets 512.
func (s *Storage) decodeChunk(work int) int {
	if s.chunk > 0 {
		return s.chunk
	}
	per := decodeBlocksSM * max(1, s.b.d.info().SMs)
	c := (work + per - 1) / per
	return max(decodeKeys, (c+decodeKeys-1)/decodeKeys*decodeKeys)
}

var _ backend.Sinks = (*Backend)(nil)

// AttentionSinks implements backend.Sinks: every attention kernel adds the
// sink logit to a row's softmax once, after its last chunk (the reference
// and prefill kernels at their end, split-K decoding in kvq_attn_merge).
func (b *Backend) AttentionSinks() {}

var _ backend.Sinks = (*Device)(nil)

// AttentionSinks implements backend.Sinks.
func (d *Device) AttentionSinks() {}
