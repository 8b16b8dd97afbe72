package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The KV-cache decoders of the formats attention reads row by row (GGML
// Q8_0, Q4_0 and Q4_1 blocks, OCP E4M3 and E5M2 8-bit floats) on 512-bit
// registers: 16 values a vector, a block's 32 values in two. Each value is
// the same exact conversion and the same rounded multiply (and, for Q4_1,
// add) as the AVX2 kernel and the Go twin, with the decoded value as the
// first source operand, so all three agree bit for bit, NaNs included.
// The 8-bit float decoders take every value, the tail of fewer than 16
// through masked loads and stores; the block decoders take whole blocks, as
// their AVX2 kernels do.

// splat32 returns a new ZMM with c in every 32-bit lane.
func splat32(c uint32) VecVirtual {
	r := GP32()
	MOVL(U32(c), r)
	v := ZMM()
	VPBROADCASTD(r, v)
	return v
}

// splat16 returns a new ZMM with c in every 16-bit lane.
func splat16(c uint16) VecVirtual {
	r := GP32()
	MOVL(U32(uint32(c)), r)
	v := ZMM()
	VPBROADCASTW(r, v)
	return v
}

// q80ToF32AVX512: dst = d*code over whole Q8_0 blocks, two blocks an
// iteration while two remain.
func q80ToF32AVX512() {
	name := "q80ToF32AVX512"
	d, src, nb := blockDecoder(name,
		name+" sets dst[32b+i] = d_b*code_b,i for the len(dst)/32 Q8_0 blocks at",
		"src (34 bytes each: binary16 d, then 32 int8 codes).",
		"len(src) must be at least len(dst)/32*34.")
	blockLoops(name, 2, 34, nb, src, d, func(blk, dst Mem) {
		scale := q80Scale512(blk)
		for h := 0; h < 2; h++ {
			c := ZMM()
			VPMOVSXBD(blk.Offset(2+16*h), c)
			VCVTDQ2PS(c, c)
			VMULPS(scale, c, c)
			VMOVUPS(c, dst.Offset(64*h))
		}
	})
}

// q4ToF32AVX512 writes the Q4_0 (q41 false) or Q4_1 decoder: a block's 16
// code bytes, zero-extended to 16 int32 lanes once, give values 0..15 (low
// nibbles) and 16..31 (high nibbles).
func q4ToF32AVX512(q41 bool) {
	name, blockBytes, codes, doc := q4Layout(q41, "AVX512")
	d, src, nb := blockDecoder(name, doc...)
	mask := splat32(15)
	var eight VecVirtual
	if !q41 {
		eight = splat32(8)
	}
	blockLoops(name, 2, blockBytes, nb, src, d, func(blk, dst Mem) {
		scale := q80Scale512(blk)
		var m VecVirtual
		if q41 {
			m = q80Scale512(blk.Offset(2))
		}
		x := ZMM()
		VPMOVZXBD(blk.Offset(codes), x)
		lo, hi := ZMM(), ZMM()
		VPANDD(mask, x, lo)
		VPSRLD(U8(4), x, hi)
		for h, v := range []VecVirtual{lo, hi} {
			if !q41 {
				VPSUBD(eight, v, v)
			}
			VCVTDQ2PS(v, v)
			VMULPS(scale, v, v)
			if q41 {
				VADDPS(m, v, v)
			}
			VMOVUPS(v, dst.Offset(64*h))
		}
	})
}

// fp8Loops emits the loop structure of the 8-bit float decoders: 16 values
// an iteration, then a tail of fewer than 16 under a mask. halves(c, k)
// turns the 16 codes at c (loaded under k when k is not nil) into a YMM of
// binary16 halves.
func fp8Loops(name string, scale VecVirtual, halves func(c Mem, k Op) VecVirtual) {
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	src := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	n16 := GP64()
	MOVQ(n, n16)
	ANDQ(I32(-16), n16)
	i := GP64()
	XORQ(i, i)
	convert := func(h VecVirtual, k Op, i Register) {
		f := ZMM()
		VCVTPH2PS(h, f)
		VMULPS(scale, f, f)
		if k != nil {
			VMOVUPS(f, k, d.Idx(i, 4))
		} else {
			VMOVUPS(f, d.Idx(i, 4))
		}
	}

	Label(name + "_loop16")
	CMPQ(i, n16)
	JAE(LabelRef(name + "_tail"))
	convert(halves(src.Idx(i, 1), nil), nil, i)
	ADDQ(U8(16), i)
	JMP(LabelRef(name + "_loop16"))

	Label(name + "_tail")
	SUBQ(i, n)
	JZ(LabelRef(name + "_done"))
	k := K()
	tailMask(n, k)
	convert(halves(src.Idx(i, 1), k), k, i)

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// fp8Codes loads the 16 codes at c (under k when not nil; masked-off bytes
// are neither read nor faulted on, and become zero) as 16 words of a YMM.
func fp8Codes(c Mem, k Op) VecVirtual {
	w := YMM()
	if k == nil {
		VPMOVZXBW(c, w)
		return w
	}
	b := XMM()
	VMOVDQU8_Z(c, k, b)
	VPMOVZXBW(b, w)
	return w
}

// e5m2ToF32AVX512: an E5M2 code is the top byte of the binary16 with the
// same value (see e5m2ToF32).
func e5m2ToF32AVX512() {
	name := "e5m2ToF32AVX512"
	header(name, "func(dst []float32, src []byte, scale float32)",
		name+" sets dst[i] = value(src[i])*scale for i < len(dst), where value",
		"is the OCP E5M2 code as float32 (the binary16 with bits src[i]<<8).",
		"len(src) must be at least len(dst).")
	scale := broadcastParamTo("scale", ZMM())
	fp8Loops(name, scale, func(c Mem, k Op) VecVirtual {
		w := fp8Codes(c, k)
		VPSLLW(U8(8), w, w)
		return w
	})
}

// e4m3ToF32AVX512 builds the halves of e4m3ToF32 per word: L = c&0x7f,
// 0xfc for the NaN codes (L == 0x7f), and the sign; the half is L<<7 with
// the sign in bit 15, and 256*scale rescales it.
func e4m3ToF32AVX512() {
	name := "e4m3ToF32AVX512"
	header(name, "func(dst []float32, src []byte, scale256 float32)",
		name+" sets dst[i] = value(src[i])*scale for i < len(dst), where value",
		"is the OCP E4M3FN code as float32 (a NaN with the code's sign for 0x7f",
		"and 0xff), and scale256 = 256*scale exactly. len(src) must be at least",
		"len(dst).")
	scale := broadcastParamTo("scale256", ZMM())
	w7f, wfc, w80 := splat16(0x7f), splat16(0xfc), splat16(0x80)
	fp8Loops(name, scale, func(c Mem, k Op) VecVirtual {
		w := fp8Codes(c, k)
		l, s := YMM(), YMM()
		VPANDD(w7f.AsY(), w, l)
		nan := K()
		VPCMPEQW(w7f.AsY(), l, nan)
		VMOVDQU16(wfc.AsY(), nan, l)
		VPANDD(w80.AsY(), w, s)
		VPSLLW(U8(8), s, s)
		VPSLLW(U8(7), l, l)
		VPORD(s, l, l)
		return l
	})
}

// groupLoop512 emits the loop of a grouped AVX-512 unpacker over the ng
// groups whose scale and bias are at sp and bp: start() prepares a
// group's conversion, then body() runs count times (a register, per group),
// each moving its pointers on; the loop ends the kernel.
func groupLoop512(name string, ng, sp, bp, count Register, start, body func()) {
	TESTQ(ng, ng)
	JZ(LabelRef(name + "_done"))
	Label(name + "_group")
	start()
	n := GP64()
	MOVQ(count, n)
	Label(name + "_step")
	body()
	DECQ(n)
	JNZ(LabelRef(name + "_step"))
	nextGroupLoop(sp, bp, ng, name+"_group")

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// unpackU4Groups512 writes u4ToF32GroupsAVX512: as u4ToF32GroupsAVX2, a
// block of 32 codes in two vectors (values 0..15 from the low nibbles,
// 16..31 from the high ones), each group's scale and bias broadcast once.
func unpackU4Groups512() {
	name := "u4ToF32GroupsAVX512"
	d, src, blocks, ng, sp, bp := u4GroupsStart(name)
	mask := splat32(15)
	var scale, bias VecVirtual
	groupLoop512(name, ng, sp, bp, blocks, func() {
		scale, bias = ZMM(), ZMM()
		VBROADCASTSS(Mem{Base: sp}, scale)
		VBROADCASTSS(Mem{Base: bp}, bias)
	}, func() {
		x := ZMM()
		VPMOVZXBD(Mem{Base: src}, x)
		lo, hi := ZMM(), ZMM()
		VPANDD(mask, x, lo)
		VPSRLD(U8(4), x, hi)
		for h, v := range []VecVirtual{lo, hi} {
			VCVTDQ2PS(v, v)
			VMULPS(scale, v, v)
			VADDPS(bias, v, v)
			VMOVUPS(v, Mem{Base: d, Disp: 64 * h})
		}
		ADDQ(U8(16), src)
		ADDQ(U32(128), d)
	})
}

// u2Tables512 emits the static tables of the 2-bit lookups: the per-lane
// right shifts 2j that bring code j of 16 codes broadcast from 4 bytes to
// the bottom of lane j, and the codes 0 to 3 as float32, four times
// (VPERMPS on ZMM reads index bits 0-3; bits 2-3 are the next code's, which
// the repetition makes irrelevant).
func u2Tables512() (shifts, codes Mem) {
	shifts = GLOBL("u2shifts16", RODATA|NOPTR)
	for j := 0; j < 16; j++ {
		DATA(4*j, U32(uint32(2*j)))
	}
	codes = GLOBL("u2codes16", RODATA|NOPTR)
	for j := 0; j < 16; j++ {
		DATA(4*j, U32(math.Float32bits(float32(j%4))))
	}
	return shifts, codes
}

// u2Table returns a new ZMM holding code*scale + bias (rounding the
// product, then the sum, as the twins do) for the codes of codes, scale and
// bias being broadcast from memory.
func u2Table(codes VecVirtual, scale, bias Mem) VecVirtual {
	t, b := ZMM(), ZMM()
	VBROADCASTSS(scale, t)
	VMULPS(codes, t, t)
	VBROADCASTSS(bias, b)
	VADDPS(b, t, t)
	return t
}

// u2Lookup loads the 16 codes of the 4 bytes at m (from x instead when m
// is nil: the bytes in its low dword) and converts them through table.
func u2Lookup(m Op, sh, table VecVirtual) VecVirtual {
	v := ZMM()
	VPBROADCASTD(m, v)
	VPSRLVD(sh, v, v)
	VPERMPS(table, v, v)
	return v
}

// unpackU2512 writes u2ToF32AVX512: dst[i] = code_i*scale + bias for every
// i < len(dst) (a multiple of 4), 16 values a vector by table lookup, the
// tail of fewer than 16 through masked loads and stores.
func unpackU2512(shifts, codes Mem) {
	name := "u2ToF32AVX512"
	header(name, "func(dst []float32, src []byte, scale, bias float32)",
		name+" sets dst[i] = code_i*scale + bias, rounding the product, then the",
		"sum, with code_i = src[i/4]>>(2*(i%4))&3, for i < len(dst). len(dst) must be",
		"a multiple of 4 and len(src) at least len(dst)/4.")
	pscale, err := Param("scale").Resolve()
	if err != nil {
		panic(err)
	}
	pbias, err := Param("bias").Resolve()
	if err != nil {
		panic(err)
	}
	sh, cv := ZMM(), ZMM()
	VMOVDQU32(shifts, sh)
	VMOVUPS(codes, cv)
	table := u2Table(cv, pscale.Addr, pbias.Addr)
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	src := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	n16 := GP64()
	MOVQ(n, n16)
	ANDQ(I32(-16), n16)
	i, b := GP64(), GP64() // value and byte index
	XORQ(i, i)
	XORQ(b, b)

	Label(name + "_loop16")
	CMPQ(i, n16)
	JAE(LabelRef(name + "_tail"))
	VMOVUPS(u2Lookup(src.Idx(b, 1), sh, table), d.Idx(i, 4))
	ADDQ(U8(16), i)
	ADDQ(U8(4), b)
	JMP(LabelRef(name + "_loop16"))

	Label(name + "_tail")
	SUBQ(i, n)
	JZ(LabelRef(name + "_done"))
	k, kb := K(), K()
	tailMask(n, k)
	SHRQ(U8(2), n) // bytes left
	tailMask(n, kb)
	x := XMM()
	VMOVDQU8_Z(src.Idx(b, 1), kb, x)
	VMOVUPS(u2Lookup(x, sh, table), k, d.Idx(i, 4))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// unpackU2Groups512 writes u2ToF32GroupsAVX512 for groups of whole
// vectors of 16 codes: each group's table is computed once.
func unpackU2Groups512(shifts, codes Mem) {
	name := "u2ToF32GroupsAVX512"
	header(name, "func(dst []float32, src []byte, group int, scale, bias []float32)",
		name+" sets dst[i] = code_i*scale[i/group] + bias[i/group],",
		"rounding the product, then the sum, with code_i = src[i/4]>>(2*(i%4))&3,",
		"for the len(scale) groups of group values. group must be a positive multiple",
		"of 16; len(dst) must be at least len(scale)*group, len(bias) at least",
		"len(scale) and len(src) at least len(scale)*group/4.")
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	vecs := Load(Param("group"), GP64())
	SHRQ(U8(4), vecs) // vectors of 16 codes per group
	ng := Load(Param("scale").Len(), GP64())
	sp := Load(Param("scale").Base(), GP64())
	bp := Load(Param("bias").Base(), GP64())
	sh, cv := ZMM(), ZMM()
	VMOVDQU32(shifts, sh)
	VMOVUPS(codes, cv)
	var table VecVirtual
	groupLoop512(name, ng, sp, bp, vecs, func() {
		table = u2Table(cv, Mem{Base: sp}, Mem{Base: bp})
	}, func() {
		VMOVUPS(u2Lookup(Mem{Base: src}, sh, table), Mem{Base: d})
		ADDQ(U8(4), src)
		ADDQ(U8(64), d)
	})
}

// decoders512 writes the AVX-512 KV-cache decoders.
func decoders512() {
	q80ToF32AVX512()
	q4ToF32AVX512(false)
	q4ToF32AVX512(true)
	e5m2ToF32AVX512()
	e4m3ToF32AVX512()
	unpackU4Groups512()
	shifts, codes := u2Tables512()
	unpackU2512(shifts, codes)
	unpackU2Groups512(shifts, codes)
}
