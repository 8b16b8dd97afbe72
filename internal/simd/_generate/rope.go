package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ropeNeoX rotates the pairs (v[i], v[i+half]) of one head vector by the
// angles whose cosines and sines are c[i] and s[i] (half = len(c)), for
// i < half&^7:
//
//	v[i], v[i+half] = a·c − b·s, a·s + b·c
//
// with each product rounded before the sum (VMULPS, then VSUBPS/VADDPS; no
// fused multiply-add), as the Go twin computes it, bit for bit.
func ropeNeoX() {
	name := "ropeNeoXAVX2"
	header(name, "func(v, c, s []float32)",
		name+" rotates (v[i], v[i+len(c)]) by (c[i], s[i]) for i < len(c)&^7:",
		"v[i] = c·a − s·b and v[i+len(c)] = s·a + c·b, each product rounded.")
	v := Mem{Base: Load(Param("v").Base(), GP64())}
	c := Mem{Base: Load(Param("c").Base(), GP64())}
	s := Mem{Base: Load(Param("s").Base(), GP64())}
	half := Load(Param("c").Len(), GP64())
	vb := GP64()
	LEAQ(v.Idx(half, 4), vb) // v + half floats: the second halves
	w := Mem{Base: vb}
	n := GP64()
	MOVQ(half, n)
	ANDQ(I32(-8), n)
	i := GP64()
	XORQ(i, i)

	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	a, b, cc, ss := YMM(), YMM(), YMM(), YMM()
	VMOVUPS(v.Idx(i, 4), a)
	VMOVUPS(w.Idx(i, 4), b)
	VMOVUPS(c.Idx(i, 4), cc)
	VMOVUPS(s.Idx(i, 4), ss)
	ac, bs, as, bc := YMM(), YMM(), YMM(), YMM()
	VMULPS(cc, a, ac)
	VMULPS(ss, b, bs)
	VMULPS(ss, a, as)
	VMULPS(cc, b, bc)
	VSUBPS(bs, ac, ac) // ac − bs
	VADDPS(bc, as, as)
	VMOVUPS(ac, v.Idx(i, 4))
	VMOVUPS(as, w.Idx(i, 4))
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// ropePairs rotates the adjacent pairs (v[2i], v[2i+1]) by (c[i], s[i]) for
// i < len(c)&^3 (llama.cpp's "normal" RoPE layout): four pairs per
// iteration, cosines and sines duplicated to both lanes of a pair, and
// VADDSUBPS giving c·a − s·b in even lanes and c·b + s·a in odd lanes, each
// product rounded before the sum, as the Go twin computes it.
func ropePairs() {
	name := "ropePairsAVX2"
	header(name, "func(v, c, s []float32)",
		name+" rotates (v[2i], v[2i+1]) by (c[i], s[i]) for i < len(c)&^3:",
		"v[2i] = c·a − s·b and v[2i+1] = c·b + s·a, each product rounded.")
	v := Mem{Base: Load(Param("v").Base(), GP64())}
	c := Mem{Base: Load(Param("c").Base(), GP64())}
	s := Mem{Base: Load(Param("s").Base(), GP64())}
	n := Load(Param("c").Len(), GP64())
	ANDQ(I32(-4), n)
	i := GP64()
	XORQ(i, i)

	dup := func(m Mem) VecVirtual {
		x := XMM()
		VMOVUPS(m.Idx(i, 4), x)
		lo, hi := XMM(), XMM()
		VUNPCKLPS(x, x, lo) // c0 c0 c1 c1
		VUNPCKHPS(x, x, hi) // c2 c2 c3 c3
		y := YMM()
		VINSERTF128(U8(1), hi, lo.AsY(), y)
		return y
	}

	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	x := YMM()
	VMOVUPS(v.Idx(i, 8), x) // a0 b0 a1 b1 a2 b2 a3 b3
	cd, sd := dup(c), dup(s)
	sw := YMM()
	VPERMILPS(U8(0xb1), x, sw) // b0 a0 b1 a1 ...
	VMULPS(cd, x, x)           // c·a, c·b
	VMULPS(sd, sw, sw)         // s·b, s·a
	VADDSUBPS(sw, x, x)        // even: c·a − s·b; odd: c·b + s·a
	VMOVUPS(x, v.Idx(i, 8))
	ADDQ(U32(4), i)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
