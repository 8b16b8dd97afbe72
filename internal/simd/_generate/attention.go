package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Attention kernels over a decoded chunk of n rows of dim float32 values
// (rows row-major, stride dim) and nq query rows (stride dim). Each kernel
// handles a fixed number of queries, qb, and every row; the Go caller splits
// nq into blocks and finishes the dim%8 columns.

// The scores and accumulate generators write the AVX2 kernels (width ymm)
// and the AVX-512 ones (zmm, see attention512), which take head sizes that
// are a multiple of 16 (the dispatcher keeps the AVX2 kernels for the
// others).

// vecWidth is the vector width a kernel is written for.
type vecWidth struct {
	lanes  int    // float32 lanes: 8 or 16
	suffix string // of the kernel names: "AVX2" or "AVX512"
	vec    func() VecVirtual
	zeros  func(n int) []VecVirtual
	reduce func([]VecVirtual) VecVirtual
}

var (
	ymm = vecWidth{8, "AVX2", func() VecVirtual { return YMM() }, zeros, reduceRows}
	zmm = vecWidth{16, "AVX512", func() VecVirtual { return ZMM() }, zeros512, reduceRows512}
)

// bytes is the size of a vector of float32 lanes.
func (w vecWidth) bytes() int { return 4 * w.lanes }

// scores writes scoresQ<qb><AVX2|AVX512>: dst[i*ldd+j] = Σ_{c < dim&^7} q[i*dim+c]*rows[j*dim+c]
// for i < qb, j < n (on ZMM, dim a multiple of 16). Rows go r at a time:
// per vector of columns the r row vectors are loaded once and each query
// vector is loaded once and multiplied into all r rows, so qb*r
// accumulators, r row vectors and one query vector must fit in the
// registers (16 YMM; on ZMM, avo's greedy allocator fails to place more
// than about 16 live ones, though 32 ZMM would hold them). With qb == 1
// the row vectors are used once and are taken straight from memory. The
// n%r leftover rows go through one narrower block.
func scores(qb, r int, w vecWidth) {
	name := fmt.Sprintf("scoresQ%d%s", qb, w.suffix)
	if w.lanes == 16 {
		header(name, "func(dst *float32, ldd int, q *float32, rows *float32, dim int, n int)",
			fmt.Sprintf("%s sets dst[i*ldd+j] = Σ_{c < dim} q[i*dim+c]*rows[j*dim+c]", name),
			fmt.Sprintf("for i < %d, j < n. dim must be a positive multiple of 16.", qb))
	} else {
		header(name, "func(dst *float32, ldd int, q *float32, rows *float32, dim int, n int)",
			fmt.Sprintf("%s sets dst[i*ldd+j] = Σ_{c < dim&^7} q[i*dim+c]*rows[j*dim+c]", name),
			fmt.Sprintf("for i < %d, j < n. It reads whole groups of 8 columns only; dim must be", qb),
			"at least 8.")
	}
	q0 := Load(Param("q"), GP64())
	// The loops index columns with a negative byte offset that counts up
	// to zero, so the query and row pointers point past column dim&^7
	// (dim4, in bytes).
	var dim4, stride Register
	if w.lanes == 16 {
		stride = Load(Param("dim"), GP64())
		SHLQ(U8(2), stride) // bytes per row, and of the dim columns
		dim4 = stride
		ADDQ(stride, q0)
	} else {
		dim4 = Load(Param("dim"), GP64())
		ANDQ(I32(-8), dim4)
		SHLQ(U8(2), dim4) // bytes of dim&^7 columns
		ADDQ(dim4, q0)
		stride = Load(Param("dim"), GP64())
		SHLQ(U8(2), stride) // bytes per row
	}
	qs := rowPtrs(q0, stride, qb)
	rp := Load(Param("rows"), GP64())
	ADDQ(dim4, rp)
	dp := Load(Param("dst"), GP64())
	n := Load(Param("n"), GP64())

	// block computes rows [rp, rp+nr*stride) into dst[.., dp..dp+nr).
	block := func(nr int, tag string) {
		rs := rowPtrs(rp, stride, nr)
		acc := zeroGrid(qb, nr, w.zeros)
		c := GP64()
		MOVQ(dim4, c)
		NEGQ(c)
		Label(name + "_dloop" + tag)
		rv := make([]Op, nr)
		for k := range rv {
			m := Mem{Base: rs[k], Index: c, Scale: 1}
			if qb == 1 {
				rv[k] = m
				continue
			}
			v := w.vec()
			VMOVUPS(m, v)
			rv[k] = v
		}
		for i := 0; i < qb; i++ {
			qv := w.vec()
			VMOVUPS(Mem{Base: qs[i], Index: c, Scale: 1}, qv)
			for k := 0; k < nr; k++ {
				VFMADD231PS(rv[k], qv, acc[i][k])
			}
		}
		ADDQ(U8(w.bytes()), c)
		JNZ(LabelRef(name + "_dloop" + tag))

		storeScores(acc, dp, rp, stride, n, w.reduce)
	}

	blockLoop(name, n, r, block)
	VZEROUPPER()
	RET()
}

// blockLoop emits the loop of a kernel that processes count (a register)
// items in blocks: block(r, "") while at least r are left, then at most
// one block of each narrower power-of-two width (any count below r is a sum
// of distinct ones), each with its own label tag.
func blockLoop(name string, count Register, r int, block func(w int, tag string)) {
	Label(name + "_loop")
	CMPQ(count, U8(r))
	JB(LabelRef(name + "_tail"))
	block(r, "")
	JMP(LabelRef(name + "_loop"))

	Label(name + "_tail")
	for w := largestPow2Below(r); w >= 1; w /= 2 {
		tag := fmt.Sprintf("_t%d", w)
		CMPQ(count, U8(w))
		JB(LabelRef(name + tag + "_skip"))
		block(w, tag)
		Label(name + tag + "_skip")
	}
}

// storeScores ends a block of w = len(acc[i]) rows of a scores kernel: it
// reduces the accumulators acc[i][j] (query i, row j) to scores with
// reduce (reduceRows, or reduceRows512 for ZMM accumulators), stores
// them at dp + i*ldd floats (ldd, the kernel's parameter), and moves rp w
// rows (of stride bytes) and dp w scores on, counting n down by w.
func storeScores(acc [][]VecVirtual, dp, rp, stride, n Register, reduce func([]VecVirtual) VecVirtual) {
	w := len(acc[0])
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	out := GP64()
	MOVQ(dp, out)
	eachRow(out, ldd, len(acc), func(i int) {
		for j0 := 0; j0 < w; j0 += 4 {
			j1 := min(j0+4, w)
			storeRows(reduce(acc[i][j0:j1]), Mem{Base: out, Disp: 4 * j0}, j1-j0)
		}
	})
	for j := 0; j < w; j++ {
		ADDQ(stride, rp)
	}
	ADDQ(U8(4*w), dp)
	SUBQ(U8(w), n)
}

// largestPow2Below returns the largest power of two below r (r >= 2), or 0.
func largestPow2Below(r int) int {
	p := 0
	for w := 1; w < r; w *= 2 {
		p = w
	}
	return p
}

// accumulate writes accumulateQ<qb><AVX2|AVX512>: acc[i*dim+c] += Σ_{j<n} w[i*ldw+j]*rows[j*dim+c]
// for i < qb, c < dim&^7 (on ZMM, dim a multiple of 16). Columns go cv
// vectors at a time: the qb*cv accumulators are loaded once, updated for
// every row and stored once, so acc is read and written once per call. On
// YMM the cv row vectors are loaded once per row and each weight broadcast
// once per row; on ZMM each weight is broadcast from memory by the fused
// multiply-add itself, so only the accumulators and one row vector at a
// time take registers. Either way every accumulator takes the same
// multiply-adds in the same order, so the two kernels give the same bits.
// The leftover vectors go through one narrower chunk.
func accumulate(qb, cv int, w vecWidth) {
	name := fmt.Sprintf("accumulateQ%d%s", qb, w.suffix)
	if w.lanes == 16 {
		header(name, "func(acc *float32, w *float32, ldw int, dim int, rows *float32, n int)",
			fmt.Sprintf("%s sets acc[i*dim+c] += Σ_{j<n} w[i*ldw+j]*rows[j*dim+c]", name),
			fmt.Sprintf("for i < %d, c < dim, in the order of accumulateQ%dAVX2. dim must be a", qb, qb),
			"positive multiple of 16.")
	} else {
		header(name, "func(acc *float32, w *float32, ldw int, dim int, rows *float32, n int)",
			fmt.Sprintf("%s sets acc[i*dim+c] += Σ_{j<n} w[i*ldw+j]*rows[j*dim+c]", name),
			fmt.Sprintf("for i < %d, c < dim&^7. It reads whole groups of 8 columns only.", qb))
	}
	vb := w.bytes()
	w0 := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	SHLQ(U8(2), ldw)
	ws := rowPtrs(w0, ldw, qb)
	stride := Load(Param("dim"), GP64())
	vecs := GP64()
	MOVQ(stride, vecs)
	if w.lanes == 16 {
		SHRQ(U8(4), vecs) // 16-column vectors left
	} else {
		SHRQ(U8(3), vecs) // 8-column vectors left
	}
	SHLQ(U8(2), stride)
	ap := Load(Param("acc"), GP64())
	rc := Load(Param("rows"), GP64())
	n := Load(Param("n"), GP64())

	// chunk updates columns [ap, ap+vb*v) of every query row.
	chunk := func(v int, tag string) {
		// Query row i of acc is at ap + i*stride.
		arow := func(i int) Mem {
			switch i {
			case 0:
				return Mem{Base: ap}
			case 1, 2:
				return Mem{Base: ap, Index: stride, Scale: uint8(i)}
			}
			t := GP64()
			LEAQ(Mem{Base: ap, Index: stride, Scale: 2}, t)
			ADDQ(stride, t)
			return Mem{Base: t}
		}
		a := make([][]VecVirtual, qb)
		for i := range a {
			a[i] = make([]VecVirtual, v)
			m := arow(i)
			for k := range a[i] {
				a[i][k] = w.vec()
				VMOVUPS(m.Offset(vb*k), a[i][k])
			}
		}
		rp := GP64()
		MOVQ(rc, rp)
		j := GP64()
		XORQ(j, j)
		Label(name + "_jloop" + tag)
		CMPQ(j, n)
		JAE(LabelRef(name + "_store" + tag))
		if w.lanes == 16 {
			for k := 0; k < v; k++ {
				r := ZMM()
				VMOVUPS(Mem{Base: rp, Disp: vb * k}, r)
				for i := 0; i < qb; i++ {
					VFMADD231PS_BCST(Mem{Base: ws[i], Index: j, Scale: 4}, r, a[i][k])
				}
			}
		} else {
			rv := make([]Op, v)
			for k := range rv {
				m := Mem{Base: rp, Disp: 32 * k}
				if qb == 1 {
					rv[k] = m // used once: straight from memory
					continue
				}
				r := YMM()
				VMOVUPS(m, r)
				rv[k] = r
			}
			for i := 0; i < qb; i++ {
				b := YMM()
				VBROADCASTSS(Mem{Base: ws[i], Index: j, Scale: 4}, b)
				for k := 0; k < v; k++ {
					VFMADD231PS(rv[k], b, a[i][k])
				}
			}
		}
		ADDQ(stride, rp)
		INCQ(j)
		JMP(LabelRef(name + "_jloop" + tag))

		Label(name + "_store" + tag)
		for i := range a {
			m := arow(i)
			for k := range a[i] {
				VMOVUPS(a[i][k], m.Offset(vb*k))
			}
		}
		ADDQ(U32(vb*v), ap)
		ADDQ(U32(vb*v), rc)
		SUBQ(U8(v), vecs)
	}

	blockLoop(name, vecs, cv, chunk)
	VZEROUPPER()
	RET()
}
