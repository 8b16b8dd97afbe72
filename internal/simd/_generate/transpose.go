package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// transpose8: dst[c*ldd+r] = src[r*lds+c] for r < rows8, c < cols8, both
// multiples of 8, in 8×8 tiles: eight row loads, VUNPCKLPS/VUNPCKHPS of row
// pairs, VSHUFPS of those pairs, and VPERM2F128 to join the 128-bit
// halves, then eight column stores. Data movement only: the result is the
// Go twin's bit for bit.
func transpose8() { transpose8Of(f32Elems) }

// transposeElems is what transpose8Of reads: float32, or binary16 or
// bfloat16 widened to float32 on the way (exactly: every 16-bit value is a
// float32), so that the packed prefill's panels are filled straight from
// the weight rows.
type transposeElems int

const (
	f32Elems transposeElems = iota
	f16Elems
	bf16Elems
)

// transpose8Of writes transpose8F32AVX2, transpose8F16AVX2 or
// transpose8BF16AVX2.
func transpose8Of(e transposeElems) {
	name, typ, elem := "transpose8F32AVX2", "*float32", 4
	switch e {
	case f16Elems:
		name, typ, elem = "transpose8F16AVX2", "*uint16", 2
	case bf16Elems:
		name, typ, elem = "transpose8BF16AVX2", "*uint16", 2
	}
	what := "src[r*lds+c]"
	if e != f32Elems {
		what = "the float32 value of src[r*lds+c]"
	}
	header(name, "func(dst *float32, ldd int, src "+typ+", lds int, rows8 int, cols8 int)",
		name+" sets dst[c*ldd+r] = "+what+" for r < rows8, c < cols8, both",
		"multiples of 8.")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd) // bytes
	lds := Load(Param("lds"), GP64())
	if elem == 4 {
		SHLQ(U8(2), lds)
	} else {
		SHLQ(U8(1), lds)
	}
	rows := Load(Param("rows8"), GP64())
	cols := Load(Param("cols8"), GP64())
	lds3, ldd3 := GP64(), GP64()
	LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, lds3)
	LEAQ(Mem{Base: ldd, Index: ldd, Scale: 2}, ldd3)

	r := GP64()
	XORQ(r, r)
	Label(name + "_rows")
	CMPQ(r, rows)
	JAE(LabelRef(name + "_done"))
	sp, dp := GP64(), GP64()
	// sp = src + r*lds bytes, dp = dst + r*4 bytes
	MOVQ(r, sp)
	IMULQ(lds, sp)
	ADDQ(src, sp)
	LEAQ(Mem{Base: dst, Index: r, Scale: 4}, dp)
	c := GP64()
	XORQ(c, c)
	Label(name + "_cols")
	CMPQ(c, cols)
	JAE(LabelRef(name + "_next"))
	sp4, dp4 := GP64(), GP64()
	LEAQ(Mem{Base: sp, Index: lds, Scale: 4}, sp4)
	LEAQ(Mem{Base: dp, Index: ldd, Scale: 4}, dp4)
	at := func(base, ld, ld3 Register, k int) Mem {
		b := base
		switch k {
		case 0:
			return Mem{Base: b}
		case 1:
			return Mem{Base: b, Index: ld, Scale: 1}
		case 2:
			return Mem{Base: b, Index: ld, Scale: 2}
		default:
			return Mem{Base: b, Index: ld3, Scale: 1}
		}
	}
	row := func(k int) Mem {
		if k < 4 {
			return at(sp, lds, lds3, k)
		}
		return at(sp4, lds, lds3, k-4)
	}
	col := func(k int) Mem {
		if k < 4 {
			return at(dp, ldd, ldd3, k)
		}
		return at(dp4, ldd, ldd3, k-4)
	}
	// t[2i] = unpcklps(row 2i, row 2i+1), t[2i+1] = unpckhps(...)
	t := make([]VecVirtual, 8)
	for i := 0; i < 4; i++ {
		a, b := YMM(), YMM()
		for k, v := range []VecVirtual{a, b} {
			switch e {
			case f32Elems:
				VMOVUPS(row(2*i+k), v)
			case f16Elems:
				VCVTPH2PS(row(2*i+k), v)
			case bf16Elems:
				VPMOVZXWD(row(2*i+k), v)
				VPSLLD(U8(16), v, v)
			}
		}
		t[2*i], t[2*i+1] = YMM(), YMM()
		VUNPCKLPS(b, a, t[2*i])   // a0 b0 a1 b1 | a4 b4 a5 b5
		VUNPCKHPS(b, a, t[2*i+1]) // a2 b2 a3 b3 | a6 b6 a7 b7
	}
	// s[4h+j] holds column j (and j+4 in the upper half) of rows 4h..4h+3.
	s := make([]VecVirtual, 8)
	for h := 0; h < 2; h++ {
		lo01, hi01, lo23, hi23 := t[4*h], t[4*h+1], t[4*h+2], t[4*h+3]
		for j, p := range []struct {
			x, y VecVirtual
			imm  uint8
		}{{lo01, lo23, 0x44}, {lo01, lo23, 0xEE}, {hi01, hi23, 0x44}, {hi01, hi23, 0xEE}} {
			s[4*h+j] = YMM()
			VSHUFPS(U8(p.imm), p.y, p.x, s[4*h+j])
		}
	}
	for j := 0; j < 4; j++ {
		lo, hi := YMM(), YMM()
		VPERM2F128(U8(0x20), s[4+j], s[j], lo) // column j: rows 0-3, rows 4-7
		VPERM2F128(U8(0x31), s[4+j], s[j], hi) // column j+4
		VMOVUPS(lo, col(j))
		VMOVUPS(hi, col(j+4))
	}
	ADDQ(U32(uint32(8*elem)), sp)
	LEAQ(Mem{Base: dp4, Index: ldd, Scale: 4}, dp)
	ADDQ(U32(8), c)
	JMP(LabelRef(name + "_cols"))

	Label(name + "_next")
	ADDQ(U32(8), r)
	JMP(LabelRef(name + "_rows"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
