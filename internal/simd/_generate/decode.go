package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact decoders of KV-cache formats: OCP 8-bit floats (E5M2, E4M3FN)
// times a scale, and GGML Q5_0, Q5_1 and IQ4_NL blocks. Each value is an
// exact conversion followed by the same rounded VMULPS as the Go twin (for
// Q5_1 a fused multiply-add whose product is exact, see storeBlock), so the
// two agree bit for bit. Every multiply has the decoded value as its first
// source operand, so that a NaN value comes out unchanged whatever the
// scale (x86 returns the first NaN operand).
//
// These kernels run on rows of about 128 values, one call per KV row, so
// their constants are read from memory (a load, where building one in a
// register costs a chain of moves and a broadcast on every call), and the
// loops are unrolled where that measured faster on Zen 4.
//
// Things that measured slower on Zen 4 and were dropped: building the
// float32 bits of an 8-bit float with integer shifts and rescaling them
// with one multiply (subnormal codes become subnormal float32 operands,
// which the multiplier handles 3-4x slower); decoding block codes into
// float32 with "magic number" fused multiply-adds (a few percent faster
// for IQ4_NL, at the price of special cases for zero, infinite and NaN
// scales); spreading the Q5 high bits through a 256-entry table; widening
// block codes with two levels of VPUNPCK in a permuted order instead of
// VPSRLDQ, VEXTRACTI128 and VPMOVSXBD; and copying the byte codes to the
// stack to widen them from memory.

// decodeConsts are the static tables the decoders share.
type decodeConsts struct {
	// b7f, bfc, b0f, bf0 and b10 hold one byte value in all 32 bytes.
	b7f, bfc, b0f, bf0, b10 Mem
	// shift4 holds the quadword shift counts 0, 0, 4, 4 (see blockCodes).
	shift4 Mem
	// q5bits holds 1<<(j%8) at byte j < 32, q5spread j/8 (see q5ToF32).
	q5bits, q5spread Mem
	// iq4nl holds GGML's kvalues_iq4nl as int8, twice (both lanes).
	iq4nl Mem
}

// byteTable emits the static table name holding b.
func byteTable(name string, b []byte) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, v := range b {
		DATA(i, U8(v))
	}
	return m
}

// repeated returns the n bytes f(0), ..., f(n-1).
func repeated(n int, f func(j int) byte) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = f(j)
	}
	return b
}

func newDecodeConsts() decodeConsts {
	splat := func(v byte) Mem {
		return byteTable(fmt.Sprintf("decb%02x", v), repeated(32, func(int) byte { return v }))
	}
	levels := []int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	return decodeConsts{
		b7f: splat(0x7f), bfc: splat(0xfc), b0f: splat(0x0f), bf0: splat(0xf0), b10: splat(0x10),
		shift4: byteTable("decshift4", []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			4, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,
		}),
		q5bits:   byteTable("decq5bits", repeated(32, func(j int) byte { return 1 << (j % 8) })),
		q5spread: byteTable("decq5spread", repeated(32, func(j int) byte { return byte(j / 8) })),
		iq4nl:    byteTable("deciq4nl", repeated(32, func(j int) byte { return byte(levels[j%16]) })),
	}
}

// groupLoops emits the loop structure of the 8-bit float decoders: n
// counts groups of 8 values; a body of 8 groups runs while 8 remain, then
// one of 4, then single groups. body(g) converts g groups at src and d;
// the loops then move src and d past them.
func groupLoops(name string, n, src, d Register, body func(groups int)) {
	sizes := []int{8, 4, 1}
	for i, g := range sizes {
		loop := fmt.Sprintf("%s_loop%d", name, g)
		next := name + "_done"
		if i+1 < len(sizes) {
			next = fmt.Sprintf("%s_loop%d", name, sizes[i+1])
		}
		Label(loop)
		CMPQ(n, U8(g))
		JB(LabelRef(next))
		body(g)
		ADDQ(U8(8*g), src)
		ADDQ(U32(32*g), d)
		SUBQ(U8(g), n)
		JMP(LabelRef(loop))
	}
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// e5m2ToF32: an E5M2 code is the top byte of the binary16 with the same
// value, so interleaving the codes with zero bytes (VPUNPCK?BW with zero as
// the low byte) gives the halves, which VCVTPH2PS widens exactly.
func e5m2ToF32() {
	name := "e5m2ToF32AVX2"
	header(name, "func(dst []float32, src []byte, scale float32)",
		name+" sets dst[i] = value(src[i])*scale for i < len(dst)&^7, where value",
		"is the OCP E5M2 code as float32 (the binary16 with bits src[i]<<8).",
		"len(src) must be at least len(dst)&^7.")
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHRQ(U8(3), n) // groups of 8
	scale := broadcastParam("scale")
	zero := XMM()
	VPXOR(zero, zero, zero)
	convert := func(h VecVirtual, k int) {
		f := YMM()
		VCVTPH2PS(h, f)
		VMULPS(scale, f, f)
		VMOVUPS(f, Mem{Base: d, Disp: 32 * k})
	}
	groupLoops(name, n, src, d, func(groups int) {
		if groups == 1 {
			h := XMM()
			VMOVQ(Mem{Base: src}, h)
			VPUNPCKLBW(h, zero, h)
			convert(h, 0)
			return
		}
		for k := 0; k < groups/2; k++ {
			lo, hi := XMM(), XMM()
			m := Mem{Base: src, Disp: 16 * k}
			VPUNPCKLBW(m, zero, lo) // bytes 0, c0, 0, c1, ...: halves c<<8
			VPUNPCKHBW(m, zero, hi)
			convert(lo, 2*k)
			convert(hi, 2*k+1)
		}
	})
}

// e4m3ToF32: the binary16 with bits (c&0x7f)<<7 | (c&0x80)<<8 has the value
// of the E4M3 code c divided by 2^8 (the exponent biases are 7 and 15, and
// subnormals map to subnormals), except for the NaN codes 0x7f and 0xff,
// which give ±1.875. The kernel builds those halves per byte: the low byte
// L = c&0x7f, replaced by 0xfc for the NaN codes, and the high byte S =
// 0xff for a negative code (its lowest bit becomes the sign). The word
// S<<8|L shifted left by 7 is the half: for the NaN codes the quiet NaN
// 0x7e00 with the sign, which VCVTPH2PS widens to ±0x7fc00000. The product
// of the widened half and 256*scale (256*scale must be exact, which the Go
// caller checks) is then value(c)*scale, rounded once.
func e4m3ToF32(k decodeConsts) {
	name := "e4m3ToF32AVX2"
	header(name, "func(dst []float32, src []byte, scale256 float32)",
		name+" sets dst[i] = value(src[i])*scale for i < len(dst)&^7, where value",
		"is the OCP E4M3FN code as float32 (a NaN with the code's sign for 0x7f",
		"and 0xff), and scale256 = 256*scale exactly. len(src) must be at least",
		"len(dst)&^7.")
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHRQ(U8(3), n) // groups of 8
	scale := broadcastParam("scale256")
	zero := YMM()
	VPXOR(zero, zero, zero)
	convert := func(h VecVirtual, k int) {
		f := YMM()
		VCVTPH2PS(h, f)
		VMULPS(scale, f, f)
		VMOVUPS(f, Mem{Base: d, Disp: 32 * k})
	}
	// halves turns the codes in c (8 bytes of an XMM, or 32 of a YMM if
	// wide) into the binary16 halves: lo from the low 8 bytes of each
	// 128-bit lane, hi (if wide) from the high 8.
	halves := func(c VecVirtual, wide bool) (lo, hi VecVirtual) {
		vec, z, c7f, cfc := XMM, Op(zero.AsX()), Op(k.b7f.Offset(0)), Op(k.bfc.Offset(0))
		if wide {
			vec, z = YMM, zero
		}
		s, l, nan := vec(), vec(), vec()
		VPCMPGTB(c, z, s) // 0 > c: 0xff for negative codes
		VPAND(c7f, c, l)
		VPCMPEQB(c7f, l, nan)
		VPBLENDVB(nan, cfc, l, l)
		lo = vec()
		VPUNPCKLBW(s, l, lo)
		VPSLLW(U8(7), lo, lo)
		if wide {
			hi = vec()
			VPUNPCKHBW(s, l, hi)
			VPSLLW(U8(7), hi, hi)
		}
		return lo, hi
	}
	groupLoops(name, n, src, d, func(groups int) {
		if groups == 1 {
			c := XMM()
			VMOVQ(Mem{Base: src}, c)
			h, _ := halves(c, false)
			convert(h, 0)
			return
		}
		for g := 0; g < groups/4; g++ {
			c := YMM()
			VMOVDQU(Mem{Base: src, Disp: 32 * g}, c)
			lo, hi := halves(c, true)
			// lo holds the halves of codes 0-7 and 16-23, hi of 8-15 and
			// 24-31.
			convert(lo.AsX().(VecVirtual), 4*g)
			convert(hi.AsX().(VecVirtual), 4*g+1)
			lo2, hi2 := XMM(), XMM()
			VEXTRACTI128(U8(1), lo, lo2)
			VEXTRACTI128(U8(1), hi, hi2)
			convert(lo2, 4*g+2)
			convert(hi2, 4*g+3)
		}
	})
}

// blockCodes loads the 16 code bytes qs of a GGML block into the 32 bytes
// of a new YMM in value order: byte j < 16 is qs[j]&15, byte 16+j is
// qs[j]>>4. The high lane of the broadcast bytes is shifted right by 4 bits
// per quadword; the mask then drops the bits that came down from the next
// byte.
func blockCodes(qs Mem, shift4 VecVirtual, k decodeConsts) VecVirtual {
	y := YMM()
	VBROADCASTI128(qs, y)
	VPSRLVQ(shift4, y, y)
	VPAND(k.b0f, y, y)
	return y
}

// storeBlock converts the 32 byte codes of c (value order), sign-extended
// if signed, to float32, multiplies them by the broadcast scale d, adds m
// if it is not nil, and stores the 32 results at dst.
//
// With m, the Go twin rounds the product, then the sum; the kernel uses one
// fused multiply-add, which gives the same bits because the product is
// exact: d is a binary16 (11 significant bits, at least 2^-24, at most
// 65504) and the code an integer below 32 (5 bits), so d*code has at most
// 16 significant bits and neither overflows nor underflows float32. Its
// rounding is the identity, and rounding d*code + m once is the twin's
// result; a zero d*code takes its sign into the sum as the product would,
// and infinities and NaNs propagate alike.
func storeBlock(c VecVirtual, signed bool, d, m VecVirtual, dst Mem) {
	parts := []VecVirtual{c.AsX().(VecVirtual), XMM(), XMM(), XMM()}
	VPSRLDQ(U8(8), parts[0], parts[1])
	VEXTRACTI128(U8(1), c, parts[2])
	VPSRLDQ(U8(8), parts[2], parts[3])
	for k, p := range parts {
		v := YMM()
		if signed {
			VPMOVSXBD(p, v)
		} else {
			VPMOVZXBD(p, v)
		}
		VCVTDQ2PS(v, v)
		if m != nil {
			VFMADD213PS(m, d, v) // v = v*d + m
		} else {
			VMULPS(d, v, v)
		}
		VMOVUPS(v, dst.Offset(32*k))
	}
}

// blockLoops emits the loop structure of the block decoders: nb counts
// blocks; per blocks (1 or 2) are decoded per iteration while that many
// remain, then single blocks. body(blk, dst) decodes the block at blk to
// the 32 floats at dst.
func blockLoops(name string, per, blockBytes int, nb, src, d Register, body func(blk, dst Mem)) {
	if per > 1 {
		Label(name + "_loop2")
		CMPQ(nb, U8(per))
		JB(LabelRef(name + "_loop1"))
		for b := 0; b < per; b++ {
			body(Mem{Base: src, Disp: blockBytes * b}, Mem{Base: d, Disp: 128 * b})
		}
		ADDQ(U8(blockBytes*per), src)
		ADDQ(U32(128*per), d)
		SUBQ(U8(per), nb)
		JMP(LabelRef(name + "_loop2"))
	}
	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	body(Mem{Base: src}, Mem{Base: d})
	ADDQ(U8(blockBytes), src)
	ADDQ(U32(128), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// q5ToF32 writes the Q5_0 (q51 false) or Q5_1 decoder. The fifth bit of
// value j is bit j of qh, a little-endian uint32: VPSHUFB copies qh byte
// j/8 to byte j, VPAND keeps bit j%8 and VPCMPEQB turns it into a byte
// mask. Q5_0 codes become the signed bytes code-16 (the nibble with 0xf0
// where the fifth bit is clear), Q5_1 codes the bytes nibble|0x10*bit.
func q5ToF32(q51 bool, k decodeConsts) {
	name, blockBytes, qhOff := "q50ToF32AVX2", 22, 2
	doc := []string{
		name + " sets dst[32b+j] = d_b*(code_j-16), j < 32, for the len(dst)/32 Q5_0",
		"blocks at src (22 bytes each: binary16 d, uint32 qh, 16 bytes qs), where",
		"code_j = qs[j]&15 | (qh>>j&1)<<4 and code_{j+16} = qs[j]>>4 | (qh>>(j+16)&1)<<4",
		"for j < 16. len(src) must be at least len(dst)/32*22.",
	}
	if q51 {
		name, blockBytes, qhOff = "q51ToF32AVX2", 24, 4
		doc = []string{
			name + " sets dst[32b+j] = d_b*code_j + m_b, j < 32 (the product is exact,",
			"the sum rounded once), for the len(dst)/32 Q5_1 blocks at src (24 bytes",
			"each: binary16 d and m, uint32 qh, 16 bytes qs), with the codes of Q5_0.",
			"len(src) must be at least len(dst)/32*24.",
		}
	}
	header(name, "func(dst []float32, src []byte)", doc...)
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	nb := Load(Param("dst").Len(), GP64())
	SHRQ(U8(5), nb)
	shift4, sel, spread := YMM(), YMM(), YMM()
	VMOVDQU(k.shift4, shift4)
	VMOVDQU(k.q5bits, sel)
	VMOVDQU(k.q5spread, spread)

	blockLoops(name, 1, blockBytes, nb, src, d, func(blk, dst Mem) {
		scale := q80Scale(blk)
		var m VecVirtual
		if q51 {
			m = q80Scale(blk.Offset(2))
		}
		c := blockCodes(blk.Offset(qhOff+4), shift4, k)
		bits := YMM()
		VPBROADCASTD(blk.Offset(qhOff), bits)
		VPSHUFB(spread, bits, bits)
		VPAND(sel, bits, bits)
		VPCMPEQB(sel, bits, bits) // 0xff where the fifth bit is set
		if q51 {
			VPAND(k.b10, bits, bits) // 0x10 where set
		} else {
			VPANDN(k.bf0, bits, bits) // 0xf0 where clear: code-16 as int8
		}
		VPOR(bits, c, c)
		storeBlock(c, !q51, scale, m, dst)
	})
}

// iq4nlToF32: the 4-bit indices, in value order, look up the int8 levels
// with VPSHUFB (the 16-byte table in both lanes). Two blocks per iteration.
func iq4nlToF32(k decodeConsts) {
	name := "iq4nlToF32AVX2"
	header(name, "func(dst []float32, src []byte)",
		name+" sets dst[32b+j] = d_b*T[code_j], j < 32, for the len(dst)/32 IQ4_NL",
		"blocks at src (18 bytes each: binary16 d, then 16 bytes qs with the codes",
		"of Q4_0: code_j = qs[j]&15 and code_{j+16} = qs[j]>>4 for j < 16), T being",
		"GGML's kvalues_iq4nl. len(src) must be at least len(dst)/32*18.")
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	nb := Load(Param("dst").Len(), GP64())
	SHRQ(U8(5), nb)
	shift4, table := YMM(), YMM()
	VMOVDQU(k.shift4, shift4)
	VMOVDQU(k.iq4nl, table)

	blockLoops(name, 2, 18, nb, src, d, func(blk, dst Mem) {
		scale := q80Scale(blk)
		c := blockCodes(blk.Offset(2), shift4, k)
		VPSHUFB(c, table, c)
		storeBlock(c, true, scale, nil, dst)
	})
}

// decoders writes every decoder of this file.
func decoders() {
	k := newDecodeConsts()
	e5m2ToF32()
	e4m3ToF32(k)
	q5ToF32(false, k)
	q5ToF32(true, k)
	iq4nlToF32(k)
}
