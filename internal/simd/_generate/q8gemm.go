package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The Q8_0 × Q8_0 tile GEMM (simd.MatMulQ80Q80 on the avx512 set with
// AVX-512 VNNI): weight rows are first packed into panels of 16 rows
// (q8gemmPackVNNI), then q8gemmTile<T>VNNI multiplies T = 1..4 token rows
// of Q8_0 activation blocks by one panel. A panel's block b is
// q8gPanelBlock bytes: 8 ZMM of codes, ZMM j holding in int32 lane r the
// four bytes 4j..4j+3 of row r's block, each byte v+128 (v XOR 0x80, an
// unsigned byte 0..255 for v in −128..127), then the 16 rows' binary16
// scales. One VPDPBUSD per ZMM with the activations' four codes c
// broadcast as its signed operand (embedded broadcast from the Q8_0 row)
// adds Σ (v+128)·c over those bytes to lane r; each token's int32 lanes
// start at −128·Σ c over the block (given by the caller), so after the 8
// they hold S_r = Σ v·c exactly (|Σ (v+128)·c| ≤ 32·255·127), with no
// horizontal sums: the lanes are the rows. The float finish is
// q8legacy.go's, lane by lane: float32(S) (exact, |S| < 2^24) times the
// rounded product w_r·a of the scales (one VMULPS each, no FMA), added to
// accumulator b%4 for the first 4⌊nb/4⌋ blocks and to s for the rest,
// result ((acc0+acc1)+(acc2+acc3))+s; so every output has DotQ80Q80's
// bits. The panel's codes are shared by the T tokens (loaded once a block
// into 8 ZMM), each token's scale and correction by the 16 rows.
//
// The packing reads the 16 rows side by side at the hardware prefetchers'
// pace: prefetching each row 1024 bytes ahead (PREFETCHT0, a row a block)
// slowed MatMulQ80Q80 over 4 token rows from DRAM from 9.5 to 7.2 GB/s of
// weights (Zen 4), 256 bytes ahead was no faster than none.

// q8gPanelBlock is the bytes of one block of a 16-row panel: 512 of codes,
// 32 of binary16 scales, padding to a multiple of 64.
const (
	q8gPanelBlock = 576
	q8gScalesAt   = 512
)

// q8gemm writes q8gemmPackVNNI and q8gemmTile1VNNI … q8gemmTile4VNNI.
func q8gemm() {
	q8gemmPack()
	for t := 1; t <= 4; t++ {
		q8gemmTile(t)
	}
}

// q8gVNNI emits VPDPBUSD with its signed operand a 32-bit broadcast from
// memory (avo v0.5.0 has no VNNI forms).
func q8gVNNIBcst(src2 Mem, src1, acc VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Suffixes: []string{"BCST"},
		Operands: []Op{src2, src1, acc},
		Inputs:   []Op{src2, src1, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI", "AVX512F"},
	})
}

// q8gemmPack transposes 16 rows' blocks with three levels of VPERMI2D:
// ZMM p is loaded with row p's 8 dwords in its low half and row p+8's in
// its high half (lane h·8+j), and each level swaps one bit of the register
// number with the same bit of j, so that afterwards ZMM j holds dword j of
// row h·8+p in lane h·8+p.
func q8gemmPack() {
	var idx [3][2][]byte
	for x := 0; x < 3; x++ {
		bit := 1 << x
		for l := 0; l < 16; l++ {
			p, q := l, l|bit // lane bit x clear: P keeps, Q' takes P's lane with the bit set
			if l&bit != 0 {
				p, q = 16+l&^bit, 16+l
			}
			idx[x][0] = append(idx[x][0], byte(p), 0, 0, 0)
			idx[x][1] = append(idx[x][1], byte(q), 0, 0, 0)
		}
	}
	var tabs [3][2]Mem
	for x := range tabs {
		for h := range tabs[x] {
			tabs[x][h] = byteTable(fmt.Sprintf("q8gperm%d%d", x, h), idx[x][h])
		}
	}
	flip := byteTable("q8gb80", repeated(4, func(int) byte { return 0x80 }))

	name := "q8gemmPackVNNI"
	header(name, "func(dst []byte, w []byte, stride int, nb int)",
		name+" packs the nb Q8_0 blocks of the 16 rows at w, stride bytes",
		"apart, into the panel at dst (nb·576 bytes; see q8gemm.go).")
	d := Load(Param("dst").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	nb := Load(Param("nb"), GP64())
	base, row := packRows(w, stride, 16)
	f := ZMM()
	VPBROADCASTD(flip, f)
	var it [3][2]VecVirtual
	for x := range it {
		for h := range it[x] {
			it[x][h] = ZMM()
			VMOVDQU32(tabs[x][h], it[x][h])
		}
	}
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	a := make([]VecVirtual, 8)
	for p := range a {
		a[p] = ZMM()
		VMOVDQU32(row(p).Offset(2), a[p].AsY())
		VINSERTI64X4(U8(1), row(p+8).Offset(2), a[p], a[p])
	}
	for x := 0; x < 3; x++ {
		bit := 1 << x
		for p := 0; p < 8; p++ {
			if p&bit != 0 {
				continue
			}
			q := p | bit
			np, nq := ZMM(), ZMM()
			VMOVDQA32(it[x][0], np)
			VPERMI2D(a[q], a[p], np)
			VMOVDQA32(it[x][1], nq)
			VPERMI2D(a[q], a[p], nq)
			a[p], a[q] = np, nq
		}
	}
	for j := range a {
		VPXORD(f, a[j], a[j])
		VMOVDQU32(a[j], Mem{Base: d, Disp: 64 * j})
	}
	t := GP32()
	for r := 0; r < 16; r++ {
		MOVWLZX(row(r), t)
		MOVW(t.As16(), Mem{Base: d, Disp: q8gScalesAt + 2*r})
	}
	for _, b := range base {
		ADDQ(U8(34), b)
	}
	ADDQ(U32(q8gPanelBlock), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// packRows returns the row pointers of a pack kernel over rows weight
// rows stride bytes apart from w (rows 0, 4, 8, …: w and w advanced by
// 4·stride each; rows a multiple of 4) and the address of row r.
func packRows(w, stride Register, rows int) ([]Register, func(r int) Mem) {
	s3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, s3)
	base := []Register{w}
	for i := 1; i < rows/4; i++ {
		base = append(base, GP64())
		LEAQ(Mem{Base: base[i-1], Index: stride, Scale: 4}, base[i])
	}
	return base, func(r int) Mem {
		b := base[r/4]
		switch r % 4 {
		case 0:
			return Mem{Base: b}
		case 1:
			return Mem{Base: b, Index: stride, Scale: 1}
		case 2:
			return Mem{Base: b, Index: stride, Scale: 2}
		}
		return Mem{Base: b, Index: s3, Scale: 1}
	}
}

// q8gemmTile writes q8gemmTile<nt>VNNI.
func q8gemmTile(nt int) {
	name := fmt.Sprintf("q8gemmTile%dVNNI", nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 16, to the dot product of", name, nt),
		"row r of the packed panel p (q8gemmPackVNNI) with the nb Q8_0 blocks of",
		"token row t at q[t·rowBytes:], as simd's twin computes it, bit for bit;",
		"ac holds per token row nb pairs (activation scale as float32 bits,",
		"−128·Σ codes of the block).")
	pp, nb, qs, acs := q8gTileArgs(nt)
	block := func(k int, into []VecVirtual) {
		po, qo, ao := k*q8gPanelBlock, k*Q80Bytes+2, 8*k
		var wv [8]VecVirtual
		for j := range wv {
			wv[j] = ZMM()
			VMOVDQU32(Mem{Base: pp, Disp: po + 64*j}, wv[j])
		}
		in := make([]VecVirtual, nt)
		for t := range in {
			in[t] = ZMM()
			VPBROADCASTD(Mem{Base: acs[t], Disp: ao + 4}, in[t])
		}
		for j := range wv {
			for t := range in {
				q8gVNNIBcst(Mem{Base: qs[t], Disp: qo + 4*j}, wv[j], in[t])
			}
		}
		q8gFinish(ZMM, Mem{Base: pp, Disp: po + q8gScalesAt}, in, acs, ao, into)
	}
	q8gTileLoops(name, nt, ZMM, pp, nb, qs, acs, q8gPanelBlock, block)
}

// q8gTileArgs loads a tile's arguments: the panel pointer, the block
// count, and per token row the pointers to its Q8_0 blocks and to its
// activation pairs.
func q8gTileArgs(nt int) (pp, nb Register, qs, acs []Register) {
	pp = Load(Param("p").Base(), GP64())
	q0 := Load(Param("q").Base(), GP64())
	rb := Load(Param("rowBytes"), GP64())
	ac0 := Load(Param("ac").Base(), GP64())
	nb = Load(Param("nb"), GP64())
	qs = []Register{q0}
	acs = []Register{ac0}
	if nt > 1 {
		acb := GP64()
		MOVQ(nb, acb)
		SHLQ(U8(3), acb) // bytes of ac per token row
		for t := 1; t < nt; t++ {
			qs = append(qs, GP64())
			LEAQ(Mem{Base: qs[t-1], Index: rb, Scale: 1}, qs[t])
			acs = append(acs, GP64())
			LEAQ(Mem{Base: acs[t-1], Index: acb, Scale: 1}, acs[t])
		}
	}
	return pp, nb, qs, acs
}

// q8gFinish adds, lane by lane, the block's term (w·a)·float32(S) to
// into[t] for each token row t: S the exact int32 sums in in[t], w the
// rows' binary16 scales at scales, a token row t's activation scale
// (float32 bits at acs[t]+ao); two rounded products, no fused
// multiply-add, as the one-row dots.
func q8gFinish(vec func() VecVirtual, scales Mem, in []VecVirtual, acs []Register, ao int, into []VecVirtual) {
	ws := vec()
	VCVTPH2PS(scales, ws)
	for t := range in {
		VCVTDQ2PS(in[t], in[t]) // S, exact
		a := vec()
		VBROADCASTSS(Mem{Base: acs[t], Disp: ao}, a)
		VMULPS(ws, a, a)    // w·a
		VMULPS(in[t], a, a) // (w·a)·S
		VADDPS(a, into[t], into[t])
	}
}

// q8gTileLoops emits a tile's loops over the blocks and its stores:
// block(k, into) adds the term of block k (from the pointers' position)
// to into, one vector per token row; the first 4⌊nb/4⌋ blocks go into
// accumulator b%4 of each token row, the rest into s, and dst[t·ldd:]
// gets ((acc0+acc1)+(acc2+acc3))+s, the one-row dots' order. vec makes
// the tile's vectors (ZMM or YMM), panelBlock is the bytes of one block
// of a panel.
func q8gTileLoops(name string, nt int, vec func() VecVirtual, pp, nb Register, qs, acs []Register, panelBlock int, block func(k int, into []VecVirtual)) {
	zero := func() VecVirtual {
		v := vec()
		VXORPS(v, v, v)
		return v
	}
	acc := make([][4]VecVirtual, nt)
	for t := range acc {
		for k := range acc[t] {
			acc[t][k] = zero()
		}
	}
	advance := func(n int) {
		ADDQ(U32(n*panelBlock), pp)
		for t := range qs {
			ADDQ(U32(n*Q80Bytes), qs[t])
			ADDQ(U32(n*8), acs[t])
		}
	}

	Label(name + "_loop4")
	CMPQ(nb, U8(4))
	JB(LabelRef(name + "_tail"))
	for k := 0; k < 4; k++ {
		into := make([]VecVirtual, nt)
		for t := range into {
			into[t] = acc[t][k]
		}
		block(k, into)
	}
	advance(4)
	SUBQ(U8(4), nb)
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_tail")
	sum := make([]VecVirtual, nt)
	s := make([]VecVirtual, nt)
	for t := range acc {
		VADDPS(acc[t][1], acc[t][0], acc[t][0])
		VADDPS(acc[t][3], acc[t][2], acc[t][2])
		VADDPS(acc[t][2], acc[t][0], acc[t][0])
		sum[t] = acc[t][0]
		s[t] = zero()
	}
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	block(0, s)
	advance(1)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	for t := range sum {
		VADDPS(s[t], sum[t], sum[t])
	}
	storeTileRows(sum)
}

// storeTileRows stores vs[t] to the kernel's dst[t·ldd:] (its dst and
// ldd parameters, ldd in float32s) for every t, and returns.
func storeTileRows(vs []VecVirtual) {
	dst := Load(Param("dst").Base(), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	eachRow(dst, ldd, len(vs), func(t int) { VMOVUPS(vs[t], Mem{Base: dst}) })
	VZEROUPPER()
	RET()
}

// The avx2 set's tile GEMM (q8gemmPackAVX2, q8gemmTile1AVX2,
// q8gemmTile2AVX2): panels of 8 rows, block b of one q8gPanelBlockAVX2
// bytes: 8 YMM of codes, YMM j holding in int32 lane r the bytes 4j..4j+3
// of row r's block as they are (signed values v), then the 8 rows'
// binary16 scales. Without VNNI the products are the one-row AVX2 dots'
// (q8legacy.go): per YMM, |v| (VPABSB) as the unsigned operand of
// VPMADDUBSW against the activations' four codes broadcast (VPBROADCASTD)
// with v's signs moved onto them (VPSIGNB; no int16 pair exceeds
// 2·128·127), VPMADDWD by ones and VPADDD into the token's int32 lanes,
// which then hold S_r exactly; |v| is formed once a block for the two
// token rows. The float finish is the VNNI tiles', so the bits are
// DotQ80Q80's. An 8-row panel (288 bytes a block: 18 KiB for 2048
// columns) stays in L1 while the token pairs pass over it; 16 YMM hold
// two token rows' 4 accumulators of 8 rows and the products in flight.
const (
	q8gPanelBlockAVX2 = 288
	q8gScalesAtAVX2   = 256
)

// q8gemmAVX2 writes q8gemmActsAVX2, q8gemmPackAVX2, q8gemmTile1AVX2 and
// q8gemmTile2AVX2.
func q8gemmAVX2() {
	q8gemmActs()
	q8gemmPackAVX2()
	ones := byteTable("q8gw1", repeated(32, func(j int) byte { return byte(1 - j%2) }))
	for t := 1; t <= 2; t++ {
		q8gemmTileAVX2(t, ones)
	}
}

// q8gemmPackAVX2 transposes 8 rows' blocks as 8×8 dwords: VPUNPCKLDQ and
// VPUNPCKHDQ pair the rows, VPUNPCKLQDQ and VPUNPCKHQDQ the pairs, and
// VPERM2I128 joins rows 0..3 and 4..7 of each dword.
func q8gemmPackAVX2() {
	name := "q8gemmPackAVX2"
	header(name, "func(dst []byte, w []byte, stride int, nb int)",
		name+" packs the nb Q8_0 blocks of the 8 rows at w, stride bytes",
		"apart, into the panel at dst (nb·288 bytes; see q8gemm.go).")
	d := Load(Param("dst").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	nb := Load(Param("nb"), GP64())
	base, row := packRows(w, stride, 8)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	var u [8]VecVirtual // u[4h+i]: rows 4h..4h+3, dwords i and i+4
	for h := 0; h < 2; h++ {
		var t [4]VecVirtual
		for p := 0; p < 2; p++ {
			a, b := YMM(), YMM()
			VMOVDQU(row(4*h+2*p).Offset(2), a)
			VMOVDQU(row(4*h+2*p+1).Offset(2), b)
			t[2*p] = YMM()
			VPUNPCKLDQ(b, a, t[2*p]) // r0d0 r1d0 r0d1 r1d1 | d4, d5
			t[2*p+1] = YMM()
			VPUNPCKHDQ(b, a, t[2*p+1]) // d2, d3 | d6, d7
		}
		for i := 0; i < 2; i++ {
			u[4*h+2*i] = YMM()
			VPUNPCKLQDQ(t[2+i], t[i], u[4*h+2*i]) // dword 2i (| 2i+4) of the 4 rows
			u[4*h+2*i+1] = YMM()
			VPUNPCKHQDQ(t[2+i], t[i], u[4*h+2*i+1]) // dword 2i+1 (| 2i+5)
		}
	}
	for i := 0; i < 4; i++ {
		z := YMM()
		VPERM2I128(U8(0x20), u[4+i], u[i], z)
		VMOVDQU(z, Mem{Base: d, Disp: 32 * i})
		VPERM2I128(U8(0x31), u[4+i], u[i], z)
		VMOVDQU(z, Mem{Base: d, Disp: 32 * (i + 4)})
	}
	t := GP32()
	for r := 0; r < 8; r++ {
		MOVWLZX(row(r), t)
		MOVW(t.As16(), Mem{Base: d, Disp: q8gScalesAtAVX2 + 2*r})
	}
	for _, b := range base {
		ADDQ(U8(34), b)
	}
	ADDQ(U32(q8gPanelBlockAVX2), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// q8gemmTileAVX2 writes q8gemmTile<nt>AVX2.
func q8gemmTileAVX2(nt int, ones Mem) {
	name := fmt.Sprintf("q8gemmTile%dAVX2", nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 8, to the dot product of", name, nt),
		"row r of the packed panel p (q8gemmPackAVX2) with the nb Q8_0 blocks of",
		"token row t at q[t·rowBytes:], as simd's twin computes it, bit for bit;",
		"ac holds per token row nb pairs (activation scale as float32 bits,",
		"unused).")
	pp, nb, qs, acs := q8gTileArgs(nt)
	block := func(k int, into []VecVirtual) {
		po, qo, ao := k*q8gPanelBlockAVX2, k*Q80Bytes+2, 8*k
		in := make([]VecVirtual, nt)
		for t := range in {
			in[t] = YMM()
			VPXOR(in[t], in[t], in[t])
		}
		for j := 0; j < 8; j++ {
			v := Mem{Base: pp, Disp: po + 32*j}
			u := YMM()
			VPABSB(v, u) // |v|
			for t := range in {
				s := YMM()
				VPBROADCASTD(Mem{Base: qs[t], Disp: qo + 4*j}, s)
				VPSIGNB(v, s, s) // c·sign(v)
				VPMADDUBSW(s, u, s)
				VPMADDWD(ones, s, s)
				VPADDD(s, in[t], in[t])
			}
		}
		q8gFinish(YMM, Mem{Base: pp, Disp: po + q8gScalesAtAVX2}, in, acs, ao, into)
	}
	q8gTileLoops(name, nt, YMM, pp, nb, qs, acs, q8gPanelBlockAVX2, block)
}

// q8gemmActs writes q8gemmActsAVX2, the tiles' per-block activation
// pairs: the block's binary16 scale as float32 (VCVTPH2PS) and
// −128·Σ codes, Σ codes = Σ (code XOR 0x80) − 32·128 with the unsigned
// bytes summed by VPSADBW.
func q8gemmActs() {
	name := "q8gemmActsAVX2"
	header(name, "func(ac []int32, q []byte, n int)",
		name+" sets ac[2i], ac[2i+1] to the scale (float32 bits) and −128·Σ codes",
		"of the Q8_0 block q[34i:], i < n.")
	ac := Load(Param("ac").Base(), GP64())
	qp := Load(Param("q").Base(), GP64())
	n := Load(Param("n"), GP64())
	flip := YMM()
	VPBROADCASTB(byteTable("q8gab80", []byte{0x80}), flip)
	zero := YMM()
	VPXOR(zero, zero, zero)
	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	h := XMM()
	VPBROADCASTW(Mem{Base: qp}, h)
	VCVTPH2PS(h, h)
	VMOVSS(h, Mem{Base: ac})
	c := YMM()
	VPXOR(Mem{Base: qp, Disp: 2}, flip, c)
	VPSADBW(zero, c, c) // 4 sums of 8 bytes
	x := XMM()
	VEXTRACTI128(U8(1), c, x)
	VPADDQ(c.AsX(), x, x)
	y := XMM()
	VPSHUFD(U8(0x4e), x, y)
	VPADDQ(y, x, x)
	t := GP32()
	VMOVD(x, t)
	SUBL(U32(32*128), t)
	IMUL3L(I32(-128), t, t)
	MOVL(t, Mem{Base: ac, Disp: 4})
	ADDQ(U8(34), qp)
	ADDQ(U8(8), ac)
	DECQ(n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
