//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// denseState is what the dense ops keep between calls: device scratch for
// the host inputs they upload (token ids, positions, RoPE frequencies,
// gathered rows) and the MatMul path choice.
//
// Scratch reuse: each kind of input has one buffer, overwritten by the
// next op of that kind. That is safe because the stream runs in order and
// htod returns only once the copy is done, after the work issued before it
// (so a kernel reading the buffer has finished before the next upload
// overwrites it). An asynchronous upload would need one buffer per op in
// flight.
type denseState struct {
	ids, pos, rows scratch // int32 values
	freq           scratch // float64 values
	// gemmMinNT is the number of activation rows from which MatMul uses
	// the GEMM kernels instead of the GEMV (gemvMaxNT+1; tests lower it
	// to 1 or raise it to force one path).
	gemmMinNT int
	// gemmTile, when 64 or 128, forces the tensor-core GEMM's tile height
	// (tests); 0 lets MatMul choose.
	gemmTile int
}

// init sets the defaults; scratch is allocated on first use.
func (s *denseState) init(b *Backend) error {
	s.gemmMinNT = gemvMaxNT + 1
	return nil
}

// scratch is a device buffer that grows to the largest upload it has
// held.
type scratch struct {
	p    devptr
	size int64
}

// put copies bytes at src into s, growing it first if needed, and returns
// its address (0 after recording a failure in b).
func (s *scratch) put(b *Backend, src unsafe.Pointer, bytes int64) devptr {
	if bytes > s.size {
		if s.p != 0 {
			// Work issued before may still read the old buffer.
			if err := b.d.sync(); err != nil {
				b.fail(err)
				return 0
			}
			b.d.free(s.p)
			s.p, s.size = 0, 0
		}
		size := max(bytes, 2*s.size, 256)
		p, err := b.d.alloc(size)
		if err != nil {
			b.fail(fmt.Errorf("gpu: allocating %d bytes of scratch: %w", size, err))
			return 0
		}
		s.p, s.size = p, size
	}
	if err := b.d.htod(s.p, src, bytes); err != nil {
		b.fail(err)
		return 0
	}
	return s.p
}

// putInt32 uploads v into s.
func (s *scratch) putInt32(b *Backend, v []int32) devptr {
	return s.put(b, unsafe.Pointer(&v[0]), int64(4*len(v)))
}

// Element-wise launches: blocks of elemThreads, at most elemBlocks of them
// (the kernels loop over the rest).
const (
	elemThreads = 256
	elemBlocks  = 4096
	rowThreads  = 256 // one block per row: Embed, RMSNorm, Gather
	ropeThreads = 128
	// maxGridY is the largest grid y (and z) dimension CUDA allows; ops
	// with one grid row per activation row launch in chunks of it.
	maxGridY = 65535
)

// elemGrid is the grid of an element-wise kernel over n values.
func elemGrid(n int) dim3 { return dim3{min(blocks(n, elemThreads), elemBlocks), 1, 1} }

// need panics unless t holds at least n values (a programmer error, as
// the CPU backend's slice bounds).
func need(op string, t *tensor, n int) {
	if t.n < n {
		panic(fmt.Sprintf("gpu: %s needs %d values of a tensor of %d", op, n, t.n))
	}
}

// checkIndex panics unless every v is in [0, n): a kernel would read out
// of bounds (the CPU backend panics the same way).
func checkIndex(op string, v []int32, n int) {
	for i, x := range v {
		if x < 0 || int(x) >= n {
			panic(fmt.Sprintf("gpu: %s: index %d is %d, out of [0, %d)", op, i, x, n))
		}
	}
}

// Embed implements backend.Backend.
func (b *Backend) Embed(dst backend.Tensor, w backend.Matrix, ids []int32) {
	m, d := mat(w), dev(dst)
	need("Embed", d, len(ids)*m.cols)
	checkIndex("Embed", ids, m.rows)
	if len(ids) == 0 {
		return
	}
	if m.lazy != nil {
		if err := b.materialize(m); err != nil {
			b.fail(err)
			return
		}
	}
	p := b.dense.ids.putInt32(b, ids)
	if p == 0 {
		return
	}
	b.launch("kvq_embed_"+m.kernelSuffix(), dim3{uint32(len(ids)), 1, 1}, dim3{rowThreads, 1, 1}, 0,
		args{}.ptr(d.p).ptr(m.p).ptr(m.sc).ptr(p).int(m.cols).int(m.ld))
}

// RMSNorm implements backend.Backend.
func (b *Backend) RMSNorm(dst, x backend.Tensor, rows int, w backend.Tensor, eps float32) {
	d, xt, wt := dev(dst), dev(x), dev(w)
	need("RMSNorm", d, rows*wt.n)
	need("RMSNorm", xt, rows*wt.n)
	if wt.n == 0 {
		return
	}
	b.launch("kvq_rmsnorm", dim3{uint32(rows), 1, 1}, dim3{rowThreads, 1, 1}, 0,
		args{}.ptr(d.p).ptr(xt.p).ptr(wt.p).int(wt.n).f32(eps))
}

// AddBias implements backend.Backend.
func (b *Backend) AddBias(x backend.Tensor, nt int, bias backend.Tensor) {
	xt, bt := dev(x), dev(bias)
	n := nt * bt.n
	need("AddBias", xt, n)
	if n == 0 {
		return
	}
	b.launch("kvq_add_bias", elemGrid(n), dim3{elemThreads, 1, 1}, 0,
		args{}.ptr(xt.p).ptr(bt.p).int(n).int(bt.n))
}

// RoPEAngles implements backend.Backend.
func (b *Backend) RoPEAngles(dst backend.Tensor, pos []int32, invFreq []float64) {
	d, half := dev(dst), len(invFreq)
	need("RoPEAngles", d, 2*half*len(pos))
	if len(pos) == 0 || half == 0 {
		return
	}
	pp := b.dense.pos.putInt32(b, pos)
	fp := b.dense.freq.put(b, unsafe.Pointer(&invFreq[0]), int64(8*half))
	if pp == 0 || fp == 0 {
		return
	}
	for t0 := 0; t0 < len(pos); t0 += maxGridY {
		n := min(maxGridY, len(pos)-t0)
		b.launch("kvq_rope_angles", dim3{blocks(half, ropeThreads), uint32(n), 1}, dim3{ropeThreads, 1, 1}, 0,
			args{}.ptr(d.at(t0*2*half)).ptr(pp+devptr(4*t0)).ptr(fp).int(half))
	}
}

// RoPE implements backend.Backend.
func (b *Backend) RoPE(x backend.Tensor, nt, heads, headDim, rotDim int, angles backend.Tensor, neox bool) {
	xt, at := dev(x), dev(angles)
	if rotDim > headDim || rotDim%2 != 0 {
		panic(fmt.Sprintf("gpu: RoPE of %d of %d dims", rotDim, headDim))
	}
	need("RoPE", xt, nt*heads*headDim)
	need("RoPE angles", at, nt*rotDim)
	pairs := heads * rotDim / 2
	if nt == 0 || pairs == 0 {
		return
	}
	nx := 0
	if neox {
		nx = 1
	}
	for t0 := 0; t0 < nt; t0 += maxGridY {
		n := min(maxGridY, nt-t0)
		b.launch("kvq_rope", dim3{blocks(pairs, ropeThreads), uint32(n), 1}, dim3{ropeThreads, 1, 1}, 0,
			args{}.ptr(xt.at(t0*heads*headDim)).ptr(at.at(t0*rotDim)).int(heads).int(headDim).int(rotDim).int(nx))
	}
}

// SwiGLU implements backend.Backend.
func (b *Backend) SwiGLU(gate, up backend.Tensor, n int) {
	g, u := dev(gate), dev(up)
	need("SwiGLU", g, n)
	need("SwiGLU", u, n)
	if n == 0 {
		return
	}
	b.launch("kvq_swiglu", elemGrid(n), dim3{elemThreads, 1, 1}, 0, args{}.ptr(g.p).ptr(u.p).int(n))
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, src backend.Tensor, n int) {
	d, s := dev(dst), dev(src)
	need("Add", d, n)
	need("Add", s, n)
	if n == 0 {
		return
	}
	b.launch("kvq_add", elemGrid(n), dim3{elemThreads, 1, 1}, 0, args{}.ptr(d.p).ptr(s.p).int(n))
}

// Copy implements backend.Backend (a device-to-device copy on the
// stream).
func (b *Backend) Copy(dst, src backend.Tensor, n int) {
	d, s := dev(dst), dev(src)
	need("Copy", d, n)
	need("Copy", s, n)
	if n == 0 {
		return
	}
	b.fail(b.d.dtod(d.p, s.p, int64(4*n)))
}

// Gather implements backend.Backend.
func (b *Backend) Gather(dst, src backend.Tensor, rows []int32, width int) {
	d, s := dev(dst), dev(src)
	need("Gather", d, len(rows)*width)
	if width > 0 {
		checkIndex("Gather", rows, s.n/width)
	}
	if len(rows) == 0 || width == 0 {
		return
	}
	p := b.dense.rows.putInt32(b, rows)
	if p == 0 {
		return
	}
	b.launch("kvq_gather", dim3{uint32(len(rows)), 1, 1}, dim3{rowThreads, 1, 1}, 0,
		args{}.ptr(d.p).ptr(s.p).ptr(p).int(width))
}
