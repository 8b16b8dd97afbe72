package main

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The legacy block types' dots with Q8_0 or Q8_1 activations
// (simd.DotQ40Q80 …; q8legacy.go in internal/simd defines the arithmetic
// they share bit for bit with their Go twins). Per block the weight codes
// become 32 int8 values in a YMM (qdotCodes, as the float32-activation
// dots of qdots.go build them) and the exact int32 sum of their products
// with the 32 activation codes is formed: on AVX2 by VPSIGNB (the values'
// magnitudes as unsigned bytes, their signs moved onto the activations;
// Q4_1 and Q5_1 are unsigned already), VPMADDUBSW (int16 pairs, at most
// 2·127·127: no saturation) and VPMADDWD by ones; with AVX-512 VNNI by one
// VPDPBUSD on the same YMM operands. The 8 int32 lanes are reduced to one
// and the block finishes in scalar float32 in the twins' order. Q8_0
// weights (q80Kind, kept out of qdots' list: no float32-activation dot)
// load their 32 int8 values straight from the block (q8lCodes); a −128
// value's magnitude is 128 as an unsigned byte, and no VPMADDUBSW pair can
// exceed 2·128·127.

// qdotK are the tables of qdots, which the kernels of this file share (the
// same output file).
var qdotK qdotConsts

// q8lVNNI emits the VNNI instruction op (avo v0.5.0 has no VNNI forms).
func q8lVNNI(op string, src2, src1 Op, acc VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   op,
		Operands: []Op{src2, src1, acc},
		Inputs:   []Op{src2, src1, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI", "AVX512VL"},
	})
}

// q8legacy writes the seven kernels: dot<T>Q80AVX2 (Q4_1, Q5_1: Q81; Q8_0
// weights: dotQ80Q80AVX2), or with vnni the VNNI ones.
func q8legacy(vnni bool) {
	var ones Mem
	if !vnni {
		ones = byteTable("q8lw1", repeated(32, func(j int) byte { return byte(1 - j%2) }))
	}
	for _, q := range append(qdotKinds(qdotK), q80Kind) {
		q8legacyDot(q, vnni, ones)
	}
}

// q80Kind is the Q8_0 weight block: binary16 d, then 32 int8 values.
var q80Kind = qdotKind{name: "Q80", blockBytes: 34, codesAt: 2, qhAt: -1}

// q8lRegs is loadQdotRegs for the Q8 dots (none for Q8_0 weights).
func q8lRegs(q qdotKind) qdotRegs {
	if q.name == q80Kind.name {
		return qdotRegs{}
	}
	return loadQdotRegs(q, qdotK, false)
}

// q8lCodes is qdotCodes for the Q8 dots: Q8_0 weights' values are the
// block's bytes.
func q8lCodes(q qdotKind, r qdotRegs, blk Mem) VecVirtual {
	if q.name == q80Kind.name {
		c := YMM()
		VMOVDQU(blk.Offset(q.codesAt), c)
		return c
	}
	return qdotCodes(q, qdotK, r, blk)
}

func q8legacyDot(q qdotKind, vnni bool, ones Mem) {
	act, qBytes, codesAt := "Q80", 34, 2
	if q.mins {
		act, qBytes, codesAt = "Q81", 36, 4
	}
	name := "dot" + q.name + act + "AVX2"
	if vnni {
		name = "dot" + q.name + act + "VNNI"
	}
	header(name, "func(w []byte, q []byte, nb int) float32",
		name+" returns the dot product of the nb "+q.name+" blocks at w with the",
		"nb "+act+" blocks at q, as simd's twin computes it, bit for bit.")
	w := Load(Param("w").Base(), GP64())
	qp := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	r := q8lRegs(q)
	var one VecVirtual
	if !vnni {
		one = YMM()
		VMOVDQU(ones, one)
	}
	s, ms := XMM(), XMM()
	VXORPS(s, s, s)
	if q.mins {
		VXORPS(ms, ms, ms)
	}

	var acc VecVirtual
	if !q.mins {
		acc = XMM()
		VXORPS(acc, acc, acc)
		q8legacyGroups(name, q, r, one, vnni, w, qp, nb, acc)
	}

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	p := q8legacyBlock(q, r, one, vnni, Mem{Base: w}, Mem{Base: qp, Disp: codesAt})
	sum, t := XMM(), XMM()
	VEXTRACTI128(U8(1), p, sum)
	VPADDD(p.AsX(), sum, sum)
	VPSHUFD(U8(0x4e), sum, t)
	VPADDD(t, sum, sum)
	VPSHUFD(U8(0xb1), sum, t)
	VPADDD(t, sum, sum)
	VCVTDQ2PS(sum, sum)

	dw, da := XMM(), XMM()
	switch {
	case q.mins: // (d, m) times (d, s)
		VMOVD(Mem{Base: w}, dw)
		VCVTPH2PS(dw, dw)
		VMOVD(Mem{Base: qp}, da)
		VCVTPH2PS(da, da)
		VMULPS(da, dw, dw)
		VMULSS(sum, dw, sum)
		VADDSS(sum, s, s)
		VMOVSHDUP(dw, dw)
		VADDSS(dw, ms, ms)
	default:
		if q.e8m0 {
			e := GP32()
			MOVBLZX(Mem{Base: w}, e)
			VMOVSS(Mem{Base: r.e8m0, Index: e.As64(), Scale: 4}, dw)
		} else {
			VPBROADCASTW(Mem{Base: w}, dw)
			VCVTPH2PS(dw, dw)
		}
		VPBROADCASTW(Mem{Base: qp}, da)
		VCVTPH2PS(da, da)
		VMULSS(da, dw, dw)
		VMULSS(sum, dw, sum)
		VADDSS(sum, s, s)
	}
	ADDQ(U32(q.blockBytes), w)
	ADDQ(U32(qBytes), qp)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	if q.mins {
		VADDSS(ms, s, s)
	} else { // ((acc0+acc1) + (acc2+acc3)) + s
		t, u := XMM(), XMM()
		VMOVSHDUP(acc, t)
		VADDPS(t, acc, t)
		VMOVHLPS(t, t, u)
		VADDSS(u, t, t)
		VADDSS(s, t, s)
	}
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// q8legacyBlock returns the 8 int32 lanes whose sum is block blk's exact
// dot with the 32 activation codes at codes.
func q8legacyBlock(q qdotKind, r qdotRegs, one VecVirtual, vnni bool, blk, codes Mem) VecVirtual {
	c := q8lCodes(q, r, blk)
	y := YMM()
	VMOVDQU(codes, y)
	u := c
	if !q.mins {
		u = YMM()
		VPSIGNB(c, c, u) // |v|
		VPSIGNB(c, y, y) // c·sign(v)
	}
	p := YMM()
	if vnni {
		VPXOR(p, p, p)
		q8lVNNI("VPDPBUSD", y, u, p)
	} else {
		VPMADDUBSW(y, u, p)
		VPMADDWD(one, p, p)
	}
	return p
}

// q8legacyGroups emits the loop over groups of 4 Q8_0 blocks of a type
// without mins: block k of a group adds (w·a)·S to lane k of acc (the
// twin's order); it leaves nb%4 blocks to the one-block loop after it.
func q8legacyGroups(name string, q qdotKind, r qdotRegs, one VecVirtual, vnni bool, w, qp, nb Register, acc VecVirtual) {
	Label(name + "_loop4")
	CMPQ(nb, U8(4))
	JB(LabelRef(name + "_loop"))
	var ps [4]VecVirtual
	for k := range ps {
		ps[k] = q8legacyBlock(q, r, one, vnni, Mem{Base: w, Disp: k * q.blockBytes}, Mem{Base: qp, Disp: k*34 + 2})
	}
	VPHADDD(ps[1], ps[0], ps[0]) // per 128-bit lane: p0 p0 p1 p1
	VPHADDD(ps[3], ps[2], ps[2]) // p2 p2 p3 p3
	VPHADDD(ps[2], ps[0], ps[0]) // p0 p1 p2 p3
	sum := XMM()
	VEXTRACTI128(U8(1), ps[0], sum)
	VPADDD(ps[0].AsX(), sum, sum)
	VCVTDQ2PS(sum, sum) // S_k
	h := XMM()
	VPXOR(h, h, h)
	dd := XMM()
	if q.e8m0 {
		for k := 0; k < 4; k++ {
			VPINSRW(U8(k), Mem{Base: qp, Disp: k * 34}, h, h)
		}
		VCVTPH2PS(h, h) // a_k
		e := GP32()
		for k := 0; k < 4; k++ {
			MOVBLZX(Mem{Base: w, Disp: k * q.blockBytes}, e)
			if k == 0 {
				VMOVSS(Mem{Base: r.e8m0, Index: e.As64(), Scale: 4}, dd)
			} else {
				VINSERTPS(U8(k<<4), Mem{Base: r.e8m0, Index: e.As64(), Scale: 4}, dd, dd)
			}
		}
		VMULPS(h, dd, dd)
	} else {
		for k := 0; k < 4; k++ {
			VPINSRW(U8(k), Mem{Base: w, Disp: k * q.blockBytes}, h, h)
			VPINSRW(U8(4+k), Mem{Base: qp, Disp: k * 34}, h, h)
		}
		hy := YMM()
		VCVTPH2PS(h, hy) // w_0..3, a_0..3
		VEXTRACTF128(U8(1), hy, dd)
		VMULPS(dd, hy.AsX(), dd)
	}
	VMULPS(sum, dd, dd)
	VADDPS(dd, acc, acc)
	ADDQ(U32(4*q.blockBytes), w)
	ADDQ(U32(4*34), qp)
	SUBQ(U8(4), nb)
	JMP(LabelRef(name + "_loop4"))
}
