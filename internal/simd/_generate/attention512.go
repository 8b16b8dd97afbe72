package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The attention kernels of attention.go on 512-bit registers, for head
// sizes that are a multiple of 16 (64, 80, 96, 128, 256: the dispatcher
// keeps the AVX2 kernels for the others). They have the same signatures
// and the same meaning; accumulate512 takes every fused multiply-add of
// accumulate in the same order (each output column is its own lane), so its
// results are the AVX2 kernel's bits, while scores512 sums 16 columns per
// lane group instead of 8 and reduces in another order, so its scores
// differ from the AVX2 kernel's in the last bits.

// scores512 writes scoresQ<qb>AVX512: dst[i*ldd+j] = Σ_{c < dim} q[i*dim+c]*rows[j*dim+c]
// for i < qb, j < n, dim a multiple of 16. Rows go r at a time as in
// scores: qb*r accumulators, r row vectors (none with qb == 1, where each
// is used once and taken from memory) and one query vector. With more rows
// than attention512 gives (qb*r+r+1 above 16), avo's greedy allocator
// fails to place the registers, though 32 ZMM would hold them.
func scores512(qb, r int) {
	name := fmt.Sprintf("scoresQ%dAVX512", qb)
	header(name, "func(dst *float32, ldd int, q *float32, rows *float32, dim int, n int)",
		fmt.Sprintf("%s sets dst[i*ldd+j] = Σ_{c < dim} q[i*dim+c]*rows[j*dim+c]", name),
		fmt.Sprintf("for i < %d, j < n. dim must be a positive multiple of 16.", qb))
	qs := make([]Register, qb)
	qs[0] = Load(Param("q"), GP64())
	stride := Load(Param("dim"), GP64())
	SHLQ(U8(2), stride) // bytes per row, and of the dim columns
	// The loops index columns with a negative byte offset that counts up
	// to zero, so the query and row pointers point past column dim.
	ADDQ(stride, qs[0])
	for i := 1; i < qb; i++ {
		qs[i] = GP64()
		LEAQ(Mem{Base: qs[i-1], Index: stride, Scale: 1}, qs[i])
	}
	rp := Load(Param("rows"), GP64())
	ADDQ(stride, rp)
	dp := Load(Param("dst"), GP64())
	n := Load(Param("n"), GP64())

	block := func(w int, tag string) {
		rs := make([]Register, w)
		rs[0] = rp
		for k := 1; k < w; k++ {
			rs[k] = GP64()
			LEAQ(Mem{Base: rs[k-1], Index: stride, Scale: 1}, rs[k])
		}
		acc := make([][]VecVirtual, qb)
		for i := range acc {
			acc[i] = zeros512(w)
		}
		c := GP64()
		MOVQ(stride, c)
		NEGQ(c)
		Label(name + "_dloop" + tag)
		rv := make([]Op, w)
		for k := range rv {
			m := Mem{Base: rs[k], Index: c, Scale: 1}
			if qb == 1 {
				rv[k] = m
				continue
			}
			v := ZMM()
			VMOVUPS(m, v)
			rv[k] = v
		}
		for i := 0; i < qb; i++ {
			qv := ZMM()
			VMOVUPS(Mem{Base: qs[i], Index: c, Scale: 1}, qv)
			for k := 0; k < w; k++ {
				VFMADD231PS(rv[k], qv, acc[i][k])
			}
		}
		ADDQ(U8(64), c)
		JNZ(LabelRef(name + "_dloop" + tag))

		storeScores(acc, dp, rp, stride, n, reduceRows512)
	}

	blockLoop(name, n, r, block)
	VZEROUPPER()
	RET()
}

// reduceRows512 returns an XMM whose lane j holds the lane sum of the ZMM
// a[j], for len(a) of 1 to 4 (lanes past len(a) hold junk). It sums pairs
// of rows at full width first (so four rows cost four shuffles, three adds
// and one fold of 16 lanes to 4) and uses only instructions with EVEX
// forms.
func reduceRows512(a []VecVirtual) VecVirtual {
	// pair(x, y) leaves, in every 128-bit lane, [x0+x2, y0+y2, x1+x3, y1+y3]
	// of that lane.
	pair := func(x, y VecVirtual) VecVirtual {
		lo, hi := ZMM(), ZMM()
		VUNPCKLPS(y, x, lo)
		VUNPCKHPS(y, x, hi)
		VADDPS(hi, lo, lo)
		return lo
	}
	var s VecVirtual
	if len(a) == 1 {
		s = a[0] // lane sums of 4 in each 128-bit lane: two shuffles
		t := ZMM()
		VSHUFPS(U8(0x4E), s, s, t) // [2, 3, 0, 1]
		VADDPS(t, s, t)
		u := ZMM()
		VSHUFPS(U8(0xB1), t, t, u) // [1, 0, 3, 2]
		VADDPS(u, t, u)
		s = u
	} else {
		u := pair(a[0], a[1])
		v := u
		switch len(a) {
		case 3:
			v = pair(a[2], a[2])
		case 4:
			v = pair(a[2], a[3])
		}
		// Per 128-bit lane: [u0+u2, u1+u3, v0+v2, v1+v3] = rows 0..3.
		s = ZMM()
		t := ZMM()
		VSHUFPS(U8(0x44), v, u, s) // [u0, u1, v0, v1]
		VSHUFPS(U8(0xEE), v, u, t) // [u2, u3, v2, v3]
		VADDPS(t, s, s)
	}
	// Fold the four 128-bit lanes. The temporaries are ZMM virtuals used
	// through their YMM and XMM views, so that they may take any of the 32
	// registers: a YMM or XMM virtual is given one of the first 16, which
	// the live accumulators may all hold.
	y := ZMM()
	VEXTRACTF64X4(U8(1), s, y.AsY())
	VADDPS(s.AsY(), y.AsY(), y.AsY())
	x := ZMM()
	VEXTRACTF32X4(U8(1), y.AsY(), x.AsX())
	VADDPS(y.AsX(), x.AsX(), x.AsX())
	return x.AsX().(VecVirtual)
}

// accumulate512 writes accumulateQ<qb>AVX512: acc[i*dim+c] += Σ_{j<n} w[i*ldw+j]*rows[j*dim+c]
// for i < qb, c < dim, dim a multiple of 16. Columns go cv vectors (16*cv
// floats) at a time as in accumulate; each weight is broadcast from memory
// by the fused multiply-add itself, so only the qb*cv accumulators and one
// row vector at a time take registers.
func accumulate512(qb, cv int) {
	name := fmt.Sprintf("accumulateQ%dAVX512", qb)
	header(name, "func(acc *float32, w *float32, ldw int, dim int, rows *float32, n int)",
		fmt.Sprintf("%s sets acc[i*dim+c] += Σ_{j<n} w[i*ldw+j]*rows[j*dim+c]", name),
		fmt.Sprintf("for i < %d, c < dim, in the order of accumulateQ%dAVX2. dim must be a", qb, qb),
		"positive multiple of 16.")
	ws := make([]Register, qb)
	ws[0] = Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	SHLQ(U8(2), ldw)
	for i := 1; i < qb; i++ {
		ws[i] = GP64()
		LEAQ(Mem{Base: ws[i-1], Index: ldw, Scale: 1}, ws[i])
	}
	stride := Load(Param("dim"), GP64())
	vecs := GP64()
	MOVQ(stride, vecs)
	SHRQ(U8(4), vecs) // 16-column vectors left
	SHLQ(U8(2), stride)
	ap := Load(Param("acc"), GP64())
	rc := Load(Param("rows"), GP64())
	n := Load(Param("n"), GP64())

	chunk := func(v int, tag string) {
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
				a[i][k] = ZMM()
				VMOVUPS(m.Offset(64*k), a[i][k])
			}
		}
		rp := GP64()
		MOVQ(rc, rp)
		j := GP64()
		XORQ(j, j)
		Label(name + "_jloop" + tag)
		CMPQ(j, n)
		JAE(LabelRef(name + "_store" + tag))
		for k := 0; k < v; k++ {
			r := ZMM()
			VMOVUPS(Mem{Base: rp, Disp: 64 * k}, r)
			for i := 0; i < qb; i++ {
				VFMADD231PS_BCST(Mem{Base: ws[i], Index: j, Scale: 4}, r, a[i][k])
			}
		}
		ADDQ(stride, rp)
		INCQ(j)
		JMP(LabelRef(name + "_jloop" + tag))

		Label(name + "_store" + tag)
		for i := range a {
			m := arow(i)
			for k := range a[i] {
				VMOVUPS(a[i][k], m.Offset(64*k))
			}
		}
		ADDQ(U32(64*v), ap)
		ADDQ(U32(64*v), rc)
		SUBQ(U8(v), vecs)
	}

	blockLoop(name, vecs, cv, chunk)
	VZEROUPPER()
	RET()
}

// attention512 writes the AVX-512 scores and accumulate kernels, blocked
// as the comment at each says.
func attention512() {
	for _, b := range []struct{ qb, r, cv int }{{1, 8, 8}, {2, 5, 8}, {3, 4, 8}, {4, 3, 4}} {
		scores512(b.qb, b.r)
		accumulate512(b.qb, b.cv)
	}
}
