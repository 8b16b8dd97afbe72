package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The four-row legacy dots with Q8_0 activations (simd.DotQ40Q80Rows,
// DotQ50Q80Rows, DotIQ4NLQ80Rows, DotQ80Q80Rows): four weight rows, stride
// bytes apart, dotted with one Q8_0 activation row, with AVX-512 VNNI on
// YMM (and on the avx2 set with AVX2, below). Per block
// each row forms the same exact int32 sum S as the one-row kernels of
// q8legacy.go (integer sums are exact in any order) and lane r of an XMM
// takes row r's float32 steps of the twin in its order: the block's term
// (w·a)·float32(S) is added to accumulator b%4 for the first 4⌊nb/4⌋
// blocks and to s for the rest, and the result is
// ((acc0+acc1)+(acc2+acc3))+s; so every row's result is the one-row
// kernel's bits. The rows share each activation block's load and scale.
// Q4_0 takes its unsigned codes straight into VPDPBUSD and subtracts
// 8·Σ codes of the activations once a block for all four rows; Q5_0,
// IQ4_NL and Q8_0 (dotQ80Q80X4VNNI, its values the block's bytes) move the
// values' signs onto the activations (VPSIGNB) as the one-row kernels do.
// Each group of four blocks prefetches the same two lines (Q8_0: three)
// of the next four rows into L1 and of the four after into L2
// (q8kPrefetchRows' group distances): without them the kernel ran at half
// the one-row kernel's speed from DRAM (Zen 4, 32768 rows of 2048 columns,
// pages touched before), with them at 1.15–1.2× (1.34× in L3), and the 1B
// Q4_0 decode at 1 thread went from 1/2 of the one-row dots' speed to 1.16×.
//
// The avx2 set's four-row kernels (dotQ40Q80X4AVX2 …, q8legacyX4AVX2) take
// the same steps with the one-row AVX2 kernels' integer products, VPMADDUBSW
// and VPMADDWD by ones: IQ4_NL and Q8_0 as the one-row kernels (the values'
// magnitudes against the activations carrying their signs, VPSIGNB); Q4_0
// and Q5_0 take their unsigned codes (0..15, 0..31) into VPMADDUBSW and
// subtract the int16 pairs off·(c_2j + c_2j+1), off 8 or 16, formed once a
// block for the four rows (|pair| ≤ 2·31·127 + 2·16·127 fits int16),
// before VPMADDWD. The sums S are the one-row kernels' (exact), so the bits
// are theirs too. Against four one-row calls (BenchmarkQ80Rows under
// ForceAVX2 on the Zen 4, weights from DRAM, 8192×2048 and 2048×8192,
// medians, load 4.3–4.5 on 2 cores) they ran at Q4_0 1.16–1.29×, Q5_0
// 1.03–1.10× (1.00–1.08× with VPSIGNB as IQ4_NL), IQ4_NL 1.01–1.08×, Q8_0
// 1.07–1.16×; in cache 1.10–1.36×. Without the prefetch they ran at
// 0.37–0.73×; prefetching 8 or 16 rows ahead was no faster than 4.

// q8legacyX4 writes dotQ40Q80X4VNNI, dotQ50Q80X4VNNI, dotIQ4NLQ80X4VNNI
// and dotQ80Q80X4VNNI.
func q8legacyX4() {
	eights := byteTable("q8lx4b8", repeated(32, func(int) byte { return 8 }))
	for _, q := range q8legacyX4Kinds() {
		q8legacyX4Dot(q, true, eights, false)
	}
	q8legacyX4Dot(q80Kind, true, eights, true)
}

// q8legacyX4AVX2 writes dotQ40Q80X4AVX2, dotQ50Q80X4AVX2,
// dotIQ4NLQ80X4AVX2 and dotQ80Q80X4AVX2 (the avx2 set; qdots' tables).
func q8legacyX4AVX2() {
	q8lx4Ones = byteTable("q8lx4w1", repeated(32, func(j int) byte { return byte(1 - j%2) }))
	for _, q := range q8legacyX4Kinds() {
		q8legacyX4Dot(q, false, qdotK.b08, false)
	}
}

// q8lx4Ones holds the int16 words 1 (the AVX2 kernels' VPMADDWD operand).
var q8lx4Ones Mem

// q8legacyX4Kinds are the types with four-row kernels.
func q8legacyX4Kinds() []qdotKind {
	var ks []qdotKind
	for _, q := range append(qdotKinds(qdotK), q80Kind) {
		if q.name == "Q40" || q.name == "Q50" || q.name == "IQ4NL" || q.name == q80Kind.name {
			ks = append(ks, q)
		}
	}
	return ks
}

// With runs (dot<T>Q80X4RunsVNNI), the four rows are each in its own run
// of rows, stride bytes apart, read side by side as four streams
// (q80RunsRows), and each row prefetches its own next row (the same
// offset a row on) into L1 and the one after into L2.
func q8legacyX4Dot(q qdotKind, vnni bool, eights Mem, runs bool) {
	name := "dot" + q.name + "Q80X4AVX2"
	if vnni {
		name = "dot" + q.name + "Q80X4VNNI"
	}
	if runs {
		name = "dot" + q.name + "Q80X4RunsVNNI"
	}
	header(name, "func(w []byte, stride int, q []byte, nb int, dst *[4]float32)",
		name+" sets dst[r] to the dot product of the nb "+q.name+" blocks at",
		"w[r·stride:] with the nb Q80 blocks at q, r = 0..3, each as simd's",
		"twin computes it, bit for bit.")
	w0 := Load(Param("w").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	qp := Load(Param("q").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	wr := []Register{w0, GP64(), GP64(), GP64()}
	for r := 1; r < 4; r++ {
		LEAQ(Mem{Base: wr[r-1], Index: stride, Scale: 1}, wr[r])
	}
	ahead := GP64()
	if runs {
		IMUL3Q(U32(q.blockBytes), nb, ahead) // the next row of each run
	} else {
		MOVQ(stride, ahead)
		SHLQ(U8(2), ahead) // the next four rows
	}
	reg := q8lRegs(q)
	var acc [4]VecVirtual
	for k := range acc {
		acc[k] = XMM()
		VXORPS(acc[k], acc[k], acc[k])
	}
	s := XMM()
	VXORPS(s, s, s)

	Label(name + "_loop4")
	CMPQ(nb, U8(4))
	JB(LabelRef(name + "_loop"))
	q8kPrefetchRows(wr, ahead, (4*q.blockBytes+63)/64, false) // the group's lines (Q8_0: 3)
	for k := 0; k < 4; k++ {
		q8legacyX4Block(q, vnni, reg, eights, wr, qp, k*q.blockBytes, k*Q80Bytes, acc[k])
	}
	for _, p := range wr {
		ADDQ(U32(4*q.blockBytes), p)
	}
	ADDQ(U32(4*Q80Bytes), qp)
	SUBQ(U8(4), nb)
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	q8legacyX4Block(q, vnni, reg, eights, wr, qp, 0, 0, s)
	for _, p := range wr {
		ADDQ(U32(q.blockBytes), p)
	}
	ADDQ(U32(Q80Bytes), qp)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(s, acc[0], acc[0])
	dst := Load(Param("dst"), GP64())
	VMOVUPS(acc[0], Mem{Base: dst})
	VZEROUPPER()
	RET()
}

// Q80Bytes is the size of one Q8_0 activation block.
const Q80Bytes = 34

// q8legacyX4Block adds the term (w_r·a)·float32(S_r) of the block at
// wr[r]+wOff (activations at qp+qOff) to lane r of acc, r = 0..3.
func q8legacyX4Block(q qdotKind, vnni bool, reg qdotRegs, eights Mem, wr []Register, qp Register, wOff, qOff int, acc VecVirtual) {
	if !vnni {
		q8legacyX4BlockAVX2(q, reg, wr, qp, wOff, qOff, acc)
		return
	}
	y := YMM()
	VMOVDQU(Mem{Base: qp, Disp: qOff + 2}, y)
	var p [4]VecVirtual
	for r := range p {
		p[r] = YMM()
		VPXOR(p[r], p[r], p[r])
		blk := Mem{Base: wr[r], Disp: wOff}
		if q.name == "Q40" { // unsigned codes 0..15
			c := YMM()
			VBROADCASTI128(blk.Offset(q.codesAt), c)
			VPSRLVQ(reg.shift4, c, c)
			VPAND(reg.mask, c, c)
			q8lVNNI("VPDPBUSD", y, c, p[r])
			continue
		}
		c := q8lCodes(q, reg, blk)
		u, ys := YMM(), YMM()
		VPSIGNB(c, c, u)  // |v|
		VPSIGNB(c, y, ys) // c·sign(v)
		q8lVNNI("VPDPBUSD", ys, u, p[r])
	}
	VPHADDD(p[1], p[0], p[0]) // per 128-bit lane: p0 p0 p1 p1
	VPHADDD(p[3], p[2], p[2]) // p2 p2 p3 p3
	VPHADDD(p[2], p[0], p[0]) // p0 p1 p2 p3
	sum := XMM()
	VEXTRACTI128(U8(1), p[0], sum)
	VPADDD(p[0].AsX(), sum, sum)
	if q.name == "Q40" { // Σ (code−8)·c = Σ code·c − 8·Σ c
		n, e := YMM(), YMM()
		VPXOR(n, n, n)
		VMOVDQU(eights, e)
		q8lVNNI("VPDPBUSD", y, e, n)
		t := XMM()
		VEXTRACTI128(U8(1), n, t)
		VPADDD(n.AsX(), t, t)
		u := XMM()
		VPSHUFD(U8(0x4e), t, u)
		VPADDD(u, t, t)
		VPSHUFD(U8(0xb1), t, u)
		VPADDD(u, t, t)
		VPSUBD(t, sum, sum)
	}
	q8legacyX4Finish(sum, wr, qp, wOff, qOff, acc)
}

// q8legacyX4Finish adds (w_r·a)·float32(S_r) to lane r of acc, the int32
// S_r in lane r of sum.
func q8legacyX4Finish(sum VecVirtual, wr []Register, qp Register, wOff, qOff int, acc VecVirtual) {
	VCVTDQ2PS(sum, sum)
	h := XMM()
	VPXOR(h, h, h)
	for r := 0; r < 4; r++ {
		VPINSRW(U8(r), Mem{Base: wr[r], Disp: wOff}, h, h)
	}
	VCVTPH2PS(h, h) // w_r
	a := XMM()
	VPBROADCASTW(Mem{Base: qp, Disp: qOff}, a)
	VCVTPH2PS(a, a)
	VMULPS(a, h, h)
	VMULPS(sum, h, h)
	VADDPS(h, acc, acc)
}

// q8legacyX4BlockAVX2 is q8legacyX4Block with AVX2's integer products. Rows
// 0 and 1 are paired (VPHADDD) before rows 2 and 3 are formed, which keeps
// Q5_0's live registers within the 16 YMM.
func q8legacyX4BlockAVX2(q qdotKind, reg qdotRegs, wr []Register, qp Register, wOff, qOff int, acc VecVirtual) {
	y := YMM()
	VMOVDQU(Mem{Base: qp, Disp: qOff + 2}, y)
	// Q4_0 and Q5_0: the unsigned codes (qdotCodes as for Q4_1 and Q5_1)
	// less off·(c_2j + c_2j+1), off 8 or 16.
	var m VecVirtual
	unsigned := q.name == "Q40" || q.name == "Q50"
	if unsigned {
		off := qdotK.b08
		if q.name == "Q50" {
			off = qdotK.b10
		}
		e := YMM()
		VMOVDQU(off, e)
		m = YMM()
		VPMADDUBSW(y, e, m)
	}
	row := func(r int) VecVirtual {
		blk := Mem{Base: wr[r], Disp: wOff}
		p := YMM()
		if unsigned {
			qu := q
			qu.mins = true
			c := qdotCodes(qu, qdotK, reg, blk)
			VPMADDUBSW(y, c, p)
			VPSUBW(m, p, p)
		} else {
			c := q8lCodes(q, reg, blk)
			u, ys := YMM(), YMM()
			VPSIGNB(c, c, u)  // |v|
			VPSIGNB(c, y, ys) // c·sign(v)
			VPMADDUBSW(ys, u, p)
		}
		VPMADDWD(q8lx4Ones, p, p)
		return p
	}
	p0 := row(0)
	p1 := row(1)
	VPHADDD(p1, p0, p0) // per 128-bit lane: p0 p0 p1 p1
	p2 := row(2)
	p3 := row(3)
	VPHADDD(p3, p2, p2) // p2 p2 p3 p3
	VPHADDD(p2, p0, p0) // p0 p1 p2 p3
	sum := XMM()
	VEXTRACTI128(U8(1), p0, sum)
	VPADDD(p0.AsX(), sum, sum)
	q8legacyX4Finish(sum, wr, qp, wOff, qOff, acc)
}
