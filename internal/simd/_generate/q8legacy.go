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
// and the block finishes in scalar float32 in the twins' order.

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

// q8legacy writes the six kernels: dot<T>Q80AVX2 (Q4_1, Q5_1: Q81), or with
// vnni the VNNI ones.
func q8legacy(vnni bool) {
	var ones Mem
	if !vnni {
		ones = byteTable("q8lw1", repeated(32, func(j int) byte { return byte(1 - j%2) }))
	}
	for _, q := range qdotKinds(qdotK) {
		q8legacyDot(q, vnni, ones)
	}
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
	r := loadQdotRegs(q, qdotK, false)
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

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	c := qdotCodes(q, qdotK, r, Mem{Base: w})
	y := YMM()
	VMOVDQU(Mem{Base: qp, Disp: codesAt}, y)
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
	}
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
