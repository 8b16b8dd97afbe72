package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The multi-token decode kernels: one weight row against T token rows, each
// weight vector loaded and converted once and fed to T sets of
// accumulators. Each token row's set takes exactly the fused multiply-adds
// of the one-row kernel (dot, dotQ80, dot512, dotQ80AVX512), in the same
// accumulators, lanes and order, with the same tail and the same reduction
// tree, so that row t's result is bit for bit the one-row kernel's on
// (w, x_t). They exist for kvq eval's side-by-side caches, whose decode
// step has one token row per cache that must get the bits it gets alone
// (internal/simd/multitok.go).
//
// Every kernel has the signature
//
//	func(dst *float32, ldd int, w *W, x *float32, ldx, n int)
//
// and sets dst[t*ldd] for t < T from the n columns of w and of x[t*ldx:].

// multitokAVX2 writes the AVX2 kernels (16 YMM: 4 accumulators a row, up
// to 3 rows).
func multitokAVX2() {
	for _, t := range []wtype{f16, bf16} {
		for _, nt := range []int{2, 3} {
			dots(t, nt)
		}
	}
	for _, nt := range []int{2, 3} {
		dotsQ80(nt)
	}
}

// multitok512 writes the AVX-512 kernels (32 ZMM: 8 accumulators a row for
// F16 and BF16, up to 3 rows; 4 for Q8_0, up to 4 rows).
func multitok512() {
	for _, t := range []wtype{f16, bf16} {
		for _, nt := range []int{2, 3} {
			dots512(t, 8, nt)
		}
	}
	for _, nt := range []int{2, 3, 4} {
		dotsQ80AVX512(4, nt)
	}
}

// multitokArgs loads the common arguments: dst with its stride in bytes,
// the weight pointer, nt token row pointers and n.
func multitokArgs(nt int) (dst, ldd, w Register, xs []Mem, n Register) {
	dst = Load(Param("dst"), GP64())
	ldd = Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	w = Load(Param("w"), GP64())
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	xs = rowMems(xp, ldx, nt)
	n = Load(Param("n"), GP64())
	return
}

func multitokHeader(name, wType, doc string, nt int) {
	header(name, fmt.Sprintf("func(dst *float32, ldd int, w *%s, x *float32, ldx, n int)", wType),
		fmt.Sprintf("%s sets dst[t*ldd] for t < %d to %s", name, nt, doc))
}

// storeTokenRows sums each token row's accumulators acc[t] (addTree, then
// hsum, or hsum512 for ZMMs), then stores the sums to dst, dst+ldd, ...
func storeTokenRows(dst, ldd Register, acc [][]VecVirtual, hsum func(VecVirtual) VecVirtual) {
	s := make([]VecVirtual, len(acc))
	for r := range acc {
		s[r] = hsum(addTree(acc[r]))
	}
	eachRow(dst, ldd, len(s), func(t int) { VMOVSS(s[t].AsX(), Mem{Base: dst}) })
}

// dots is dot(t) for nt token rows: Σ float32(w[i])*x_t[i] over n&^7
// elements, the tail left to the caller as for dot.
func dots(t wtype, nt int) {
	name := fmt.Sprintf("dots%d%sAVX2", nt, t.name)
	multitokHeader(name, t.goType, fmt.Sprintf("dot%sAVX2(w[:n], x[t*ldx:][:n]), bit for bit.", t.name), nt)
	dst, ldd, wp, xs, n := multitokArgs(nt)
	w := Mem{Base: wp}
	n32 := elementBounds(n, 32)
	acc := zeroGrid(nt, 4, zeros)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		dotStep(t, w, xs, i, acc, vecs)
	})

	Label(name + "_done")
	storeTokenRows(dst, ldd, acc, hsum)
	VZEROUPPER()
	RET()
}

// dotsQ80 is dotQ80 for nt token rows: each block's 32 codes are widened
// once (a YMM of 8 at a time) and its scale once.
func dotsQ80(nt int) {
	name := fmt.Sprintf("dots%dQ80AVX2", nt)
	multitokHeader(name, "byte", "dotQ80AVX2(w, x[t*ldx:][:n]), bit for bit.", nt)
	dst, ldd, w, xs, nb := multitokArgs(nt)
	SHRQ(U8(5), nb)
	acc := zeroGrid(nt, 2, zeros)
	// block adds block blk's term, x_t at xs[t] + xoff, to accumulator k.
	block := func(blk Mem, xoff, k int) {
		p := make([]VecVirtual, nt)
		for j := 0; j < 4; j++ {
			c := q80Codes(blk.Offset(2 + 8*j))
			for r := range p {
				xm := xs[r].Offset(xoff + 32*j)
				if j == 0 {
					p[r] = YMM()
					VMULPS(xm, c, p[r])
				} else {
					VFMADD231PS(xm, c, p[r])
				}
			}
		}
		d := q80Scale(blk)
		for r := range p {
			VFMADD231PS(d, p[r], acc[r][k])
		}
	}

	Label(name + "_loop2")
	CMPQ(nb, U32(2))
	JB(LabelRef(name + "_loop1"))
	prefetchLines(w, 2)
	for k := 0; k < 2; k++ {
		block(Mem{Base: w, Disp: 34 * k}, 128*k, k)
	}
	ADDQ(U32(68), w)
	for r := range xs {
		ADDQ(U32(256), xs[r].Base)
	}
	SUBQ(U32(2), nb)
	JMP(LabelRef(name + "_loop2"))

	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	block(Mem{Base: w}, 0, 0)

	Label(name + "_done")
	storeTokenRows(dst, ldd, acc, hsum)
	VZEROUPPER()
	RET()
}

// dots512 is dot512(t, unroll) for nt token rows, masked tail included.
func dots512(t wtype, unroll, nt int) {
	name := fmt.Sprintf("dots%d%sAVX512", nt, t.name)
	multitokHeader(name, t.goType, fmt.Sprintf("dot%sAVX512(w[:n], x[t*ldx:][:n]), bit for bit.", t.name), nt)
	dst, ldd, wp, xs, n := multitokArgs(nt)
	w := Mem{Base: wp}
	step := 16 * unroll
	nStep, n16 := elementBounds512(n, step)
	acc := zeroGrid(nt, unroll, zeros512)
	elementLoops512(name, "_loop", step, nStep, n16, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			if off := 16 * k * int(t.size); vecs > 1 && off%64 == 0 {
				prefetchLine(w.Idx(i, t.size).Offset(off))
			}
			v := ZMM()
			t.load512(w.Idx(i, t.size).Offset(16*k*int(t.size)), v, nil)
			for r := range acc {
				VFMADD231PS(xs[r].Idx(i, 4).Offset(64*k), v, acc[r][k])
			}
		}
	}, func(i Register, k Op) {
		v := ZMM()
		t.load512(w.Idx(i, t.size), v, k)
		for r := range acc {
			xv := ZMM()
			VMOVUPS_Z(xs[r].Idx(i, 4), k, xv)
			VFMADD231PS(xv, v, acc[r][unroll-1])
		}
	})

	Label(name + "_done")
	storeTokenRows(dst, ldd, acc, hsum512)
	VZEROUPPER()
	RET()
}

// dotsQ80AVX512 is dotQ80AVX512(unroll) for nt token rows: each block's
// codes are widened once and its scale broadcast once.
func dotsQ80AVX512(unroll, nt int) {
	name := fmt.Sprintf("dots%dQ80AVX512", nt)
	multitokHeader(name, "byte", "dotQ80AVX512(w, x[t*ldx:][:n]), bit for bit.", nt)
	dst, ldd, w, xs, nb := multitokArgs(nt)
	SHRQ(U8(5), nb)
	acc := zeroGrid(nt, unroll, zeros512)
	block := func(blk Mem, xoff, k int) {
		c0, c1 := ZMM(), ZMM()
		VPMOVSXBD(blk.Offset(2), c0)
		VPMOVSXBD(blk.Offset(18), c1)
		VCVTDQ2PS(c0, c0)
		VCVTDQ2PS(c1, c1)
		d := q80Scale512(blk)
		for r := range acc {
			p := ZMM()
			VMULPS(xs[r].Offset(xoff), c0, p)
			VFMADD231PS(xs[r].Offset(xoff+64), c1, p)
			VFMADD231PS(d, p, acc[r][k])
		}
	}

	Label(name + "_loop")
	CMPQ(nb, U32(uint32(unroll)))
	JB(LabelRef(name + "_loop1"))
	for off := 0; off < 34*unroll; off += 64 {
		prefetchLine(Mem{Base: w, Disp: off})
	}
	for k := 0; k < unroll; k++ {
		block(Mem{Base: w, Disp: 34 * k}, 128*k, k)
	}
	ADDQ(U32(uint32(34*unroll)), w)
	for r := range xs {
		ADDQ(U32(uint32(128*unroll)), xs[r].Base)
	}
	SUBQ(U32(uint32(unroll)), nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	block(Mem{Base: w}, 0, 0)
	ADDQ(U32(34), w)
	for r := range xs {
		ADDQ(U32(128), xs[r].Base)
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	storeTokenRows(dst, ldd, acc, hsum512)
	VZEROUPPER()
	RET()
}
