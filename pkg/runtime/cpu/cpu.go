// Package cpu is the pure-Go (plus SIMD assembly) implementation of
// backend.Backend. Tensors are host float32 slices, weights are used in
// place (from the model's memory map), and KV storage is host memory.
//
// Matrix products are split by output rows across goroutines with a fixed
// partition, and attention by (query block, KV head) tasks, so results do
// not depend on the number of workers. The backend is safe for concurrent
// use: ops keep no state beyond their arguments (scratch memory comes from
// pools). Its Interruptible view stops matrix products and attention part
// way once a channel closes (the runtime passes its context's Done), with
// the same results while it is open.
package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Backend runs compute on the CPU.
type Backend struct {
	workers par.Workers
	// done, when closed, stops MatMul and Attention part way (see
	// Interruptible); nil for a backend that always finishes.
	done <-chan struct{}
	// groups, when set, are the row groups of MatMul (see RowGroups).
	groups []int
	// f32Act keeps the decode products' activations (Q8_0's prefill
	// products' too) in float32 (see F32Activations).
	f32Act bool
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.HostMemory    = (*Backend)(nil)
	_ backend.Interruptible = (*Backend)(nil)
	_ backend.RowGroups     = (*Backend)(nil)
)

// Interruptible implements backend.Interruptible: matrix products look at
// done every few milliseconds of work, attention between its tasks.
func (b *Backend) Interruptible(done <-chan struct{}) backend.Backend {
	return &Backend{workers: b.workers, done: done, groups: b.groups, f32Act: b.f32Act}
}

// F32Activations returns the backend with the decode products of the
// weight types of q8Dots, and the prefill products that q8Prefill takes
// quantized (Q8_0's, q4_K's, q5_K's and q6_K's), on float32
// activations (the fused dots of fusedDots, simd.MatMulQ80 and
// simd.MatMulDecoded: kvq's arithmetic before it quantized them as
// llama.cpp does; see q8Dots): for comparisons with a backend that keeps
// them in float32 (the GPU's GEMV) and to measure the difference.
func (b *Backend) F32Activations() *Backend {
	return &Backend{workers: b.workers, done: b.done, groups: b.groups, f32Act: true}
}

// RowGroups implements backend.RowGroups: MatMul over sum(groups) rows is
// one product per group of several rows, with that group's row count, and
// one pass for each run of one-row groups in which every row goes through
// the one-row kernel (the weights are still read once for the run).
func (b *Backend) RowGroups(groups []int) backend.Backend {
	return &Backend{workers: b.workers, done: b.done, groups: groups, f32Act: b.f32Act}
}

// stopped reports whether done is closed (never, for nil).
func stopped(done <-chan struct{}) bool {
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// New returns a CPU backend using the given number of goroutines (0: all CPUs).
func New(workers int) *Backend { return &Backend{workers: par.Workers(workers)} }

// Workers is the backend's degree of parallelism.
func (b *Backend) Workers() par.Workers { return b.workers }

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Tensor is a host tensor.
type Tensor struct{ data []float32 }

// Len implements backend.Tensor.
func (t *Tensor) Len() int { return len(t.data) }

// Wrap makes a tensor of host values without copying them.
func Wrap(v []float32) *Tensor { return &Tensor{data: v} }

// Matrix is a host weight, used in place.
type Matrix struct{ w *tensor.Weight }

// Dims implements backend.Matrix.
func (m *Matrix) Dims() (int, int) { return m.w.Rows, m.w.Cols }

// Weight returns the wrapped weight.
func (m *Matrix) Weight() *tensor.Weight { return m.w }

func host(t backend.Tensor) []float32 { return t.(*Tensor).data }

func weight(m backend.Matrix) *tensor.Weight { return m.(*Matrix).w }

// Host implements backend.HostMemory.
func (b *Backend) Host(t backend.Tensor) []float32 { return host(t) }

// Alloc implements backend.Backend.
func (b *Backend) Alloc(n int) backend.Tensor { return &Tensor{data: make([]float32, n)} }

// Free implements backend.Backend (the garbage collector frees host memory).
func (b *Backend) Free(backend.Tensor) {}

// Upload implements backend.Backend: the weight is used in place.
func (b *Backend) Upload(w *tensor.Weight) (backend.Matrix, error) {
	if supportsWeight(w.DType) != nil {
		return nil, fmt.Errorf("%w: cpu: weight %s of dtype %v", backend.ErrUnsupported, w.Name, w.DType)
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &Matrix{w: w}, nil
}

// UploadF32 implements backend.Backend: the values are used in place.
func (b *Backend) UploadF32(v []float32) (backend.Tensor, error) { return Wrap(v), nil }

// Download implements backend.Backend.
func (b *Backend) Download(dst []float32, src backend.Tensor, off int) error {
	copy(dst, host(src)[off:off+len(dst)])
	return nil
}

// SupportsKV implements backend.Backend: the CPU runs every format.
func (b *Backend) SupportsKV(quant.Format) error { return nil }

// minRowWork is the smallest number of multiply-adds worth a goroutine.
const minRowWork = 1 << 15

// Runs of an interruptible matrix product: about stopWork multiply-adds, a
// millisecond or two of one core between two looks at the done channel.
// A run is a multiple of stopRows weight rows (a multiple of 12, of the
// partition's 4-row alignment and of the kernels' 3-row blocks, and at
// least the kernels' own row chunk, so that weight rows are reused as in
// one call; runRows) by as many token rows, a multiple of 4 (the kernels'
// token block), as make about stopWork.
//
// 2^25, a third of a millisecond on a Zen 5, cut a 512-token prefill of
// the 1B F16 model into three runs of tokens, each packing the weights
// again: kvq generate prefilled 501 tokens 0.92–0.99× as fast on one
// thread and 0.95–0.99× on two (alternating binaries), and the prefill of
// BenchmarkPrefillInterruptRoundRobin cost 1.039× the uninterruptible one
// on one thread, 1.014× with 2^27.
const (
	stopRows = 96
	stopWork = 1 << 27
)

// runRows is the weight rows of an interruptible product's runs over nt
// token rows of cols columns: as many multiples of stopRows as make about
// stopWork multiply-adds, so that a decode step (nt of 1) takes each
// goroutine's whole share of a small model's matrices in one run, as
// without done. Runs of stopRows rows cut a one-row product of 2048×2048
// F16 weights into pieces of 384 KiB, which took 1.11× as long as one call
// over all the rows on the Zen 5 (a kernel probe: each piece starts its
// four streams anew), and the interruptible decode of kvq's commands ran
// 0.89–0.92× as fast on one thread and 0.92–0.97× on two (kvq generate on
// the 1B F16 file, 13.4–14.1 against 15.0–15.5 tokens/s and 25.4–26.5
// against 27.2–27.7, alternating binaries).
func runRows(nt, cols int) int {
	return max(stopRows, stopWork/max(1, nt*cols)/stopRows*stopRows)
}

// MatMul implements backend.Backend.
func (b *Backend) MatMul(dst, x backend.Tensor, nt int, m backend.Matrix) {
	if b.groups != nil && sum(b.groups) == nt {
		matMulGroups(b.workers, host(dst), host(x), b.groups, weight(m), b.done, b.f32Act)
		return
	}
	matMul(b.workers, host(dst), host(x), nt, weight(m), b.done, b.f32Act)
}

func sum(v []int) int {
	s := 0
	for _, n := range v {
		s += n
	}
	return s
}

// matMulGroups is matMul over consecutive groups of token rows, each row
// with the bits it has in a product over its group alone: a group of
// several rows is one matMul; a run of one-row groups is one pass over the
// weights in which each row takes the one-row (decode) kernel.
func matMulGroups(workers par.Workers, dst, x []float32, groups []int, w *tensor.Weight, done <-chan struct{}, f32Act bool) {
	rows, cols := w.Rows, w.Cols
	t := 0
	for i := 0; i < len(groups); {
		if n := groups[i]; n != 1 {
			if n > 0 {
				matMul(workers, dst[t*rows:], x[t*cols:], n, w, done, f32Act)
			}
			t += n
			i++
			continue
		}
		n := 0
		for ; i < len(groups) && groups[i] == 1; i++ {
			n++
		}
		matMulEach(workers, dst[t*rows:], x[t*cols:], n, w, done, f32Act)
		t += n
	}
}

// eachRows is the weight rows a pass of matMulEach takes at a time, for
// every token row, before the next (and before it looks at the done
// channel), for weights without a multi-token kernel (eachKernel): small
// enough to stay in L2 where the token rows take them one after another.
const eachRows = 32

// matMulEach is matMul with each of the nt token rows computed as in a
// product over that row alone (the one-row kernel, whatever nt), the
// weight rows eachRows at a time so that each is read from memory once
// (matMulEachRows).
func matMulEach(workers par.Workers, dst, x []float32, nt int, w *tensor.Weight, done <-chan struct{}, f32Act bool) {
	if nt <= 1 {
		matMul(workers, dst, x, nt, w, done, f32Act)
		return
	}
	per := max(1, minRowWork/max(1, w.Cols*nt))
	q8 := quantizeTokens(x, nt, w, 1, f32Act)
	align := 4
	if q8 != nil && w.DType == tensor.Q80 {
		align = simd.MatMulPackRows // runEach's MatMulQ80Q80 panels
	}
	t := mmTasks.Get().(*mmTask)
	*t = mmTask{dst: dst, x: x, q8: q8Bytes(q8), nt: nt, w: w, done: done, each: true}
	workers.ForTask(w.Rows, align, per, t)
	*t = mmTask{}
	mmTasks.Put(t)
	releaseTokens(q8)
}

// MatMul sets dst[t*w.Rows+r] = Σ_c x[t*w.Cols+c]·W[r][c] for t < nt, on
// workers goroutines, with x in float32 whatever the weights' type (as
// Backend.F32Activations; the backend's own decode products of the types
// of q8Dots take quantized activations).
func MatMul(workers par.Workers, dst, x []float32, nt int, w *tensor.Weight) {
	matMul(workers, dst, x, nt, w, nil, true)
}

// matMul is MatMul that, with done, computes each goroutine's share in
// runs of runRows weight rows by a block of token rows, and skips the
// runs left once done is closed. Every row and token goes through the same
// kernel path as in one call (the runs' bounds are multiples of the
// kernels' blocks), so the results are bit-identical.
func matMul(workers par.Workers, dst, x []float32, nt int, w *tensor.Weight, done <-chan struct{}, f32Act bool) {
	rows, cols := w.Rows, w.Cols
	per := max(1, minRowWork/max(1, cols*nt))
	rowStep, tokStep := rows, nt
	pack := packTokens(w.DType)
	if q8Prefill(w.DType) && !f32Act {
		pack = math.MaxInt // quantized activations at every nt: no packed path
	}
	if done != nil {
		rowStep = runRows(nt, cols)
		if work := int64(stopRows) * int64(nt) * int64(cols); work > stopWork {
			tokStep = max(4, stopWork/(stopRows*max(1, cols))/4*4)
			if nt >= pack {
				tokStep = max(tokStep, pack) // every run on the packed path, as one call
			}
		}
	}
	align, forTask := 4, workers.ForTask
	switch {
	case nt >= pack:
		align = packAlign(rows, workers.N())
		if done != nil {
			rowStep = max(align, rowStep/align*align) // runs of whole chunks
		}
		// Each chunk adds into a block of columns of every token row, once
		// per packed block of columns: chunks far apart
		// (BenchmarkPrefillProducts). The 4×3 path (the AVX2 kernels
		// forced, 16 and 128 token rows) and the int8 tile GEMMs (Q8_0,
		// 512 token rows) ran alike either way on the Zen 5 (0.99–1.01).
		forTask = workers.ForTaskSpread
	case q8Prefill(w.DType) && !f32Act && nt > 1:
		align = simd.MatMulPackRows // the int8 tile GEMMs' panels
	}
	q8 := quantizeTokens(x, nt, w, nt, f32Act)
	t := mmTasks.Get().(*mmTask)
	*t = mmTask{dst: dst, x: x, q8: q8Bytes(q8), nt: nt, w: w, done: done, rowStep: rowStep, tokStep: tokStep, pack: pack}
	forTask(rows, align, per, t)
	*t = mmTask{}
	mmTasks.Put(t)
	releaseTokens(q8)
}

// packAlign is the row alignment of the chunks of a product on simd's
// packed path over k goroutines: whole packed chunks
// (simd.MatMulPackChunkRows) where the rows give every goroutine at least
// two, so that each reads the token rows once per chunk as one call does,
// otherwise the kernels' full width (simd.MatMulPackSplitRows). At 16 rows
// the 1B model's K and V products (512 rows) went to two threads in
// chunks of one panel each, all at half the AVX-512 kernel's rate
// (gemmP12x16: 3% of a two-thread prefill's samples, none on one thread).
func packAlign(rows, k int) int {
	if k > 1 && rows >= 2*k*simd.MatMulPackChunkRows {
		return simd.MatMulPackChunkRows
	}
	return simd.MatMulPackSplitRows()
}

// mmTask is one matMul call's work over row chunks, recycled through
// mmTasks so that a decode step's matrix products allocate nothing.
type mmTask struct {
	dst, x                 []float32
	q8                     []byte // x quantized (quantizeTokens), or nil
	nt                     int
	w                      *tensor.Weight
	done                   <-chan struct{}
	rowStep, tokStep, pack int
	each                   bool // matMulEach's product: every token row alone
}

var mmTasks = sync.Pool{New: func() any { return new(mmTask) }}

// Run computes weight rows [lo, hi) for every token row, in runs of
// rowStep rows by tokStep tokens that stop once done is closed.
func (m *mmTask) Run(lo, hi int) {
	rows, cols, nt := m.w.Rows, m.w.Cols, m.nt
	if m.each {
		step := eachRows
		if m.q8 == nil && eachKernel(m.w.DType) {
			step = runRows(m.nt, cols) // the kernel keeps its rows in cache itself
		}
		for r := lo; r < hi; r += step {
			if stopped(m.done) {
				return
			}
			m.runEach(r, min(hi, r+step))
		}
		return
	}
	for r := lo; r < hi; r += m.rowStep {
		for t := 0; t < nt; {
			if stopped(m.done) {
				return
			}
			n := min(m.tokStep, nt-t)
			if nt >= m.pack && nt-t-n < m.pack {
				n = nt - t // no last run below the packed path's threshold
			}
			matMulRows(m.dst[t*rows:], m.x[t*cols:], m.tokenQ8(t), n, m.w, r, min(hi, r+m.rowStep))
			t += n
		}
	}
}

// tokenQ8 returns m.q8 from token row t on (nil if m.q8 is).
func (m *mmTask) tokenQ8(t int) []byte {
	if m.q8 == nil {
		return nil
	}
	return m.q8[t*q8RowBytes(m.w):]
}

// packTokens is the number of token rows from which simd's matrix
// products over weights of type dt take their packed path with the kernels
// selected now (math.MaxInt for F32, and with the pure-Go kernels): matMul
// keeps its runs on one side of it and its row chunks at multiples of
// simd.MatMulPackRows (packAlign), so that an interruptible product, and
// one over several goroutines, gives the bits of one call.
func packTokens(dt tensor.DType) int {
	switch dt {
	case tensor.F16:
		return simd.MatMulPackTokensF16()
	case tensor.BF16:
		return simd.MatMulPackTokensBF16()
	case tensor.Q80:
		return simd.MatMulPackTokensQ80()
	}
	if _, ok := blockTypes[dt]; ok {
		return simd.MatMulDecodedTokens() // the packed path from there (blockmm.go)
	}
	return math.MaxInt
}

// matMulRows computes rows [lo, hi) of MatMul on the calling goroutine;
// q8 is x quantized for the weight types that take them
// (quantizeTokens: the types of q8Dots below their packed threshold, and
// at every nt those of q8Prefill), nil otherwise.
func matMulRows(dst, x []float32, q8 []byte, nt int, w *tensor.Weight, lo, hi int) {
	rows, cols := w.Rows, w.Cols
	switch w.DType {
	case tensor.F32:
		simd.MatMulF32(dst, rows, x, nt, cols, w.F32, lo, hi)
	case tensor.F16:
		simd.MatMulF16(dst, rows, x, nt, cols, w.U16, lo, hi)
	case tensor.BF16:
		simd.MatMulBF16(dst, rows, x, nt, cols, w.U16, lo, hi)
	case tensor.Q80:
		if q8 != nil {
			matMulQ8(dst, rows, q8, nt, w, lo, hi)
			return
		}
		simd.MatMulQ80(dst, rows, x, nt, cols, w.Raw, lo, hi)
	default:
		matMulBlocks(dst, rows, x, q8, nt, cols, w, lo, hi)
	}
}

// matMulEachRows computes rows [lo, hi) of matMulEach on the calling
// goroutine: every token row with the bits matMulRows gives it alone (nt =
// 1) on float32 activations. For F16, BF16 and Q8_0 weights (Q8_0 with
// F32Activations; otherwise runEach) simd's multi-token kernels load and
// convert each weight vector once for several token rows; other types take
// the token rows one after another, the rows coming from L2 after the
// first.
func matMulEachRows(dst, x []float32, nt int, w *tensor.Weight, lo, hi int) {
	rows, cols := w.Rows, w.Cols
	switch w.DType {
	case tensor.F16:
		simd.MatMulEachF16(dst, rows, x, nt, cols, w.U16, lo, hi)
	case tensor.BF16:
		simd.MatMulEachBF16(dst, rows, x, nt, cols, w.U16, lo, hi)
	case tensor.Q80:
		simd.MatMulEachQ80(dst, rows, x, nt, cols, w.Raw, lo, hi)
	default:
		for t := 0; t < nt; t++ {
			matMulRows(dst[t*rows:], x[t*cols:], nil, 1, w, lo, hi)
		}
	}
}

// eachKernel reports whether simd has a product for weights of type dt
// that takes every token row over a piece of the weights while it is in
// cache (simd.MatMulEachF16, MatMulEachBF16, MatMulEachQ80, with or
// without a multi-token kernel): a pass of matMulEach then runs over
// runRows weight rows. In pieces of eachRows the Zen 5's product of 5 token
// rows over 2048×2048 F16 weights took 1.08× as long as in one call (616–622
// against 570–576 µs, a kernel probe).
func eachKernel(dt tensor.DType) bool {
	switch dt {
	case tensor.F16, tensor.BF16, tensor.Q80:
		return true
	}
	return false
}

// runEach is matMulEachRows over weight rows [lo, hi) for the task's token
// rows, the weight types with quantized activations (tokenQ8; Q8_0 too,
// unless F32Activations) one token row at a time over their codes, each
// with the bits it gets alone.
func (m *mmTask) runEach(lo, hi int) {
	if m.q8 == nil {
		matMulEachRows(m.dst, m.x, m.nt, m.w, lo, hi)
		return
	}
	rows, cols := m.w.Rows, m.w.Cols
	if q8Prefill(m.w.DType) { // every token row its one-row bits, in one call
		matMulQ8(m.dst, rows, m.q8, m.nt, m.w, lo, hi)
		return
	}
	for t := 0; t < m.nt; t++ {
		matMulRows(m.dst[t*rows:], m.x[t*cols:], m.tokenQ8(t), 1, m.w, lo, hi)
	}
}

// RMSNorm implements backend.Backend: a prefill's rows over the workers
// (serial, its 33 norms were 1% of the 1B model's two-thread prefill of 512
// tokens, with the second core idle), each row as RMSNorm computes it.
func (b *Backend) RMSNorm(dst, x backend.Tensor, rows int, w backend.Tensor, eps float32) {
	ds, xs, ws := host(dst), host(x), host(w)
	d := len(ws)
	per := max(1, rowOpChunk/max(1, d))
	if b.workers.Serial(rows, 1, per) { // a decode step: no closure
		RMSNorm(ds, xs, rows, ws, eps)
		return
	}
	b.workers.For(rows, 1, per, func(lo, hi int) { RMSNorm(ds[lo*d:hi*d], xs[lo*d:hi*d], hi-lo, ws, eps) })
}

// rowOpChunk is the fewest values of a row-wise operation (RMSNorm, RoPE)
// worth a goroutine, as swigluChunk.
const rowOpChunk = 1 << 15

// RMSNorm sets row t of dst to x_t / sqrt(mean(x_t²)+eps) ⊙ weight, for
// nt rows of len(weight) values.
func RMSNorm(dst, x []float32, nt int, weight []float32, eps float32) {
	d := len(weight)
	for t := 0; t < nt; t++ {
		xr := x[t*d : (t+1)*d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(d)+float64(eps)))
		dr := dst[t*d : (t+1)*d]
		for i, v := range xr {
			dr[i] = v * inv * weight[i]
		}
	}
}

// AddBias implements backend.Backend.
func (b *Backend) AddBias(x backend.Tensor, nt int, bias backend.Tensor) {
	xs, bs := host(x), host(bias)
	n := len(bs)
	for t := 0; t < nt; t++ {
		row := xs[t*n : (t+1)*n]
		for i, v := range bs {
			row[i] += v
		}
	}
}

// RoPEAngles implements backend.Backend.
func (b *Backend) RoPEAngles(dst backend.Tensor, pos []int32, invFreq []float64) {
	d, half := host(dst), len(invFreq)
	for t, p := range pos {
		cs := d[t*2*half : (t+1)*2*half]
		for k, f := range invFreq {
			s, c := math.Sincos(float64(p) * f)
			cs[k], cs[half+k] = float32(c), float32(s)
		}
	}
}

// RoPE implements backend.Backend.
func (b *Backend) RoPE(x backend.Tensor, nt, heads, headDim, rotDim int, angles backend.Tensor, neox bool) {
	xs, a := host(x), host(angles)
	per := max(1, rowOpChunk/max(1, heads*headDim))
	if b.workers.Serial(nt, 1, per) { // a decode step: no closure
		rope(xs, a, 0, nt, heads, headDim, rotDim, neox)
		return
	}
	b.workers.For(nt, 1, per, func(lo, hi int) { rope(xs, a, lo, hi, heads, headDim, rotDim, neox) })
}

// rope rotates the heads of token rows [lo, hi) of x by their angles.
func rope(xs, a []float32, lo, hi, heads, headDim, rotDim int, neox bool) {
	half := rotDim / 2
	for t := lo; t < hi; t++ {
		c := a[t*rotDim : t*rotDim+half]
		s := a[t*rotDim+half : (t+1)*rotDim]
		for h := 0; h < heads; h++ {
			RotateHead(xs[(t*heads+h)*headDim:(t*heads+h+1)*headDim], c, s, neox)
		}
	}
}

// RotateHead applies the rotary embedding with the given cos/sin of each
// pair to one head vector v in place: pairs (i, i+len(c)) with neox,
// otherwise (2i, 2i+1).
func RotateHead(v, c, s []float32, neox bool) {
	if neox {
		simd.RotateNeoX(v[:2*len(c)], c, s)
		return
	}
	simd.RotatePairs(v[:2*len(c)], c, s)
}

// SwiGLU implements backend.Backend: gate[i] = silu(gate[i])·up[i], with
// e^-x from simd.ExpShiftTaylor (within 2 ulp of e^-x; math.Exp took
// 20 ns a value, 8% of a 2-thread prefill), over the workers.
func (b *Backend) SwiGLU(gate, up backend.Tensor, n int) {
	g, u := host(gate)[:n], host(up)[:n]
	if b.workers.Serial(n, 8, swigluChunk) { // a decode step: no closure
		swiglu(g, u)
		return
	}
	b.workers.For(n, 8, swigluChunk, func(lo, hi int) { swiglu(g[lo:hi], u[lo:hi]) })
}

// swiglu sets g[i] = silu(g[i])·u[i].
func swiglu(g, u []float32) {
	var e [256]float32
	for i := 0; i < len(g); i += len(e) {
		gs := g[i:min(len(g), i+len(e))]
		us := u[i:][:len(gs)]
		simd.ExpShiftTaylor(e[:], gs, -1, 0)
		for j, x := range gs {
			gs[j] = x / (1 + e[j]) * us[j]
		}
	}
}

// swigluChunk is the fewest values of SwiGLU worth a goroutine (a
// decode step's 8192 values take about 10 µs on one).
const swigluChunk = 1 << 15

// Add implements backend.Backend.
func (b *Backend) Add(dst, src backend.Tensor, n int) {
	d, s := host(dst)[:n], host(src)[:n]
	for i, v := range s {
		d[i] += v
	}
}

// Copy implements backend.Backend.
func (b *Backend) Copy(dst, src backend.Tensor, n int) { copy(host(dst)[:n], host(src)[:n]) }

// Gather implements backend.Backend.
func (b *Backend) Gather(dst, src backend.Tensor, rows []int32, width int) {
	d, s := host(dst), host(src)
	for i, r := range rows {
		copy(d[i*width:(i+1)*width], s[int(r)*width:(int(r)+1)*width])
	}
}

// Embed implements backend.Backend.
func (b *Backend) Embed(dst backend.Tensor, m backend.Matrix, ids []int32) {
	w := weight(m)
	d, cols := host(dst), w.Cols
	for t, id := range ids {
		Row(d[t*cols:(t+1)*cols], w, int(id))
	}
}

// Row dequantizes row r of w into dst.
func Row(dst []float32, w *tensor.Weight, r int) {
	d := w.Cols
	switch w.DType {
	case tensor.F32:
		copy(dst, w.F32[r*d:(r+1)*d])
	case tensor.F16:
		simd.F16ToF32(dst, w.U16[r*d:(r+1)*d])
	case tensor.BF16:
		simd.BF16ToF32(dst, w.U16[r*d:(r+1)*d])
	case tensor.Q80:
		rb := w.DType.RowBytes(d)
		row := w.Raw[r*rb : (r+1)*rb]
		for blk := 0; blk < d/tensor.Q80BlockSize; blk++ {
			bb := row[blk*tensor.Q80BlockBytes:]
			scale := simd.F16ToF32Scalar(uint16(bb[0]) | uint16(bb[1])<<8)
			for i := 0; i < tensor.Q80BlockSize; i++ {
				dst[blk*tensor.Q80BlockSize+i] = scale * float32(int8(bb[2+i]))
			}
		}
	default:
		rb := w.DType.RowBytes(d)
		decodeRow(blockTypes[w.DType], dst[:d], w.Raw[r*rb:(r+1)*rb])
	}
}
