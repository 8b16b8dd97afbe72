package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmPacked512 writes the AVX-512 prefill micro-kernels over the same
// packed weight panels as gemmPacked (16 rows, wp[16k+j] = row j's column
// k): gemmP<M>x32AVX512 meets two consecutive panels (32 weight rows) and
// gemmP<M>x16AVX512 one, for M = 1..12 token rows, with their Acc twins.
//
// Each output is the same chain of fused multiply-adds as in gemmP<M>x16AVX2
// (Σ over k in order, from zero, then added to dst in the Acc kernels), only
// 16 rows to a register instead of 8; a lane's arithmetic does not depend on
// the register width, so the results are those of the AVX2 kernels bit for
// bit (TestMatMulPackedSetsBitExact). What changes is the tile: 12 tokens ×
// 32 rows is 24 accumulators, fed per column by two panel loads and twelve
// broadcasts, so the loads (14) stay well below the fused multiply-adds (24)
// and the two FMA pipes of a 512-bit core have work every cycle.
func gemmPacked512() {
	for _, width := range []int{32, 16} {
		for m := 1; m <= 12; m++ {
			gemmP512(m, width, false)
			gemmP512(m, width, true)
		}
	}
}

// gemmP512: dst[t*ldd+j] (+)= Σ_k x[t*ldx+k]·wp[16k+j] for t < m, j < 16
// and, in the 32-row kernels, dst[t*ldd+16+j] (+)= Σ_k x[t*ldx+k]·wp[16kn+16k+j]
// (the next panel), k < kn. The x rows are addressed from one base register
// per three rows (row 3b+r at base_b + r*ldx), so twelve rows take four
// registers; the k loop is unrolled 4 times.
func gemmP512(m, width int, acc bool) {
	name := fmt.Sprintf("gemmP%dx%dAVX512", m, width)
	what := "sets"
	if acc {
		name = fmt.Sprintf("gemmP%dx%dAccAVX512", m, width)
		what = "adds to"
	}
	doc := []string{fmt.Sprintf("%s %s dst[t*ldd+j] Σ_k x[t*ldx+k]*wp[16*k+j] for t < %d, j < 16, k < kn", name, what, m)}
	if width == 32 {
		doc[0] += ","
		doc = append(doc, "and dst[t*ldd+16+j] Σ_k x[t*ldx+k]*wp[16*kn+16*k+j] (the next panel).")
	} else {
		doc[0] += "."
	}
	header(name, "func(dst *float32, ldd int, x *float32, ldx int, wp *float32, kn int)", doc...)
	halves := width / 16

	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	nb := (m + 2) / 3
	base := make([]GPVirtual, nb)
	base[0] = GP64()
	Load(Param("x"), base[0])
	if nb > 1 {
		ldx3 := GP64()
		LEAQ(Mem{Base: ldx, Index: ldx, Scale: 2}, ldx3)
		for b := 1; b < nb; b++ {
			base[b] = GP64()
			LEAQ(Mem{Base: base[b-1], Index: ldx3, Scale: 1}, base[b])
		}
	}
	xm := func(t, u int) Mem {
		mm := Mem{Base: base[t/3], Disp: 4 * u}
		if r := t % 3; r > 0 {
			mm.Index, mm.Scale = ldx, uint8(r)
		}
		return mm
	}

	if acc {
		// The tile of dst is read at the end: have it in L1 by then.
		dst := Load(Param("dst"), GP64())
		ldd := Load(Param("ldd"), GP64())
		SHLQ(U8(2), ldd)
		eachRow(dst, ldd, m, func(int) {
			for off := 0; off < 64*halves; off += 64 {
				PREFETCHT0(Mem{Base: dst, Disp: off})
			}
			PREFETCHT0(Mem{Base: dst, Disp: 64*halves - 1})
		})
	}

	wp := Load(Param("wp"), GP64())
	kn := Load(Param("kn"), GP64())
	var next GPVirtual // byte offset of the second panel
	if halves == 2 {
		next = GP64()
		MOVQ(kn, next)
		SHLQ(U8(6), next)
	}
	c := zeros512(halves * m)
	n := GP64()
	MOVQ(kn, n)
	SHRQ(U8(2), n)
	ANDQ(U8(3), kn)

	step := func(u int) {
		w0 := ZMM()
		VMOVUPS(Mem{Base: wp, Disp: 64 * u}, w0)
		if halves == 1 {
			for t := 0; t < m; t++ {
				VFMADD231PS_BCST(xm(t, u), w0, c[t])
			}
			return
		}
		w1 := ZMM()
		VMOVUPS(Mem{Base: wp, Index: next, Scale: 1, Disp: 64 * u}, w1)
		for t := 0; t < m; t++ {
			b := ZMM()
			VBROADCASTSS(xm(t, u), b)
			VFMADD231PS(w0, b, c[2*t])
			VFMADD231PS(w1, b, c[2*t+1])
		}
	}
	advance := func(cols int) {
		ADDQ(U32(uint32(64*cols)), wp)
		for _, b := range base {
			ADDQ(U32(uint32(4*cols)), b)
		}
	}

	Label(name + "_loop4")
	TESTQ(n, n)
	JZ(LabelRef(name + "_loop1"))
	for u := 0; u < 4; u++ {
		step(u)
	}
	advance(4)
	DECQ(n)
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_loop1")
	TESTQ(kn, kn)
	JZ(LabelRef(name + "_store"))
	step(0)
	advance(1)
	DECQ(kn)
	JMP(LabelRef(name + "_loop1"))

	// All loads of dst before any store (4K aliasing, as in gemmP).
	Label(name + "_store")
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	if acc {
		d := GP64()
		MOVQ(dst, d)
		eachRow(d, ldd, m, func(t int) {
			for h := 0; h < halves; h++ {
				VADDPS(Mem{Base: d, Disp: 64 * h}, c[halves*t+h], c[halves*t+h])
			}
		})
	}
	eachRow(dst, ldd, m, func(t int) {
		for h := 0; h < halves; h++ {
			VMOVUPS(c[halves*t+h], Mem{Base: dst, Disp: 64 * h})
		}
	})
	VZEROUPPER()
	RET()
}
