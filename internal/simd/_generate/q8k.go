package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The k-quant dot products with Q8_K activations (simd.DotQ4KQ8K,
// DotQ5KQ8K, DotQ6KQ8K; see q8k.go in internal/simd for the arithmetic
// they share bit for bit with their Go twins). Per super-block they form
// the exact integer sums in vector registers (VPMADDUBSW: unsigned weight
// codes times int8 activation codes into int16 pairs, which cannot
// saturate: at most 2·63·127; then VPMADDWD, or VNNI's VPDPWSSD, by the
// int16 scales into int32), reduce them to one int32 S (and M, the mins'
// sum) and finish in scalar float32 in the twins' order. A Q8_K block is
// q8kBytes bytes: float32 d at 0, 256 int8 codes at 4, 16 int16 sums at
// 260.

const (
	q8kBytes = 292
	q8kQs    = 4
	q8kSums  = 260
)

// q8kConsts holds the kernels' constant tables, made once per file.
var q8kConsts = map[string]Mem{}

// q8kBytesConst returns a table of n bytes b(i), made once per name.
func q8kBytesConst(name string, n int, b func(i int) byte) Mem {
	if m, ok := q8kConsts[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	q8kConsts[name] = m
	for i := 0; i < n; i++ {
		DATA(i, U8(b(i)))
	}
	return m
}

// q8kSplat returns a 64-byte table of the byte v.
func q8kSplat(name string, v byte) Mem {
	return q8kBytesConst(name, 64, func(int) byte { return v })
}

// q8kScaleShuffle returns the VPSHUFB masks that broadcast int16 scale j
// (bytes 2j, 2j+1 of a 128-bit lane) to every word of the lane: mask j at
// 64·j, 64 bytes each (the 128-bit pattern repeated).
func q8kScaleShuffle() Mem {
	return q8kBytesConst("q8kscaleshuf", 8*64, func(i int) byte {
		return byte(2*(i/64) + i%2)
	})
}

// q8kQ6Shuffle returns the 16-byte VPSHUFB masks, one per 32-value
// segment j (0..7) of a q6_K super-block, that pick its two int8 scales
// 2j and 2j+1, each repeated 8 times.
func q8kQ6Shuffle() Mem {
	return q8kBytesConst("q8kq6shuf", 8*16, func(i int) byte {
		return byte(2*(i/16) + i%16/8)
	})
}

// q8kUnpackScales unpacks the 8 6-bit scales and mins of the q4_K or q5_K
// super-block at w (bytes 4..15, ggml's get_scale_min_k4 packing) into an
// XMM of 16 bytes: scales 0..7, then mins 0..7.
func q8kUnpackScales(w Register) VecVirtual {
	a, b, c := q4KPacked(w)
	v := XMM()
	t, u := GP32(), GP32()
	q4KLow(a, t)
	VMOVD(t, v)
	q4KHigh(a, c, 0, t, u)
	VPINSRD(U8(1), t, v, v)
	q4KLow(b, t)
	VPINSRD(U8(2), t, v, v)
	q4KHigh(b, c, 4, t, u)
	VPINSRD(U8(3), t, v, v)
	return v
}

// q8kQ4KScales returns the scales and mins of the q4_K (q5_K)
// super-block at w as int16 words, sm (scales 0..7 | mins 0..7), and in
// mn the int32 products of the mins with the Q8_K block q's sums, each
// min taking two 16-value sums (their lane total is M). With spread it
// also returns sc, the scales in both 128-bit lanes (for the AVX2
// kernel's VPSHUFB).
func q8kQ4KScales(w, q Register, spread bool) (sm, sc, mn VecVirtual) {
	sm = YMM()
	VPMOVZXBW(q8kUnpackScales(w), sm) // scales 0..7 | mins 0..7 as int16
	if spread {
		sc = YMM()
	}
	mn = YMM()
	if spread {
		VPERMQ(U8(0x44), sm, sc) // scales in both lanes
	}
	VPERMQ(U8(0x32), sm, mn) // mins 0..3 | mins 4..7
	VPUNPCKLWD(mn, mn, mn)   // each min twice: it weighs two 16-value sums
	VPMADDWD(Mem{Base: q, Disp: q8kSums}, mn, mn)
	return sm, sc, mn
}

// q8kNibbles returns the low nibbles of the bytes of v, or with high the
// high ones, m holding 0x0f in every byte: YMMs (VPAND), or with z ZMMs
// (VPANDD).
func q8kNibbles(v, m VecVirtual, high, z bool) VecVirtual {
	var code VecVirtual
	if z {
		code = ZMM()
	} else {
		code = YMM()
	}
	src := v
	if high {
		VPSRLW(U8(4), v, code)
		src = code
	}
	if z {
		VPANDD(m, src, code)
	} else {
		VPAND(m, src, code)
	}
	return code
}

// q8kQ6Consts512 loads the AVX-512 q6_K kernels' constants: m (0x0f) and
// hm (0x30) in every byte, the word shifts shl and shr that q8kQ6Codes512
// takes, and idx[n], the VPERMW indices that spread the scales of segments
// 2n and 2n+1 (of 8): scales 4n, 4n+1 | 4n+2, 4n+3.
func q8kQ6Consts512() (m, hm VecVirtual, shl, shr Mem, idx []VecVirtual) {
	m, hm = ZMM(), ZMM()
	VMOVDQU64(q8kSplat("q8knib", 0x0f), m)
	VMOVDQU64(q8kSplat("q8kbits45", 0x30), hm)
	// Segment k of a half takes bits 2k, 2k+1 of qh to bits 4, 5: low
	// nibbles (segments 0 | 1) left by 4 | 2, high (2 | 3) right by 0 | 2.
	shl = q8kWordTable("q8kq6shl", 32, func(i int) int { return 4 - 2*(i/16) })
	shr = q8kWordTable("q8kq6shr", 32, func(i int) int { return 2 * (i / 16) })
	idx = make([]VecVirtual, 4)
	for n := range idx {
		idx[n] = ZMM()
		VMOVDQU64(q8kWordTable(fmt.Sprintf("q8kq6idx%d", n), 32, func(i int) int {
			return 4*n + i/8
		}), idx[n])
	}
	return m, hm, shl, shr, idx
}

// q8kQ6Codes512 returns 64 6-bit q6_K codes: the nibbles of v (i 0: the
// low ones, whose high bits qh shifted left by the words of shl brings to
// bits 4, 5; i 1: the high ones, qh shifted right by shr), those bits
// taken by hm (0x30 in every byte) and ORed in.
func q8kQ6Codes512(v, qh VecVirtual, i int, m, hm VecVirtual, shl, shr Mem) VecVirtual {
	code := q8kNibbles(v, m, i == 1, true)
	t := ZMM()
	if i == 0 {
		VPSLLVW(shl, qh, t)
	} else {
		VPSRLVW(shr, qh, t)
	}
	VPTERNLOGD(U8(0xf8), hm, t, code) // code | (t & hm)
	return code
}

// q8kLoop starts the loop of a one-row kernel over its nb super-blocks at
// w (kquantLoop) and returns the kernel's float32 sum s, zeroed before it.
func q8kLoop(name string, w, nb Register, lines int) VecVirtual {
	s := XMM()
	VXORPS(s, s, s)

	kquantLoop(name, w, nb, lines)
	return s
}

// q8kNext ends the loop q8kLoop started: w moves on by a super-block of
// blockBytes, q by a Q8_K block, nb counts down; after the loop the kernel
// returns s.
func q8kNext(name string, w, q, nb Register, blockBytes int, s VecVirtual) {
	ADDQ(U32(uint32(blockBytes)), w)
	ADDQ(U32(q8kBytes), q)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	Store(s, ReturnIndex(0))
	RET()
}

// q8kReduce2 returns an XMM whose lanes 0 and 1 hold the int32 lane sums
// of the YMMs a and b.
func q8kReduce2(a, b VecVirtual) VecVirtual {
	t := YMM()
	VPHADDD(b, a, t) // per 128-bit lane: a01 a23 b01 b23
	x := XMM()
	VEXTRACTI128(U8(1), t, x)
	VPADDD(x, t.AsX(), x)
	VPHADDD(x, x, x) // a b a b
	return x
}

// q8kFinish adds (dw·dq)·S to the float32 sum s, and with a mins lane
// subtracts (dmin·dq)·M, in the twins' order: sm holds S in lane 0 and M in
// lane 1 (int32), dd the weights' fp16 d (and dmin) in the low 16 (32) bits
// at m, q the Q8_K block.
func q8kFinish(s, sm VecVirtual, m Mem, q Register, mins bool) {
	d := XMM()
	VPXOR(d, d, d)
	if mins {
		VMOVD(m, d) // d, dmin
	} else {
		VPINSRW(U8(0), m, d, d)
	}
	VCVTPH2PS(d, d)
	yd := XMM()
	VBROADCASTSS(Mem{Base: q}, yd)
	VMULPS(yd, d, d) // d·dq, dmin·dq
	VCVTDQ2PS(sm, sm)
	VMULPS(sm, d, d)
	VADDSS(d, s, s)
	if mins {
		VMOVSHDUP(d, d)
		VSUBSS(d, s, s)
	}
}

// dotQ4KQ8K writes dotQ4KQ8KAVX2 (five: dotQ5KQ8KAVX2).
func dotQ4KQ8K(five bool) {
	name, blockBytes, qsAt := "dotQ4KQ8KAVX2", 144, 16
	if five {
		name, blockBytes, qsAt = "dotQ5KQ8KAVX2", 176, 48
	}
	header(name, "func(w []byte, q []byte, nb int) float32",
		name+" returns the dot product of the nb super-blocks at w with the nb",
		"Q8_K blocks at q, as simd's twin computes it, bit for bit.")
	w := Load(Param("w").Base(), GP64())
	q := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	mask := q8kSplat("q8knib", 0x0f)
	bit4 := q8kSplat("q8kbit4", 0x10)
	shuf := q8kScaleShuffle()
	m := YMM()
	VMOVDQU(mask, m)
	s := q8kLoop(name, w, nb, 3)
	_, sc, mn := q8kQ4KScales(w, q, true)
	var qh VecVirtual
	if five {
		qh = YMM()
		VMOVDQU(Mem{Base: w, Disp: 16}, qh)
	}
	acc := zeros(2)
	for c := 0; c < 4; c++ {
		v := YMM()
		VMOVDQU(Mem{Base: w, Disp: qsAt + 32*c}, v)
		for i := 0; i < 2; i++ {
			g := 2*c + i
			code := q8kNibbles(v, m, i == 1, false)
			if five { // bit g of each qh byte to bit 4
				t := YMM()
				shiftBits(4-g, qh, t, true)
				VPAND(bit4, t, t)
				VPOR(t, code, code)
			}
			p, k := YMM(), YMM()
			VPMADDUBSW(Mem{Base: q, Disp: q8kQs + 32*g}, code, p)
			VPSHUFB(shuf.Offset(64*g), sc, k)
			VPMADDWD(k, p, p)
			VPADDD(p, acc[i], acc[i])
		}
	}
	VPADDD(acc[1], acc[0], acc[0])
	q8kFinish(s, q8kReduce2(acc[0], mn), Mem{Base: w}, q, true)
	q8kNext(name, w, q, nb, blockBytes, s)
}

// dotQ6KQ8K writes dotQ6KQ8KAVX2: the codes 0..63 are multiplied as they
// are and the offset of 32 taken off once per super-block, as 32·Σ_g
// scale_g·bsum_g.
func dotQ6KQ8K() {
	name := "dotQ6KQ8KAVX2"
	header(name, "func(w []byte, q []byte, nb int) float32",
		name+" returns the dot product of the nb q6_K super-blocks at w with",
		"the nb Q8_K blocks at q, as simd's twin computes it, bit for bit.")
	w := Load(Param("w").Base(), GP64())
	q := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	mask := q8kSplat("q8knib", 0x0f)
	hmask := q8kSplat("q8kbits45", 0x30)
	shuf := q8kQ6Shuffle()
	m, hm := YMM(), YMM()
	VMOVDQU(mask, m)
	VMOVDQU(hmask, hm)
	s := q8kLoop(name, w, nb, 4)
	sc8 := XMM()
	VMOVDQU(Mem{Base: w, Disp: 192}, sc8)
	off := YMM()
	VPMOVSXBW(sc8, off)
	VPMADDWD(Mem{Base: q, Disp: q8kSums}, off, off) // Σ scale_g·bsum_g, in pairs
	VPSLLD(U8(5), off, off)
	acc := zeros(2)
	for h := 0; h < 2; h++ {
		qh := YMM()
		VMOVDQU(Mem{Base: w, Disp: 128 + 32*h}, qh)
		ql := []VecVirtual{YMM(), YMM()}
		VMOVDQU(Mem{Base: w, Disp: 64 * h}, ql[0])
		VMOVDQU(Mem{Base: w, Disp: 64*h + 32}, ql[1])
		for k := 0; k < 4; k++ {
			code := q8kNibbles(ql[k%2], m, k >= 2, false)
			t := YMM()
			shiftBits(4-2*k, qh, t, true) // bits 2k, 2k+1 of qh to bits 4, 5
			VPAND(hm, t, t)
			VPOR(t, code, code)
			j := 4*h + k
			p := YMM()
			VPMADDUBSW(Mem{Base: q, Disp: q8kQs + 32*j}, code, p)
			kx, ky := XMM(), YMM()
			VPSHUFB(shuf.Offset(16*j), sc8, kx)
			VPMOVSXBW(kx, ky)
			VPMADDWD(ky, p, p)
			VPADDD(p, acc[k%2], acc[k%2])
		}
	}
	VPADDD(acc[1], acc[0], acc[0])
	VPSUBD(off, acc[0], acc[0])
	q8kFinish(s, q8kReduce2(acc[0], acc[0]), Mem{Base: w, Disp: 208}, q, false)
	q8kNext(name, w, q, nb, 210, s)
}

// q8kVNNI emits an AVX-512 VNNI instruction avo does not know (op src2,
// src1, acc: acc += the products of src1 and src2), as Go's assembler
// writes it.
func q8kVNNI(op string, src2, src1 Op, acc VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   op,
		Operands: []Op{src2, src1, acc},
		Inputs:   []Op{src2, src1, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}

// q8kWordTable returns a 64-byte table of 32 int16 words v(i), made once
// per name.
func q8kWordTable(name string, n int, v func(i int) int) Mem {
	if m, ok := q8kConsts[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	q8kConsts[name] = m
	for i := 0; i < n; i++ {
		DATA(2*i, U16(uint16(v(i))))
	}
	return m
}

// q8kScaleMAC adds the int16 pairs of p times the int16 scales k to the
// int32 lanes of acc: VPDPWSSD with vnni, else VPMADDWD and VPADDD.
func q8kScaleMAC(k, p, acc VecVirtual, vnni bool) {
	if vnni {
		q8kVNNI("VPDPWSSD", k, p, acc)
		return
	}
	VPMADDWD(k, p, p)
	VPADDD(p, acc, acc)
}

// q8kReduceZ folds the int32 lanes of the ZMM acc into a YMM.
func q8kReduceZ(acc VecVirtual) VecVirtual {
	y := YMM()
	VEXTRACTI64X4(U8(1), acc, y)
	VPADDD(acc.AsY(), y, y)
	return y
}

// dotQ4KQ8K512 writes dotQ4KQ8KAVX512 or, with vnni, dotQ4KQ8KVNNI (five:
// the q5_K kernels): the AVX2 kernels' arithmetic on 64 codes at a time,
// two groups of 32 (g and g+2) in the halves of a ZMM; the activations'
// two 32-byte groups loaded into its halves, the scales spread by VPERMW.
func dotQ4KQ8K512(five, vnni bool) {
	name, blockBytes, qsAt := "dotQ4KQ8K", 144, 16
	if five {
		name, blockBytes, qsAt = "dotQ5KQ8K", 176, 48
	}
	if vnni {
		name += "VNNI"
	} else {
		name += "AVX512"
	}
	header(name, "func(w []byte, q []byte, nb int) float32",
		name+" returns the dot product of the nb super-blocks at w with the nb",
		"Q8_K blocks at q, as simd's twin computes it, bit for bit.")
	w := Load(Param("w").Base(), GP64())
	q := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	m := ZMM()
	VMOVDQU64(q8kSplat("q8knib", 0x0f), m)
	var bit4 VecVirtual
	bits := q8kBytesConst("q8kq5bits", 4*64, func(i int) byte { // bit g of groups g, g+2
		g := []int{0, 1, 4, 5}[i/64] + 2*(i%64/32)
		return byte(1 << g)
	})
	if five {
		bit4 = ZMM()
		VMOVDQU64(q8kSplat("q8kbit4", 0x10), bit4)
	}
	idx := make([]VecVirtual, 4)
	for n := range idx { // word i: scale g or g+2
		idx[n] = ZMM()
		VMOVDQU64(q8kWordTable(fmt.Sprintf("q8kq4idx%d", n), 32, func(i int) int {
			return []int{0, 1, 4, 5}[n] + 2*(i/16)
		}), idx[n])
	}
	s := q8kLoop(name, w, nb, 3)
	sm, _, mn := q8kQ4KScales(w, q, false)
	var qh VecVirtual
	if five {
		qh = ZMM()
		VBROADCASTI64X4(Mem{Base: w, Disp: 16}, qh)
	}
	acc := make([]VecVirtual, 2)
	for i := range acc {
		acc[i] = ZMM()
		VPXORD(acc[i], acc[i], acc[i])
	}
	for p := 0; p < 2; p++ {
		v := ZMM()
		VMOVDQU64(Mem{Base: w, Disp: qsAt + 64*p}, v)
		for i := 0; i < 2; i++ {
			n := 2*p + i
			g := 4*p + i // groups g (low half) and g+2 (high half)
			code := q8kNibbles(v, m, i == 1, true)
			if five {
				k := K()
				VPTESTMB(bits.Offset(64*n), qh, k)
				VPADDB(bit4, code, k, code)
			}
			a := ZMM()
			VMOVDQU64(Mem{Base: q, Disp: q8kQs + 32*g}, a.AsY())
			VINSERTI64X4(U8(1), Mem{Base: q, Disp: q8kQs + 32*(g+2)}, a, a)
			pr, sc := ZMM(), ZMM()
			VPMADDUBSW(a, code, pr)
			VPERMW(sm.AsZ(), idx[n], sc)
			q8kScaleMAC(sc, pr, acc[i], vnni)
		}
	}
	VPADDD(acc[1], acc[0], acc[0])
	q8kFinish(s, q8kReduce2(q8kReduceZ(acc[0]), mn), Mem{Base: w}, q, true)
	q8kNext(name, w, q, nb, blockBytes, s)
}

// dotQ6KQ8K512 writes dotQ6KQ8KAVX512 or, with vnni, dotQ6KQ8KVNNI: the
// AVX2 kernel's arithmetic on the 64 low-nibble (or high-nibble) codes of
// a half super-block at a time, the high bits put in place by VPSLLVW and
// VPSRLVW, the scales spread by VPERMW.
func dotQ6KQ8K512(vnni bool) {
	name := "dotQ6KQ8KAVX512"
	if vnni {
		name = "dotQ6KQ8KVNNI"
	}
	header(name, "func(w []byte, q []byte, nb int) float32",
		name+" returns the dot product of the nb q6_K super-blocks at w with",
		"the nb Q8_K blocks at q, as simd's twin computes it, bit for bit.")
	w := Load(Param("w").Base(), GP64())
	q := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	m, hm, shl, shr, idx := q8kQ6Consts512()
	s := q8kLoop(name, w, nb, 4)
	sc16 := YMM()
	VPMOVSXBW(Mem{Base: w, Disp: 192}, sc16)
	off := YMM()
	VPMADDWD(Mem{Base: q, Disp: q8kSums}, sc16, off)
	VPSLLD(U8(5), off, off)
	acc := make([]VecVirtual, 2)
	for i := range acc {
		acc[i] = ZMM()
		VPXORD(acc[i], acc[i], acc[i])
	}
	for h := 0; h < 2; h++ {
		qh, v := ZMM(), ZMM()
		VBROADCASTI64X4(Mem{Base: w, Disp: 128 + 32*h}, qh)
		VMOVDQU64(Mem{Base: w, Disp: 64 * h}, v)
		for i := 0; i < 2; i++ {
			code := q8kQ6Codes512(v, qh, i, m, hm, shl, shr)
			n := 2*h + i
			pr, sc := ZMM(), ZMM()
			VPMADDUBSW(Mem{Base: q, Disp: q8kQs + 64*n}, code, pr)
			VPERMW(sc16.AsZ(), idx[n], sc)
			q8kScaleMAC(sc, pr, acc[i], vnni)
		}
	}
	VPADDD(acc[1], acc[0], acc[0])
	r := q8kReduceZ(acc[0])
	VPSUBD(off, r, r)
	q8kFinish(s, q8kReduce2(r, r), Mem{Base: w, Disp: 208}, q, false)
	q8kNext(name, w, q, nb, 210, s)
}

// q8kRange writes q8kRangeAVX2: the largest and smallest of 256 float32
// values (for QuantizeQ8K's scale; NaNs give an unspecified result, which
// the caller checks for).
func q8kRange() {
	name := "q8kRangeAVX2"
	header(name, "func(x []float32) (mx float32, mn float32)",
		name+" returns the largest and the smallest of x[0:256].")
	x := Load(Param("x").Base(), GP64())
	hi, lo := make([]VecVirtual, 4), make([]VecVirtual, 4)
	for i := range hi {
		hi[i], lo[i] = YMM(), YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, hi[i])
		VMOVAPS(hi[i], lo[i])
	}
	for i := 4; i < 32; i++ {
		VMAXPS(Mem{Base: x, Disp: 32 * i}, hi[i%4], hi[i%4])
		VMINPS(Mem{Base: x, Disp: 32 * i}, lo[i%4], lo[i%4])
	}
	VMAXPS(hi[1], hi[0], hi[0])
	VMAXPS(hi[3], hi[2], hi[2])
	VMINPS(lo[1], lo[0], lo[0])
	VMINPS(lo[3], lo[2], lo[2])
	VMAXPS(hi[2], hi[0], hi[0])
	VMINPS(lo[2], lo[0], lo[0])
	for i, v := range []VecVirtual{hi[0], lo[0]} {
		op := VMAXPS
		if i == 1 {
			op = VMINPS
		}
		t := XMM()
		VEXTRACTF128(U8(1), v, t)
		op(t, v.AsX(), t)
		u := XMM()
		VPERMILPS(U8(0x4e), t, u)
		op(u, t, t)
		VPERMILPS(U8(0xb1), t, u)
		op(u, t, t)
		Store(t, ReturnIndex(i))
	}
	VZEROUPPER()
	RET()
}

// q8kCodes writes q8kCodesAVX2: the 256 codes and 16 sums of a Q8_K block
// from x and iscale, as QuantizeQ8K defines them: the product rounded to
// float32 (VMULPS), then to the nearest int32, ties to even (VCVTPS2DQ
// under the default rounding mode, as ggml's nearest_int for |v| ≤ 2^22),
// capped at 127 and packed.
func q8kCodes() {
	name := "q8kCodesAVX2"
	header(name, "func(q []byte, x []float32, iscale float32)",
		name+" sets the codes (q[4:260]) and sums (q[260:292]) of a Q8_K",
		"block of x[0:256] at scale iscale.")
	q := Load(Param("q").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	is := YMM()
	VBROADCASTSS(Load(Param("iscale"), XMM()), is)
	c127, perm := YMM(), YMM()
	VMOVDQU(q8kWordTable("q8k127", 16, func(i int) int { return 127 * (1 - i%2) }), c127)
	VMOVDQU(q8kWordTable("q8kpackperm", 16, func(i int) int { return []int{0, 4, 1, 5, 2, 6, 3, 7}[i/2] * (1 - i%2) }), perm)
	var sums []VecVirtual
	for half := 0; half < 2; half++ {
		var tv []VecVirtual // the 8 groups' lane sums, pairwise added
		for g2 := 4 * half; g2 < 4*half+4; g2++ {
			iv := make([]VecVirtual, 4)
			for k := range iv {
				iv[k] = YMM()
				VMULPS(Mem{Base: x, Disp: 4 * (32*g2 + 8*k)}, is, iv[k])
				VCVTPS2DQ(iv[k], iv[k])
				VPMINSD(c127, iv[k], iv[k])
			}
			sa, sb := YMM(), YMM()
			VPADDD(iv[1], iv[0], sa)
			VPADDD(iv[3], iv[2], sb)
			t := YMM()
			VPHADDD(sb, sa, t) // lane: a01 a23 b01 b23
			tv = append(tv, t)
			a, b := YMM(), YMM()
			VPACKSSDW(iv[1], iv[0], a)
			VPACKSSDW(iv[3], iv[2], b)
			VPACKSSWB(b, a, a)
			VPERMD(a, perm, a)
			VMOVDQU(a, Mem{Base: q, Disp: q8kQs + 32*g2})
		}
		u0, u1 := YMM(), YMM()
		VPHADDD(tv[1], tv[0], u0) // lane: g0 g1 g2 g3 (partial: per 128-bit lane)
		VPHADDD(tv[3], tv[2], u1) // g4 .. g7
		w0, w1 := YMM(), YMM()
		VPERM2I128(U8(0x20), u1, u0, w0)
		VPERM2I128(U8(0x31), u1, u0, w1)
		VPADDD(w1, w0, w0) // the 8 groups' sums
		sums = append(sums, w0)
	}
	VPACKSSDW(sums[1], sums[0], sums[0]) // lane: g0-3 g8-11 | g4-7 g12-15
	VPERMQ(U8(0xd8), sums[0], sums[0])
	VMOVDQU(sums[0], Mem{Base: q, Disp: q8kSums})
	VZEROUPPER()
	RET()
}
