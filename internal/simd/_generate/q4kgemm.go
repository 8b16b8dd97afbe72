package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The q4_K × Q8_K tile GEMM (simd.MatMulQ4KQ8K on the avx512 set with
// AVX-512 VNNI): weight rows are first packed into panels of 16 rows
// (q4kgemmPackVNNI), then
// q4kgemmTile<T>VNNI multiplies T = 1..4 token rows of Q8_K activation
// blocks by one panel. A panel's super-block b is q4kgPanelBlock bytes:
//
//   - 32 ZMM of codes, ZMM 8c+m holding in int32 lane r the four bytes
//     16+32c+4m.. of row r's super-block as they are: their low nibbles are
//     the codes 64c+4m..+3 (group 2c), their high nibbles the codes
//     64c+32+4m..+3 (group 2c+1);
//   - at q4kgScalesAt, per group g, the 16 rows' 6-bit scales as bytes;
//   - at q4kgMinsAt, 4 ZMM, ZMM k holding in lane r row r's mins of groups
//     2k and 2k+1 as an int16 pair;
//   - at q4kgDAt and q4kgDminAt, the 16 rows' binary16 d and dmin.
//
// Per token row and group, VPDPBUSD of the nibbles (VPANDD, or VPSRLD and
// VPANDD: unsigned bytes 0..15) with the activation codes broadcast 4 at a
// time from the Q8_K block as its signed operand sums Σ q·c of the group
// in lane r, exactly, from zero; VPMULLD by the group's scales and VPADDD
// give S = Σ_g scale_g·Σ q·c exactly (|S| < 2^31), and VPDPWSSD of the
// mins pairs with the activations' pairs (bsum_{4k}+bsum_{4k+1},
// bsum_{4k+2}+bsum_{4k+3}) as int16 (given by the caller, at most
// 2·16·127 each) gives M = Σ_g min_g·(bsum_{2g}+bsum_{2g+1}), exact. The
// float finish is q8k.go's twin, lane by lane: s += (d·y)·float32(S), then
// s −= (dmin·y)·float32(M), every product rounded (VMULPS, no FMA), over
// the super-blocks in order from s = 0; so every output has DotQ4KQ8K's
// bits. The panel's codes are shared by the T tokens (loaded once a
// super-block), each token's codes by the 16 rows.

// q4kgPanelBlock is the bytes of one super-block of a 16-row panel.
const (
	q4kgPanelBlock = 2496
	q4kgScalesAt   = 2048
	q4kgMinsAt     = 2176
	q4kgDAt        = 2432
	q4kgDminAt     = 2464
	q4kBytes       = 144 // a q4_K super-block
	q4kgActBytes   = 32  // the caller's per token and block: y bits, 4 pairs, padding
)

// q4kgemm writes q4kgemmPackVNNI and q4kgemmTile1VNNI … q4kgemmTile4VNNI,
// the q5_K ones (q5kgemm…) and the q6_K ones (q6kgemm…).
func q4kgemm() {
	tabs := q4kPermTables("q4kgperm")
	q4kgemmPack(tabs, q4kLayout)
	mask := byteTable("q4kg0f", repeated(4, func(int) byte { return 0x0f }))
	for t := 1; t <= 4; t++ {
		q4kgemmTile(t, mask, q4kLayout)
	}
	q4kgemmPack(tabs, q5kLayout)
	for t := 1; t <= 4; t++ {
		q4kgemmTile(t, mask, q5kLayout)
	}
	q6kgemmPack(tabs)
	for t := 1; t <= 4; t++ {
		q6kgemmTile(t)
	}
}

// q4kgVNNIBcst emits op (VPDPBUSD or VPDPWSSD) with its second operand a
// 32-bit broadcast from memory (avo v0.5.0 has no VNNI forms).
func q4kgVNNIBcst(op string, src2 Mem, src1, acc VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   op,
		Suffixes: []string{"BCST"},
		Operands: []Op{src2, src1, acc},
		Inputs:   []Op{src2, src1, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI", "AVX512F"},
	})
}

// kgLayout is the layout of one super-block of a q4_K or q5_K panel.
type kgLayout struct {
	prefix                             string // of the kernels' names
	q5                                 bool   // codes one byte each (q5_K), not nibbles
	blockBytes, panelBlock             int
	scalesAt, minsAt, dAt, dminAt, typ int
}

// The q5_K tile GEMM (simd.MatMulQ5KQ8K) is q4_K's with the codes one
// byte each (0..31: the nibble and the fifth bit from qh, formed bytewise
// by the pack before the transpose, as q6_K's): 64 ZMM, ZMM J holding in
// lane r row r's codes 4J..4J+3, so that group g is ZMM 8g..8g+7; the
// scales, mins, d and dmin follow as in q4_K's panel.
var (
	q4kLayout = kgLayout{"q4kgemm", false, q4kBytes, q4kgPanelBlock, q4kgScalesAt, q4kgMinsAt, q4kgDAt, q4kgDminAt, 4}
	q5kLayout = kgLayout{"q5kgemm", true, 176, 4544, 4096, 4224, 4480, 4512, 5}
)

// q4kgemmPack transposes each 32 bytes of 16 rows' super-blocks with
// three levels of VPERMI2D: ZMM p is loaded with row p's 8 dwords in its
// low half and row p+8's in its high half (lane h·8+j), and each level
// swaps one bit of the register number with the same bit of j, so that
// afterwards ZMM j holds dword j of row h·8+p in lane h·8+p. Dword D ≥ 4
// of the super-blocks (the codes) is ZMM D−4 of the panel; the last 16
// bytes come from a transpose of bytes 112..143 of which the upper half is
// kept. Dwords 0..3 (d and dmin, the 12 bytes of scales and mins) are
// unpacked lane by lane as ggml's get_scale_min_k4 does: for j < 4 scale_j
// = q_j & 63 and min_j = q_{j+4} & 63, for j ≥ 4 scale_j = q_{j+4} & 15 |
// (q_{j−4} >> 6) << 4 and min_j = q_{j+4} >> 4 | (q_j >> 6) << 4, per byte
// of the dwords 1..3 at once; VPMOVDB and VPMOVDW store the bytes and
// halves.
func q4kgemmPack(tabs [3][2]Mem, ly kgLayout) {
	pre := "q4kg"
	if ly.q5 {
		pre = "q5kg"
	}
	splat := func(name string, v [4]byte) Mem { return byteTable(pre+name, v[:]) }
	c3f := splat("3f", [4]byte{0x3f, 0x3f, 0x3f, 0x3f})
	c0f := splat("p0f", [4]byte{0x0f, 0x0f, 0x0f, 0x0f})
	c30 := splat("30", [4]byte{0x30, 0x30, 0x30, 0x30})
	cLo := splat("lo", [4]byte{0xff, 0, 0, 0})
	cHi := splat("hi", [4]byte{0, 0, 0xff, 0})

	name := ly.prefix + "PackVNNI"
	header(name, "func(dst []byte, w []byte, stride int, nb int)",
		fmt.Sprintf("%s packs the nb q%d_K super-blocks of the 16 rows at w, stride", name, ly.typ),
		fmt.Sprintf("bytes apart, into the panel at dst (nb·%d bytes; see q4kgemm.go).", ly.panelBlock))
	d := Load(Param("dst").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	nb := Load(Param("nb"), GP64())
	base, row := packRows(w, stride, 16)
	var it [3][2]VecVirtual
	for x := range it {
		for h := range it[x] {
			it[x][h] = ZMM()
			VMOVDQU32(tabs[x][h], it[x][h])
		}
	}
	bcast := func(m Mem) VecVirtual {
		z := ZMM()
		VPBROADCASTD(m, z)
		return z
	}
	m3f, m0f, m30, mLo, mHi := bcast(c3f), bcast(c0f), bcast(c30), bcast(cLo), bcast(cHi)
	transpose := func(off int) []VecVirtual {
		a := make([]VecVirtual, 8)
		for p := range a {
			a[p] = ZMM()
			VBROADCASTI64X4(row(p).Offset(off), a[p]) // a full write
			VINSERTI64X4(U8(1), row(p+8).Offset(off), a[p], a[p])
		}
		return q4kTranspose(it, a)
	}
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	offs := []int{0, 32, 64, 96, 112}
	if ly.q5 {
		offs = offs[:1] // the header; the codes below
		var m10 VecVirtual
		for c := 0; c < 4; c++ {
			for i := 0; i < 2; i++ {
				if c == 0 && i == 0 {
					m10 = bcast(splat("10", [4]byte{0x10, 0x10, 0x10, 0x10}))
				}
				a := make([]VecVirtual, 8)
				for p := range a {
					qs, qh := ZMM(), ZMM()
					VBROADCASTI64X4(row(p).Offset(48+32*c), qs) // a full write
					VINSERTI64X4(U8(1), row(p+8).Offset(48+32*c), qs, qs)
					VBROADCASTI64X4(row(p).Offset(16), qh)
					VINSERTI64X4(U8(1), row(p+8).Offset(16), qh, qh)
					if i == 1 {
						VPSRLD(U8(4), qs, qs)
					}
					VPANDD(m0f, qs, qs)
					bitTo4(qh, 2*c+i)
					VPANDD(m10, qh, qh)
					a[p] = ZMM()
					VPORD(qh, qs, a[p])
				}
				a = q4kTranspose(it, a)
				for m, z := range a {
					VMOVDQU32(z, Mem{Base: d, Disp: 64 * (16*c + 8*i + m)})
				}
			}
		}
	}
	for k, off := range offs {
		a := transpose(off)
		for j := range a {
			D := off/4 + j
			if ly.q5 || D < 4 || k == 4 && j < 4 {
				continue
			}
			VMOVDQU32(a[j], Mem{Base: d, Disp: 64 * (D - 4)})
		}
		if k > 0 {
			continue
		}
		g0, g1, g2, g3 := a[0], a[1], a[2], a[3]
		t, u := ZMM(), ZMM()
		// d and dmin.
		VPMOVDW(g0, Mem{Base: d, Disp: ly.dAt})
		VPSRLD(U8(16), g0, t)
		VPMOVDW(t, Mem{Base: d, Disp: ly.dminAt})
		// scale_j, j < 4 (bytes of g1 & 63), and j ≥ 4.
		scl, sch, mnl, mnh := ZMM(), ZMM(), ZMM(), ZMM()
		VPANDD(m3f, g1, scl)
		VPANDD(m3f, g2, mnl)
		VPSRLD(U8(2), g1, t)
		VPANDD(m30, t, t)
		VPANDD(m0f, g3, u)
		VPORD(t, u, sch)
		VPSRLD(U8(2), g2, t)
		VPANDD(m30, t, t)
		VPSRLD(U8(4), g3, u)
		VPANDD(m0f, u, u)
		VPORD(t, u, mnh)
		for g := 0; g < 8; g++ {
			src := scl
			if g >= 4 {
				src = sch
			}
			if g%4 == 0 {
				VPMOVDB(src, Mem{Base: d, Disp: ly.scalesAt + 16*g})
				continue
			}
			VPSRLD(U8(8*(g%4)), src, t)
			VPMOVDB(t, Mem{Base: d, Disp: ly.scalesAt + 16*g})
		}
		// The mins as int16 pairs (min_{2k}, min_{2k+1}).
		for h, mn := range []VecVirtual{mnl, mnh} {
			VPANDD(mLo, mn, t)
			VPSLLD(U8(8), mn, u)
			VPANDD(mHi, u, u)
			VPORD(t, u, u)
			VMOVDQU32(u, Mem{Base: d, Disp: ly.minsAt + 64*(2*h)})
			VPSRLD(U8(16), mn, t)
			VPANDD(mLo, t, t)
			VPSRLD(U8(8), mn, u)
			VPANDD(mHi, u, u)
			VPORD(t, u, u)
			VMOVDQU32(u, Mem{Base: d, Disp: ly.minsAt + 64*(2*h+1)})
		}
	}
	for _, b := range base {
		ADDQ(U32(ly.blockBytes), b)
	}
	ADDQ(U32(ly.panelBlock), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// q4kgemmTile writes q4kgemmTile<nt>VNNI.
func q4kgemmTile(nt int, mask Mem, ly kgLayout) {
	name := fmt.Sprintf("%sTile%dVNNI", ly.prefix, nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 16, to the dot product of", name, nt),
		fmt.Sprintf("row r of the packed q%d_K panel p (q4kgemm.go) with the nb Q8_K blocks of", ly.typ),
		"token row t at q[t·rowBytes:], as simd's twin computes it, bit for bit;",
		"ac holds per token row and block 8 int32: the Q8_K scale as float32",
		"bits, then the 4 int16 pairs of sums the mins multiply.")
	pp := Load(Param("p").Base(), GP64())
	q0 := Load(Param("q").Base(), GP64())
	rb := Load(Param("rowBytes"), GP64())
	ac0 := Load(Param("ac").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	qs := []Register{q0}
	acs := []Register{ac0}
	if nt > 1 {
		acb := GP64()
		MOVQ(nb, acb)
		SHLQ(U8(5), acb) // bytes of ac per token row
		for t := 1; t < nt; t++ {
			qs = append(qs, GP64())
			LEAQ(Mem{Base: qs[t-1], Index: rb, Scale: 1}, qs[t])
			acs = append(acs, GP64())
			LEAQ(Mem{Base: acs[t-1], Index: acb, Scale: 1}, acs[t])
		}
	}
	var m0f VecVirtual
	if !ly.q5 {
		m0f = ZMM()
		VPBROADCASTD(mask, m0f)
	}
	// Registers are zeroed by copies of zero: avo takes VPXORD x, x, x as
	// reading x, which would keep x live around the loop.
	zero := ZMM()
	VPXORD(zero, zero, zero)
	s := make([]VecVirtual, nt)
	for t := range s {
		s[t] = ZMM()
		VMOVDQA32(zero, s[t])
	}

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	// M first, into its own lanes.
	mins := make([]VecVirtual, nt)
	for t := range mins {
		mins[t] = ZMM()
		VMOVDQA32(zero, mins[t])
	}
	for k := 0; k < 4; k++ {
		mv := ZMM()
		VMOVDQU32(Mem{Base: pp, Disp: ly.minsAt + 64*k}, mv)
		for t := range mins {
			q4kgVNNIBcst("VPDPWSSD", Mem{Base: acs[t], Disp: 4 + 4*k}, mv, mins[t])
		}
	}
	sum := make([]VecVirtual, nt)
	for t := range sum {
		sum[t] = ZMM()
		VMOVDQA32(zero, sum[t])
	}
	for c := 0; c < 4; c++ {
		plo, phi := make([]VecVirtual, nt), make([]VecVirtual, nt)
		for t := range plo {
			plo[t], phi[t] = ZMM(), ZMM()
			VMOVDQA32(zero, plo[t])
			VMOVDQA32(zero, phi[t])
		}
		for m := 0; m < 8; m++ {
			v, lo := ZMM(), ZMM()
			if ly.q5 {
				VMOVDQU32(Mem{Base: pp, Disp: 64 * (16*c + m)}, lo)
				VMOVDQU32(Mem{Base: pp, Disp: 64 * (16*c + 8 + m)}, v)
			} else {
				VMOVDQU32(Mem{Base: pp, Disp: 64 * (8*c + m)}, v)
				VPANDD(m0f, v, lo)
				VPSRLD(U8(4), v, v)
				VPANDD(m0f, v, v)
			}
			for t := range plo {
				q4kgVNNIBcst("VPDPBUSD", Mem{Base: qs[t], Disp: 4 + 64*c + 4*m}, lo, plo[t])
				q4kgVNNIBcst("VPDPBUSD", Mem{Base: qs[t], Disp: 4 + 64*c + 32 + 4*m}, v, phi[t])
			}
		}
		sl, sh := ZMM(), ZMM()
		VPMOVZXBD(Mem{Base: pp, Disp: ly.scalesAt + 16*(2*c)}, sl)
		VPMOVZXBD(Mem{Base: pp, Disp: ly.scalesAt + 16*(2*c+1)}, sh)
		for t := range plo {
			VPMULLD(sl, plo[t], plo[t])
			VPADDD(plo[t], sum[t], sum[t])
			VPMULLD(sh, phi[t], phi[t])
			VPADDD(phi[t], sum[t], sum[t])
		}
	}
	dv, dm := ZMM(), ZMM()
	VCVTPH2PS(Mem{Base: pp, Disp: ly.dAt}, dv)
	VCVTPH2PS(Mem{Base: pp, Disp: ly.dminAt}, dm)
	for t := range s {
		kFinish(ZMM, Mem{Base: acs[t]}, dv, dm, sum[t], mins[t], s[t])
	}
	ADDQ(U32(ly.panelBlock), pp)
	for t := range qs {
		ADDQ(U32(q8kBytes), qs[t])
		ADDQ(U8(q4kgActBytes), acs[t])
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	storeTileRows(s)
}

// The q6_K × Q8_K tile GEMM (simd.MatMulQ6KQ8K), built as q4_K's: a
// panel's super-block b is q6kgPanelBlock bytes:
//
//   - 64 ZMM of codes, ZMM J holding in int32 lane r row r's 6-bit codes
//     4J..4J+3 (0..63, ggml's q6_K order: code 128h+32k+l from ql, qh as
//     dequantize_row_q6_K reads them), one byte each;
//   - at q6kgScalesAt, per group g of 16 codes, the 16 rows' int8 scales;
//   - at q6kgPairsAt, 8 ZMM, ZMM i holding in lane r the scales of groups
//     2i and 2i+1 sign-extended to an int16 pair;
//   - at q6kgDAt, the 16 rows' binary16 d.
//
// Per token row and group, VPDPBUSD of the codes with the activation
// codes broadcast 4 at a time sums P_g = Σ q·c exactly from zero;
// VPMULLD by the group's scales (VPMOVSXBD) and VPADDD give Σ_g scale_g·P_g,
// and VPDPWSSD of the scale pairs with the Q8_K block's own int16 pairs of
// sums (bsum_{2i}, bsum_{2i+1}) gives B = Σ_g scale_g·bsum_g, so that S =
// Σ_g scale_g·P_g − 32·B = Σ_g scale_g·Σ (q−32)·c, the twin's integer,
// exactly (|Σ_g scale_g·P_g| ≤ 16·128·16·63·127 < 2^31). The float finish
// is the twin's: s += (d·y)·float32(S), the products rounded (VMULPS, no
// FMA), over the super-blocks in order from s = 0.
const (
	q6kgPanelBlock = 4928
	q6kgScalesAt   = 4096
	q6kgPairsAt    = 4352
	q6kgDAt        = 4864
	q6kBytes       = 210 // a q6_K super-block
)

// q6kgemmPack writes q6kgemmPackVNNI. The codes are formed bytewise from
// each row's ql and qh before the transpose (the transpose moves whole
// dwords, so the two commute): per half h (128 codes) and k < 4, ZMM p
// takes 32 bytes of ql and of qh of rows p (low half) and p+8 (high half),
// c = ql & 15 | (qh >> 2k & 3) << 4 (k < 2: ql[64h+32k ..]; k ≥ 2: the
// high nibbles of ql[64h+32(k−2) ..]), and the three-level VPERMI2D
// transpose of q4kgemmPack puts dword m of rows p and p+8 in lane p and
// p+8 of ZMM 32h+8k+m. The scales come from a transpose of bytes 176..207
// (its dwords 4..7), d by scalar moves.
func q6kgemmPack(tabs [3][2]Mem) {
	c0f := byteTable("q6kg0f", []byte{0x0f, 0x0f, 0x0f, 0x0f})
	c30 := byteTable("q6kg30", []byte{0x30, 0x30, 0x30, 0x30})
	cLo := byteTable("q6kglo", []byte{0xff, 0xff, 0, 0})

	name := "q6kgemmPackVNNI"
	header(name, "func(dst []byte, w []byte, stride int, nb int)",
		name+" packs the nb q6_K super-blocks of the 16 rows at w, stride",
		"bytes apart, into the panel at dst (nb·4928 bytes; see q4kgemm.go).")
	d := Load(Param("dst").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	nb := Load(Param("nb"), GP64())
	base, row := packRows(w, stride, 16)
	var it [3][2]VecVirtual
	for x := range it {
		for h := range it[x] {
			it[x][h] = ZMM()
			VMOVDQU32(tabs[x][h], it[x][h])
		}
	}
	m0f, m30, mLo := ZMM(), ZMM(), ZMM()
	VPBROADCASTD(c0f, m0f)
	VPBROADCASTD(c30, m30)
	VPBROADCASTD(cLo, mLo)
	load := func(p, off int) VecVirtual {
		z := ZMM()
		VBROADCASTI64X4(row(p).Offset(off), z) // a full write
		VINSERTI64X4(U8(1), row(p+8).Offset(off), z, z)
		return z
	}
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for h := 0; h < 2; h++ {
		for k := 0; k < 4; k++ {
			a := make([]VecVirtual, 8)
			for p := range a {
				ql := load(p, 64*h+32*(k%2))
				qh := load(p, 128+32*h)
				if k >= 2 {
					VPSRLD(U8(4), ql, ql)
				}
				VPANDD(m0f, ql, ql)
				bitTo4(qh, 2*k)
				VPANDD(m30, qh, qh)
				a[p] = ZMM()
				VPORD(qh, ql, a[p])
			}
			a = q4kTranspose(it, a)
			for m, z := range a {
				VMOVDQU32(z, Mem{Base: d, Disp: 64 * (32*h + 8*k + m)})
			}
		}
	}
	// The scales: dwords 4..7 of bytes 176..207.
	a := make([]VecVirtual, 8)
	for p := range a {
		a[p] = load(p, 176)
	}
	a = q4kTranspose(it, a)
	t, u, e, o := ZMM(), ZMM(), ZMM(), ZMM()
	for j := 0; j < 4; j++ {
		sc := a[4+j] // scales 4j..4j+3 of each row
		for b := 0; b < 4; b++ {
			if b == 0 {
				VPMOVDB(sc, Mem{Base: d, Disp: q6kgScalesAt + 16*(4*j)})
				continue
			}
			VPSRLD(U8(8*b), sc, t)
			VPMOVDB(t, Mem{Base: d, Disp: q6kgScalesAt + 16*(4*j+b)})
		}
		VPSLLW(U8(8), sc, e)
		VPSRAW(U8(8), e, e)  // words: scales 4j, 4j+2
		VPSRAW(U8(8), sc, o) // words: scales 4j+1, 4j+3
		VPANDD(mLo, e, t)
		VPSLLD(U8(16), o, u)
		VPORD(t, u, u) // (4j, 4j+1)
		VMOVDQU32(u, Mem{Base: d, Disp: q6kgPairsAt + 64*(2*j)})
		VPSRLD(U8(16), e, t)
		VPANDND(o, mLo, u) // o & ^0xffff
		VPORD(t, u, u)     // (4j+2, 4j+3)
		VMOVDQU32(u, Mem{Base: d, Disp: q6kgPairsAt + 64*(2*j+1)})
	}
	g := GP32()
	for r := 0; r < 16; r++ {
		MOVWLZX(row(r).Offset(208), g)
		MOVW(g.As16(), Mem{Base: d, Disp: q6kgDAt + 2*r})
	}
	for _, b := range base {
		ADDQ(U32(q6kBytes), b)
	}
	ADDQ(U32(q6kgPanelBlock), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// q4kPermTables emits the three levels' VPERMI2D index tables of the
// 16-row transposes (see q4kgemmPack), named prefix<level><half>.
func q4kPermTables(prefix string) (tabs [3][2]Mem) {
	for x := 0; x < 3; x++ {
		bit := 1 << x
		var idx [2][]byte
		for l := 0; l < 16; l++ {
			p, q := l, l|bit
			if l&bit != 0 {
				p, q = 16+l&^bit, 16+l
			}
			idx[0] = append(idx[0], byte(p), 0, 0, 0)
			idx[1] = append(idx[1], byte(q), 0, 0, 0)
		}
		for h := range tabs[x] {
			tabs[x][h] = byteTable(fmt.Sprintf("%s%d%d", prefix, x, h), idx[h])
		}
	}
	return tabs
}

// q4kTranspose transposes the 8 ZMM a (row p in the low half of a[p], row
// p+8 in the high half, 8 dwords each) into 8 ZMM, ZMM j holding dword j of
// row r in lane r, with the tables it (see q4kgemmPack).
func q4kTranspose(it [3][2]VecVirtual, a []VecVirtual) []VecVirtual {
	a = append([]VecVirtual(nil), a...)
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
	return a
}

// q6kgemmTile writes q6kgemmTile<nt>VNNI.
func q6kgemmTile(nt int) {
	name := fmt.Sprintf("q6kgemmTile%dVNNI", nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 16, to the dot product of", name, nt),
		"row r of the packed panel p (q6kgemmPackVNNI) with the nb Q8_K blocks",
		"of token row t at q[t·rowBytes:], as simd's twin computes it, bit for bit.")
	pp := Load(Param("p").Base(), GP64())
	q0 := Load(Param("q").Base(), GP64())
	rb := Load(Param("rowBytes"), GP64())
	nb := Load(Param("nb"), GP64())
	qs := []Register{q0}
	for t := 1; t < nt; t++ {
		qs = append(qs, GP64())
		LEAQ(Mem{Base: qs[t-1], Index: rb, Scale: 1}, qs[t])
	}
	zero := ZMM()
	VPXORD(zero, zero, zero)
	s := make([]VecVirtual, nt)
	for t := range s {
		s[t] = ZMM()
		VMOVDQA32(zero, s[t])
	}

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	bs := make([]VecVirtual, nt) // Σ_g scale_g·bsum_g
	for t := range bs {
		bs[t] = ZMM()
		VMOVDQA32(zero, bs[t])
	}
	for i := 0; i < 8; i++ {
		pv := ZMM()
		VMOVDQU32(Mem{Base: pp, Disp: q6kgPairsAt + 64*i}, pv)
		for t := range bs {
			q4kgVNNIBcst("VPDPWSSD", Mem{Base: qs[t], Disp: 4 + 256 + 4*i}, pv, bs[t])
		}
	}
	sum := make([]VecVirtual, nt)
	for t := range sum {
		sum[t] = ZMM()
		VMOVDQA32(zero, sum[t])
	}
	for g := 0; g < 16; g += 2 {
		pg := [2][]VecVirtual{make([]VecVirtual, nt), make([]VecVirtual, nt)}
		for i := range pg {
			for t := range pg[i] {
				pg[i][t] = ZMM()
				VMOVDQA32(zero, pg[i][t])
			}
		}
		for j := 0; j < 4; j++ {
			for i := range pg {
				J := 4*(g+i) + j
				v := ZMM()
				VMOVDQU32(Mem{Base: pp, Disp: 64 * J}, v)
				for t := range pg[i] {
					q4kgVNNIBcst("VPDPBUSD", Mem{Base: qs[t], Disp: 4 + 4*J}, v, pg[i][t])
				}
			}
		}
		for i := range pg {
			sc := ZMM()
			VPMOVSXBD(Mem{Base: pp, Disp: q6kgScalesAt + 16*(g+i)}, sc)
			for t := range pg[i] {
				VPMULLD(sc, pg[i][t], pg[i][t])
				VPADDD(pg[i][t], sum[t], sum[t])
			}
		}
	}
	dv := ZMM()
	VCVTPH2PS(Mem{Base: pp, Disp: q6kgDAt}, dv)
	for t := range s {
		VPSLLD(U8(5), bs[t], bs[t])
		VPSUBD(bs[t], sum[t], sum[t]) // S
		kFinish(ZMM, Mem{Base: qs[t]}, dv, nil, sum[t], nil, s[t])
	}
	ADDQ(U32(q6kgPanelBlock), pp)
	for t := range qs {
		ADDQ(U32(q8kBytes), qs[t])
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	storeTileRows(s)
}

// bitTo4 shifts the dwords of v left or right so that bit b moves to bit 4
// (VPSLLD or VPSRLD, nothing for b = 4); the caller masks off the bits
// that crossed from the neighbouring bytes.
func bitTo4(v VecVirtual, b int) {
	switch {
	case b < 4:
		VPSLLD(U8(4-b), v, v)
	case b > 4:
		VPSRLD(U8(b-4), v, v)
	}
}

// kFinish adds one token row's term of a super-block to s, lane by lane,
// in the one-row K-quant dots' float steps: s += (d·y)·float32(S), then,
// with mins (q4_K, q5_K; nil for q6_K), s −= (dmin·y)·float32(M), every
// product rounded (VMULPS, no fused multiply-add). y is the token row's
// Q8_K d (float32 at ym), d and dmin the rows' (converted); S and M are
// the exact int32 sums (converted in place). vec makes the vectors (ZMM
// or YMM).
func kFinish(vec func() VecVirtual, ym Mem, d, dmin, sum, mins, s VecVirtual) {
	y, a := vec(), vec()
	VBROADCASTSS(ym, y)
	VMULPS(y, d, a)     // d·y
	VCVTDQ2PS(sum, sum) // float32(S)
	VMULPS(sum, a, a)   // (d·y)·S
	VADDPS(a, s, s)     // s += …
	if mins == nil {
		return
	}
	b := vec()
	VMULPS(y, dmin, b)    // dmin·y
	VCVTDQ2PS(mins, mins) // float32(M)
	VMULPS(mins, b, b)    // (dmin·y)·M
	VSUBPS(b, s, s)       // s −= …
}
