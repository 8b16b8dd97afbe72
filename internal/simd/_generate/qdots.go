package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The packed dot products of the GGML 32-value block types other than
// Q8_0 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, and IQ4_XS's sub-blocks)
// against float32 activations: Σ_b s_b·Σ_j v_bj·x[32b+j] (+ m_b·xs[b] for
// Q4_1 and Q5_1, xs being the activations' 32-value group sums), v_bj the
// block's small integer (int8) values. Each block's 16 code bytes become
// the 32 bytes of a YMM in value order (blockCodes, as the row decoders of
// decode.go build them), turned into the int8 values by a subtraction
// (Q4_0), the fifth bits (Q5_0, Q5_1) or a VPSHUFB table (IQ4_NL, IQ4_XS,
// MXFP4), then widened to float32, multiplied with the activations (one
// rounding a product, partial sums per lane) and added to an accumulator
// times the block's scale with one fused multiply-add. The AVX2 kernels
// widen 8 values a vector (two blocks an iteration, two accumulators), the
// AVX-512 ones 16 (four blocks an iteration, four accumulators).
//
// The AVX-512 kernels skip the int8 values and their conversion. For the
// 4-bit types without a fifth bit (Q4_0, Q4_1, IQ4_NL, IQ4_XS, MXFP4) the
// 16 code bytes of a block, zero-extended to 16 dwords (VPMOVZXBD), index a
// 16-entry float32 table in a ZMM with VPERMPS, which reads only the index's
// low 4 bits, so that the low nibbles need no mask and the high ones one
// shift (Q5_0 and Q5_1: a 32-entry table, see qdotPerm). The table holds
// the same exact integer values as float32, so the
// products and sums are the same as through the int8 path. On the 2-core
// Zen 4 under load (load average 9-10), a 1B-shape Q4_0 decode at 1 thread
// ran at 5.7 and 7.4 tokens/s through the int8 path and 7.0 and 9.3 with
// the lookup (interleaved rounds; docs/performance.md has the comparison
// with the decoded-row path and llama.cpp). AVX2's VPERMPS indexes only 8
// entries, so the AVX2 kernels keep the int8 path.

// qdotKind describes one block type of this file.
type qdotKind struct {
	name       string // Go name part: Q40, Q41, Q50, Q51, IQ4NL, MXFP4
	blockBytes int
	codesAt    int  // offset of the 16 code bytes
	qhAt       int  // offset of Q5's uint32 qh, or -1
	mins       bool // a binary16 m at offset 2, times xs[b]
	table      Mem  // VPSHUFB table of the int8 values, or nil Mem for nibble-based codes
	lut        bool
	e8m0       bool // scale: the E8M0 byte at 0, through qdE8M0Half
	ftab       Mem  // the 16 values as float32 (VPERMPS table), for the 4-bit types
	perm       bool // ftab is set
}

// qdotConsts are the static tables of this file (names prefixed qd, apart
// from decode.go's).
type qdotConsts struct {
	b0f, b08, bf0, b10, shift4, q5bits, q5spread, iq4nl, mxfp4, e8m0 Mem
	// f32 tables of the 16 values of Q4_0, Q4_1, IQ4_NL (and IQ4_XS), MXFP4,
	// and of the 32 of Q5_0 and Q5_1: the AVX-512 kernels' VPERMPS tables,
	// emitted only into that set's file (nil Mem in the AVX2 set).
	fq40, fq41, fiq4, fmx, fq50, fq51 Mem
	// IQ4_XS's scale shifts: 4ib (scales_l) and 2ib (scales_h) at dword ib.
	xsShiftL, xsShiftH Mem
}

// dwordTable emits the static table name of the uint32 values v.
func dwordTable(name string, v ...uint32) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, x := range v {
		DATA(4*i, U32(x))
	}
	return m
}

// floatTable emits the static table name of the float32 values v.
func floatTable(name string, v []int8) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, x := range v {
		DATA(4*i, U32(math.Float32bits(float32(x))))
	}
	return m
}

// newQdotConsts emits the tables of the set's kernels (zmm: AVX-512).
func newQdotConsts(zmm bool) qdotConsts {
	splat := func(name string, v byte) Mem {
		return byteTable(name, repeated(32, func(int) byte { return v }))
	}
	ftable := func(name string, v []int8) Mem { // only the AVX-512 kernels read these
		if !zmm {
			return Mem{}
		}
		return floatTable(name, v)
	}
	iq4 := []int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	mx := []int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
	e8 := GLOBL("qde8m0half", RODATA|NOPTR)
	for e := 0; e < 256; e++ {
		// ggml's ggml_e8m0_to_fp32_half: 2^(e−128), subnormal for e < 2.
		bits := uint32(e-1) << 23
		if e < 2 {
			bits = 0x00200000 << e
		}
		DATA(4*e, U32(bits))
	}
	q40, q41 := make([]int8, 16), make([]int8, 16)
	for i := range q40 {
		q40[i], q41[i] = int8(i-8), int8(i)
	}
	q50, q51 := make([]int8, 32), make([]int8, 32)
	for i := range q50 {
		q50[i], q51[i] = int8(i-16), int8(i)
	}
	return qdotConsts{
		fq40: ftable("qdfq40", q40), fq41: ftable("qdfq41", q41),
		fq50: ftable("qdfq50", q50), fq51: ftable("qdfq51", q51),
		xsShiftL: dwordTable("qdxsshl", 0, 4, 8, 12, 16, 20, 24, 28),
		xsShiftH: dwordTable("qdxsshh", 0, 2, 4, 6, 8, 10, 12, 14),
		fiq4:     ftable("qdfiq4", iq4), fmx: ftable("qdfmx", mx),
		b0f: splat("qdb0f", 0x0f), b08: splat("qdb08", 0x08), bf0: splat("qdbf0", 0xf0), b10: splat("qdb10", 0x10),
		shift4: byteTable("qdshift4", []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,
		}),
		q5bits:   byteTable("qdq5bits", repeated(32, func(j int) byte { return 1 << (j % 8) })),
		q5spread: byteTable("qdq5spread", repeated(32, func(j int) byte { return byte(j / 8) })),
		iq4nl:    byteTable("qdiq4nl", repeated(32, func(j int) byte { return byte(iq4[j%16]) })),
		mxfp4:    byteTable("qdmxfp4", repeated(32, func(j int) byte { return byte(mx[j%16]) })),
		e8m0:     e8,
	}
}

func qdotKinds(k qdotConsts) []qdotKind {
	return []qdotKind{
		{name: "Q40", blockBytes: 18, codesAt: 2, qhAt: -1, ftab: k.fq40, perm: true},
		{name: "Q41", blockBytes: 20, codesAt: 4, qhAt: -1, mins: true, ftab: k.fq41, perm: true},
		{name: "Q50", blockBytes: 22, codesAt: 6, qhAt: 2, ftab: k.fq50, perm: true},
		{name: "Q51", blockBytes: 24, codesAt: 8, qhAt: 4, mins: true, ftab: k.fq51, perm: true},
		{name: "IQ4NL", blockBytes: 18, codesAt: 2, qhAt: -1, table: k.iq4nl, lut: true, ftab: k.fiq4, perm: true},
		{name: "MXFP4", blockBytes: 17, codesAt: 1, qhAt: -1, table: k.mxfp4, lut: true, e8m0: true, ftab: k.fmx, perm: true},
	}
}

// qdotRegs holds the loop-invariant registers of one kernel.
type qdotRegs struct {
	shift4, mask, sel, spread, table VecVirtual
	e8m0                             Register
	ftab                             VecVirtual // ZMM, with zmm and q.perm
	// Q5 with zmm: the table's values 16-31, and 15 and 16 in every dword.
	ftabHi, m15, c16 VecVirtual
}

func loadQdotRegs(q qdotKind, k qdotConsts, zmm bool) qdotRegs {
	var r qdotRegs
	if q.e8m0 {
		r.e8m0 = GP64()
		LEAQ(k.e8m0, r.e8m0)
	}
	if zmm && q.perm {
		r.ftab = ZMM()
		VMOVUPS(q.ftab, r.ftab)
		if q.qhAt >= 0 {
			r.ftabHi = ZMM()
			VMOVUPS(q.ftab.Offset(64), r.ftabHi)
			r.m15, r.c16 = splat32(15), splat32(16)
		}
		return r
	}
	r.shift4, r.mask = YMM(), YMM()
	VMOVDQU(k.shift4, r.shift4)
	VMOVDQU(k.b0f, r.mask)
	if q.qhAt >= 0 {
		r.sel, r.spread = YMM(), YMM()
		VMOVDQU(k.q5bits, r.sel)
		VMOVDQU(k.q5spread, r.spread)
	}
	if q.lut {
		r.table = YMM()
		VMOVDQU(q.table, r.table)
	}
	return r
}

// qdotCodes returns the 32 int8 values of the block at blk in value order
// in a new YMM (unsigned for Q4_1 and Q5_1, below 32).
func qdotCodes(q qdotKind, k qdotConsts, r qdotRegs, blk Mem) VecVirtual {
	c := YMM()
	VBROADCASTI128(blk.Offset(q.codesAt), c)
	VPSRLVQ(r.shift4, c, c)
	VPAND(r.mask, c, c)
	switch {
	case q.lut:
		VPSHUFB(c, r.table, c)
	case q.qhAt >= 0:
		bits := YMM()
		VPBROADCASTD(blk.Offset(q.qhAt), bits)
		VPSHUFB(r.spread, bits, bits)
		VPAND(r.sel, bits, bits)
		VPCMPEQB(r.sel, bits, bits) // 0xff where the fifth bit is set
		if q.mins {
			VPAND(k.b10, bits, bits) // 0x10 where set
		} else {
			VPANDN(k.bf0, bits, bits) // 0xf0 where clear: code−16 as int8
		}
		VPOR(bits, c, c)
	case !q.mins:
		VPSUBB(k.b08, c, c) // Q4_0: code−8
	}
	return c
}

// qdotScale broadcasts block blk's scale into a new YMM (zmm: a ZMM).
func qdotScale(q qdotKind, r qdotRegs, blk Mem, zmm bool) VecVirtual {
	if q.e8m0 {
		e := GP32()
		MOVBLZX(blk, e)
		var s VecVirtual
		if zmm {
			s = ZMM()
		} else {
			s = YMM()
		}
		VBROADCASTSS(Mem{Base: r.e8m0, Index: e.As64(), Scale: 4}, s)
		return s
	}
	if zmm {
		return q80Scale512(blk)
	}
	return q80Scale(blk)
}

// qdotWiden returns Σ_j v_j·x_j of the 32 int8 values of c against the 32
// float32 at xm as 8 (zmm: 16) partial lanes: v_j·x_j rounded, the lanes
// summed in value order.
func qdotWiden(c VecVirtual, xm Mem, zmm bool) VecVirtual {
	hi := XMM()
	VEXTRACTI128(U8(1), c, hi)
	if zmm {
		a, b := ZMM(), ZMM()
		VPMOVSXBD(c.AsX(), a)
		VPMOVSXBD(hi, b)
		VCVTDQ2PS(a, a)
		VCVTDQ2PS(b, b)
		VMULPS(xm, a, a)
		VFMADD231PS(xm.Offset(64), b, a)
		return a
	}
	parts := []VecVirtual{c.AsX().(VecVirtual), XMM(), hi, XMM()}
	VPSRLDQ(U8(8), parts[0], parts[1])
	VPSRLDQ(U8(8), parts[2], parts[3])
	p := YMM()
	for i, part := range parts {
		v := YMM()
		VPMOVSXBD(part, v)
		VCVTDQ2PS(v, v)
		if i == 0 {
			VMULPS(xm, v, p)
		} else {
			VFMADD231PS(xm.Offset(32*i), v, p)
		}
	}
	return p
}

// qdotPerm returns, for a 4-bit type on AVX-512, Σ_j v_j·x_j of the block
// at blk against the 32 float32 at xm as 16 partial lanes: the values
// looked up as float32 (VPERMPS) from the zero-extended code bytes.
//
// Q5_0 and Q5_1 index a 32-entry table (VPERMI2PS, two ZMM): the low
// nibbles masked, and 16 ORed into the lanes whose fifth bit is set, the
// 16 bits of qh for values 0-15 (16-31) loaded as a lane mask.
func qdotPerm(q qdotKind, r qdotRegs, blk, xm Mem) VecVirtual {
	a, h := ZMM(), ZMM()
	VPMOVZXBD(blk.Offset(q.codesAt), a)
	VPSRLD(U8(4), a, h)
	if q.qhAt >= 0 {
		VPANDD(r.m15, a, a)
		for i, v := range []VecVirtual{a, h} {
			k := K()
			KMOVW(blk.Offset(q.qhAt+2*i), k)
			VPORD(r.c16, v, k, v)
			VPERMI2PS(r.ftabHi, r.ftab, v)
		}
	} else {
		VPERMPS(r.ftab, a, a) // the low 4 bits index: the low nibble
		VPERMPS(r.ftab, h, h)
	}
	VMULPS(xm, a, a)
	VFMADD231PS(xm.Offset(64), h, a)
	return a
}

// qdotBlock returns a block's Σ_j v_j·x_j as partial lanes, by table
// lookup (qdotPerm) where the kernel has one, else through the int8
// values (qdotCodes, qdotWiden).
func qdotBlock(q qdotKind, k qdotConsts, r qdotRegs, blk, xm Mem, zmm bool) VecVirtual {
	if zmm && q.perm {
		return qdotPerm(q, r, blk, xm)
	}
	return qdotWiden(qdotCodes(q, k, r, blk), xm, zmm)
}

// qdot writes dot<name>AVX2 (AVX512 with zmm).
func qdot(q qdotKind, k qdotConsts, zmm bool) {
	set, per := "AVX2", 2
	if zmm {
		set, per = "AVX512", 4
	}
	name := "dot" + q.name + set
	sig := "func(w []byte, x []float32) float32"
	doc := []string{name + " returns Σ_b s_b·Σ_j v_bj·x[32b+j] over the len(x)/32 " + q.name,
		"blocks at w (see Dot" + q.name + "). len(w) must be at least len(x)/32 blocks."}
	if q.mins {
		sig = "func(w []byte, x []float32, xs []float32) float32"
		doc = []string{name + " returns Σ_b (d_b·Σ_j code_bj·x[32b+j] + m_b·xs[b]) over the",
			"len(x)/32 " + q.name + " blocks at w (see Dot" + q.name + "). len(w) must be at",
			"least len(x)/32 blocks and len(xs) at least len(x)/32."}
	}
	header(name, sig, doc...)
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	var xs Register
	if q.mins {
		xs = Load(Param("xs").Base(), GP64())
	}
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(5), nb)
	r := loadQdotRegs(q, k, zmm)
	var acc []VecVirtual
	if zmm {
		acc = zeros512(per)
	} else {
		acc = zeros(per)
	}
	// One offset sum per unrolled block, so that their scalar fused
	// multiply-adds do not wait on each other.
	var macc []VecVirtual
	if q.mins {
		macc = make([]VecVirtual, per)
		for i := range macc {
			macc[i] = XMM()
			VXORPS(macc[i], macc[i], macc[i])
		}
	}
	body := func(b int) {
		blk := Mem{Base: w, Disp: q.blockBytes * b}
		p := qdotBlock(q, k, r, blk, Mem{Base: x, Disp: 128 * b}, zmm)
		VFMADD231PS(qdotScale(q, r, blk, zmm), p, acc[b])
		if q.mins {
			m := q80Scale(blk.Offset(2))
			VFMADD231SS(Mem{Base: xs, Disp: 4 * b}, m.AsX(), macc[b])
		}
	}
	step := func(n int) {
		ADDQ(U32(uint32(q.blockBytes*n)), w)
		ADDQ(U32(uint32(128*n)), x)
		if q.mins {
			ADDQ(U32(uint32(4*n)), xs)
		}
	}

	Label(name + "_loopN")
	CMPQ(nb, U32(uint32(per)))
	JB(LabelRef(name + "_loop1"))
	for off := 0; off < q.blockBytes*per; off += 64 {
		prefetchLine(Mem{Base: w, Disp: off})
	}
	for b := 0; b < per; b++ {
		body(b)
	}
	step(per)
	SUBQ(U32(uint32(per)), nb)
	JMP(LabelRef(name + "_loopN"))

	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	body(0)
	step(1)
	DECQ(nb)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	var s VecVirtual
	if zmm {
		s = hsum512(addTree(acc))
	} else {
		s = hsum(addTree(acc))
	}
	if q.mins {
		for len(macc) > 1 {
			h := len(macc) / 2
			for i := 0; i < h; i++ {
				VADDSS(macc[h+i], macc[i], macc[i])
			}
			macc = macc[:h]
		}
		VADDSS(macc[0], s, s)
	}
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// qdotIQ4XS writes dotIQ4XSAVX2 (AVX512 with zmm): the iq4_xs super-blocks
// of 256 values (136 bytes: binary16 d, uint16 scales_h, 4 bytes scales_l,
// then 8 sub-blocks of 16 code bytes). Each super-block's 8 sub-block
// scales d·(ls−32), ls = (scales_l[ib/2] >> 4(ib%2))&15 | ((scales_h >>
// 2ib)&3)<<4, are unpacked in one YMM (variable shifts of the broadcast
// bytes), converted, multiplied by d (one rounding, as ggml's) and stored
// to the scratch sc, from which each sub-block broadcasts its own.
func qdotIQ4XS(k qdotConsts, zmm bool) {
	set := "AVX2"
	if zmm {
		set = "AVX512"
	}
	name := "dotIQ4XS" + set
	header(name, "func(w []byte, x []float32, sc []float32) float32",
		name+" returns Σ_b Σ_ib d_b·(ls_b,ib−32)·Σ_j T[code]·x[256b+32ib+j] over the",
		"len(x)/256 iq4_xs super-blocks at w (136 bytes each; sub-block ib's 16",
		"code bytes at 8+16ib), T being kvalues_iq4nl. len(w) must hold len(x)/256",
		"super-blocks; sc is a scratch of at least 8 float32 values.")
	q := qdotKind{name: "IQ4XS", codesAt: 0, qhAt: -1, table: k.iq4nl, lut: true, ftab: k.fiq4, perm: true}
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	r := loadQdotRegs(q, k, zmm)
	shl, shh, m15, m3, c32 := YMM(), YMM(), YMM(), YMM(), YMM()
	VMOVDQU(k.xsShiftL, shl)
	VMOVDQU(k.xsShiftH, shh)
	VMOVDQU(kquantConst("qdxs15", 15), m15)
	VMOVDQU(kquantConst("qdxs3", 3), m3)
	VMOVDQU(kquantConst("qdxs32", 32), c32)
	var acc []VecVirtual
	if zmm {
		acc = zeros512(4)
	} else {
		acc = zeros(2)
	}
	kquantLoop(name, w, nb, 3)
	lo, hi := YMM(), YMM()
	VPBROADCASTD(Mem{Base: w, Disp: 4}, lo) // scales_l
	VPSRLVD(shl, lo, lo)
	VPAND(m15, lo, lo)
	VPBROADCASTD(Mem{Base: w, Disp: 2}, hi) // scales_h in the low 16 bits
	VPSRLVD(shh, hi, hi)
	VPAND(m3, hi, hi)
	VPSLLD(U8(4), hi, hi)
	VPOR(hi, lo, lo)
	VPSUBD(c32, lo, lo)
	VCVTDQ2PS(lo, lo)
	VMULPS(halfBroadcast(Mem{Base: w}), lo, lo)
	VMOVUPS(lo, Mem{Base: s})
	for ib := 0; ib < 8; ib++ {
		p := qdotBlock(q, k, r, Mem{Base: w, Disp: 8 + 16*ib}, Mem{Base: x, Disp: 128 * ib}, zmm)
		var f VecVirtual
		if zmm {
			f = ZMM()
		} else {
			f = YMM()
		}
		VBROADCASTSS(Mem{Base: s, Disp: 4 * ib}, f)
		VFMADD231PS(f, p, acc[ib%len(acc)])
	}
	kquantNext(name, w, x, nil, nb, 136)
	var sum VecVirtual
	if zmm {
		sum = hsum512(addTree(acc))
	} else {
		sum = hsum(addTree(acc))
	}
	Store(sum, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// qdots writes this file's kernels of one set (zmm: AVX-512).
func qdots(zmm bool) {
	k := newQdotConsts(zmm)
	qdotK = k // q8legacy's kernels share the tables
	for _, q := range qdotKinds(k) {
		qdot(q, k, zmm)
	}
	qdotIQ4XS(k, zmm)
}
