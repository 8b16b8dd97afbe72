package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The avx2 set's tile GEMM for q4_K weights on Q8_K activations
// (simd.MatMulQ4KQ8K without AVX-512 VNNI, which the avx512 set without
// VNNI takes too): panels of 8 rows, one YMM int32 lane a row. Super-block
// b of a panel is q4kaPanelBlock bytes (packed by q4kgemmPackAVX2 in
// q4kgemm_amd64.go): 32 YMM of codes, YMM j holding in lane r the bytes
// 16+4j..19+4j of row r's super-block as they are (two 4-bit codes a
// byte); 8 YMM of scales, YMM g holding in lane r the int16 pair
// (sc_g, sc_g) of row r; 4 YMM of mins, YMM k holding (mn_2k, mn_2k+1);
// then the 8 rows' d and dmin as binary16. Per sub-block the tile splits
// the nibbles (VPAND, VPSRLW), multiplies them as VPMADDUBSW's unsigned
// operand (0..15) by the token's four activation codes broadcast
// (VPBROADCASTD; a pair is at most 2·15·128 in magnitude) and adds the 8
// int16 pairs of the sub-block's 32 codes with VPADDW (at most 8·3840 =
// 30720: no overflow), then VPMADDWD by the scale pair gives sc·p exactly
// in int32; the mins term is VPMADDWD of the min pairs with the Q8_K
// block's pairs of 32-code sums (simd's q4kgActs). The float finish is
// DotQ4KQ8K's, in its order, on 8 rows at once: s += (d·yd)·S, then
// s −= (dmin·yd)·M, no FMA. The bits are DotQ4KQ8K's.
const (
	q4kaPanelBlock = 1440
	q4kaScalesAt   = 1024
	q4kaMinsAt     = 1280
	q4kaDAt        = 1408
	q4kaDminAt     = 1424
)

// The avx2 set's q5_K panels (q5kgemmPackAVX2) are q4_K's with the codes
// as bytes 0..31 (formed from qs and qh), 64 YMM of them at kaCodeAt(j),
// YMM j holding codes 4j..4j+3 of each row, before the scale pairs, min pairs, d and
// dmin at q5ka*At: q5kaPanelBlock bytes a super-block. The tile sums the
// VPMADDUBSW pairs (at most 2·31·128 = 7936) of 4 dwords with VPADDW (at
// most 31744) before each VPMADDWD by the scale pair; the rest is q4_K's.
const (
	q5kaPanelBlock = 2720
	q5kaScalesAt   = 2304
	q5kaMinsAt     = 2560
	q5kaDAt        = 2688
	q5kaDminAt     = 2704
)

// kq8avx2 writes q4kgemmTile1AVX2, q4kgemmTile2AVX2, q5kgemmTile1AVX2 and
// q5kgemmTile2AVX2.
func kq8avx2() {
	mask := byteTable("q4kam0f", repeated(32, func(int) byte { return 0x0f }))
	for nt := 1; nt <= 2; nt++ {
		q4kgemmTileAVX2(nt, mask, false)
	}
	for nt := 1; nt <= 2; nt++ {
		q4kgemmTileAVX2(nt, mask, true)
	}
}

// q4kgemmTileAVX2 writes q4kgemmTile<nt>AVX2 (q5: q5kgemmTile<nt>AVX2).
func q4kgemmTileAVX2(nt int, mask Mem, q5 bool) {
	typ, scalesAt, minsAt, dAt, dminAt, block := "q4k", q4kaScalesAt, q4kaMinsAt, q4kaDAt, q4kaDminAt, q4kaPanelBlock
	if q5 {
		typ, scalesAt, minsAt, dAt, dminAt, block = "q5k", q5kaScalesAt, q5kaMinsAt, q5kaDAt, q5kaDminAt, q5kaPanelBlock
	}
	name := fmt.Sprintf("%sgemmTile%dAVX2", typ, nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 8, to Dot%sQ8K of row r", name, nt, strings.ToUpper(typ[:2])+"K"),
		fmt.Sprintf("of the packed panel p (%sgemmPackAVX2) with the nb Q8_K blocks of token", typ),
		"row t at q[t·rowBytes:], bit for bit; ac holds per token row nb·8 int32",
		"(q4kgActs).")
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
		qs = append(qs, GP64())
		LEAQ(Mem{Base: q0, Index: rb, Scale: 1}, qs[1])
		acs = append(acs, GP64())
		LEAQ(Mem{Base: ac0, Index: acb, Scale: 1}, acs[1])
	}
	m := YMM()
	if !q5 {
		VMOVDQU(mask, m)
	}
	s := zeros(nt)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	sum := make([]VecVirtual, nt)
	if q5 {
		for t := range sum {
			sum[t] = YMM()
			VPXOR(sum[t], sum[t], sum[t])
		}
		for h := 0; h < 16; h++ { // 16 codes, half a sub-block
			v := kaCodes(pp, 4*h)
			for t := 0; t < nt; t++ {
				a := kaProducts(v, Mem{Base: qs[t], Disp: 4 + 16*h})
				VPADDW(a[1], a[0], a[0])
				VPADDW(a[3], a[2], a[2])
				VPADDW(a[2], a[0], a[0])
				VPMADDWD(Mem{Base: pp, Disp: scalesAt + 32*(h/2)}, a[0], a[0])
				VPADDD(a[0], sum[t], sum[t])
			}
		}
	}
	for c := 0; c < 4 && !q5; c++ {
		lo, hi := make([]VecVirtual, nt), make([]VecVirtual, nt)
		for t := 0; t < nt; t++ {
			lo[t], hi[t] = YMM(), YMM()
			VPXOR(lo[t], lo[t], lo[t])
			VPXOR(hi[t], hi[t], hi[t])
		}
		for k := 0; k < 8; k++ {
			j := 8*c + k
			vl, vh := YMM(), YMM()
			VMOVDQU(Mem{Base: pp, Disp: 32 * j}, vh)
			VPAND(vh, m, vl)
			VPSRLW(U8(4), vh, vh)
			VPAND(m, vh, vh)
			for t := 0; t < nt; t++ {
				a := YMM()
				VPBROADCASTD(Mem{Base: qs[t], Disp: 4 + 64*c + 4*k}, a)
				VPMADDUBSW(a, vl, a)
				VPADDW(a, lo[t], lo[t])
				b := YMM()
				VPBROADCASTD(Mem{Base: qs[t], Disp: 4 + 64*c + 32 + 4*k}, b)
				VPMADDUBSW(b, vh, b)
				VPADDW(b, hi[t], hi[t])
			}
		}
		for t := 0; t < nt; t++ {
			VPMADDWD(Mem{Base: pp, Disp: scalesAt + 32*(2*c)}, lo[t], lo[t])
			VPMADDWD(Mem{Base: pp, Disp: scalesAt + 32*(2*c+1)}, hi[t], hi[t])
			if c == 0 {
				sum[t] = YMM()
				VPADDD(hi[t], lo[t], sum[t])
			} else {
				VPADDD(lo[t], sum[t], sum[t])
				VPADDD(hi[t], sum[t], sum[t])
			}
		}
	}
	dd, dm := YMM(), YMM()
	VCVTPH2PS(Mem{Base: pp, Disp: dAt}, dd)
	VCVTPH2PS(Mem{Base: pp, Disp: dminAt}, dm)
	for t := 0; t < nt; t++ {
		mn := YMM()
		VPBROADCASTD(Mem{Base: acs[t], Disp: 4}, mn)
		VPMADDWD(Mem{Base: pp, Disp: minsAt}, mn, mn)
		for k := 1; k < 4; k++ {
			x := YMM()
			VPBROADCASTD(Mem{Base: acs[t], Disp: 4 + 4*k}, x)
			VPMADDWD(Mem{Base: pp, Disp: minsAt + 32*k}, x, x)
			VPADDD(x, mn, mn)
		}
		kFinish(YMM, Mem{Base: acs[t]}, dd, dm, sum[t], mn, s[t])
	}
	ADDQ(U32(block), pp)
	for t := range qs {
		ADDQ(U32(q8kBytes), qs[t])
		ADDQ(U8(32), acs[t])
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	storeTileRows(s)
}

// The avx2 set's tile GEMM for q6_K weights on Q8_K activations: panels
// of 8 rows, super-block b of one q6kaPanelBlock bytes (q6kgemmPackAVX2 in
// q4kgemm_amd64.go): 64 YMM of codes at kaCodeAt(j), YMM j holding in
// lane r codes 4j..4j+3 of row r as bytes 0..63 (formed from ql and qh); 16 YMM of
// scales, YMM g holding in lane r the int16 pair (sc_g, sc_g) of row r's
// int8 scale; 8 YMM of scale pairs (sc_2k, sc_2k+1); then the 8 rows' d as
// binary16. Per 16-code group g: VPMADDUBSW of the codes (unsigned 0..63)
// by the token's four activation codes broadcast, two pairs added with
// VPADDW (at most 2·2·63·128 = 32256: no int16 overflow), VPMADDWD by
// (sc_g, sc_g) into int32; minus 32·Σ sc_g·bsum_g (VPMADDWD of the scale
// pairs with the Q8_K block's own int16 sum pairs): DotQ6KQ8K's integer,
// exact; then s += (d·yd)·S, its float finish (no FMA).
const (
	q6kaPanelBlock = 3088
	q6kaScalesAt   = 2304
	q6kaPairsAt    = 2816
	q6kaDAt        = 3072
)

// kaCodeAt returns the offset of YMM j of the codes of a q5_K or q6_K
// panel's super-block: q8gemmPackAVX2 transposes them 32 codes (8 YMM) at
// a time into 288-byte blocks (its last 32 bytes unused here).
func kaCodeAt(j int) int { return 288*(j/8) + 32*(j%8) }

// kaCodes loads YMM j..j+3 of the codes of the panel's super-block at pp
// (kaCodeAt): 16 codes of each of the 8 rows.
func kaCodes(pp Register, j int) [4]VecVirtual {
	var v [4]VecVirtual
	for m := range v {
		v[m] = YMM()
		VMOVDQU(Mem{Base: pp, Disp: kaCodeAt(j + m)}, v[m])
	}
	return v
}

// kaProducts returns VPMADDUBSW of the codes v[m] (unsigned) by the token
// row's four activation codes at c+4m broadcast (signed): per row, int16
// pairs of products of the 16 codes.
func kaProducts(v [4]VecVirtual, c Mem) [4]VecVirtual {
	var a [4]VecVirtual
	for m := range a {
		a[m] = YMM()
		VPBROADCASTD(c.Offset(4*m), a[m])
		VPMADDUBSW(a[m], v[m], a[m])
	}
	return a
}

// kq8avx2Q6 writes q6kgemmTile1AVX2 and q6kgemmTile2AVX2.
func kq8avx2Q6() {
	for nt := 1; nt <= 2; nt++ {
		q6kgemmTileAVX2(nt)
	}
}

// q6kgemmTileAVX2 writes q6kgemmTile<nt>AVX2.
func q6kgemmTileAVX2(nt int) {
	name := fmt.Sprintf("q6kgemmTile%dAVX2", nt)
	header(name, "func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, nb int)",
		fmt.Sprintf("%s sets dst[t·ldd+r], t < %d, r < 8, to DotQ6KQ8K of row r", name, nt),
		"of the packed panel p (q6kgemmPackAVX2) with the nb Q8_K blocks of token",
		"row t at q[t·rowBytes:], bit for bit.")
	pp := Load(Param("p").Base(), GP64())
	q0 := Load(Param("q").Base(), GP64())
	rb := Load(Param("rowBytes"), GP64())
	nb := Load(Param("nb"), GP64())
	qs := []Register{q0}
	if nt > 1 {
		qs = append(qs, GP64())
		LEAQ(Mem{Base: q0, Index: rb, Scale: 1}, qs[1])
	}
	s := zeros(nt)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	sum := make([]VecVirtual, nt)
	for t := range sum {
		sum[t] = YMM()
		VPXOR(sum[t], sum[t], sum[t])
	}
	for g := 0; g < 16; g++ {
		v := kaCodes(pp, 4*g)
		for t := 0; t < nt; t++ {
			a := kaProducts(v, Mem{Base: qs[t], Disp: 4 + 16*g})
			VPADDW(a[1], a[0], a[0])
			VPADDW(a[3], a[2], a[2])
			VPMADDWD(Mem{Base: pp, Disp: q6kaScalesAt + 32*g}, a[0], a[0])
			VPMADDWD(Mem{Base: pp, Disp: q6kaScalesAt + 32*g}, a[2], a[2])
			VPADDD(a[0], sum[t], sum[t])
			VPADDD(a[2], sum[t], sum[t])
		}
	}
	dd := YMM()
	VCVTPH2PS(Mem{Base: pp, Disp: q6kaDAt}, dd)
	for t := 0; t < nt; t++ {
		mn := YMM()
		VPBROADCASTD(Mem{Base: qs[t], Disp: 260}, mn)
		VPMADDWD(Mem{Base: pp, Disp: q6kaPairsAt}, mn, mn)
		for k := 1; k < 8; k++ {
			x := YMM()
			VPBROADCASTD(Mem{Base: qs[t], Disp: 260 + 4*k}, x)
			VPMADDWD(Mem{Base: pp, Disp: q6kaPairsAt + 32*k}, x, x)
			VPADDD(x, mn, mn)
		}
		VPSLLD(U8(5), mn, mn)
		VPSUBD(mn, sum[t], sum[t]) // Σ sc·(c−32)·a
		kFinish(YMM, Mem{Base: qs[t]}, dd, nil, sum[t], nil, s[t])
	}
	ADDQ(U32(q6kaPanelBlock), pp)
	for t := range qs {
		ADDQ(U32(q8kBytes), qs[t])
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	storeTileRows(s)
}

// kq8avx2Codes writes q5kaCodesAVX2 and q6kaCodesAVX2, which form one q5_K
// or q6_K super-block's 256 codes as bytes (0..31, 0..63) in the row
// layout of simd's kaCodeAt (32 codes a group at 34i+2) for
// q8gemmPackAVX2 to transpose.
func kq8avx2Codes() {
	m0f := byteTable("kac0f", repeated(32, func(int) byte { return 0x0f }))
	m10 := byteTable("kac10", repeated(32, func(int) byte { return 0x10 }))
	m30 := byteTable("kac30", repeated(32, func(int) byte { return 0x30 }))
	group := func(i int) int { return 34*i + 2 }

	name := "q6kaCodesAVX2"
	header(name, "func(dst []byte, blk []byte)",
		name+" sets the 256 codes of the q6_K super-block at blk as bytes at",
		"dst[34i+2:34i+34], 32 codes a group i.")
	d := Load(Param("dst").Base(), GP64())
	b := Load(Param("blk").Base(), GP64())
	lo, hm := YMM(), YMM()
	VMOVDQU(m0f, lo)
	VMOVDQU(m30, hm)
	for h := 0; h < 2; h++ {
		a, bb, hh := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: b, Disp: 64 * h}, a)
		VMOVDQU(Mem{Base: b, Disp: 64*h + 32}, bb)
		VMOVDQU(Mem{Base: b, Disp: 128 + 32*h}, hh)
		for k := 0; k < 4; k++ {
			c, x := YMM(), YMM()
			src := a
			if k%2 == 1 {
				src = bb
			}
			if k < 2 {
				VPAND(src, lo, c)
			} else {
				VPSRLW(U8(4), src, c)
				VPAND(lo, c, c)
			}
			switch k { // the two high bits 2k, 2k+1 of qh to bits 4, 5
			case 0:
				VPSLLW(U8(4), hh, x)
			case 1:
				VPSLLW(U8(2), hh, x)
			case 2:
				VMOVDQA(hh, x)
			case 3:
				VPSRLW(U8(2), hh, x)
			}
			VPAND(hm, x, x)
			VPOR(x, c, c)
			VMOVDQU(c, Mem{Base: d, Disp: group(4*h + k)})
		}
	}
	VZEROUPPER()
	RET()

	name = "q5kaCodesAVX2"
	header(name, "func(dst []byte, blk []byte)",
		name+" sets the 256 codes of the q5_K super-block at blk as bytes at",
		"dst[34i+2:34i+34], 32 codes a group i.")
	d = Load(Param("dst").Base(), GP64())
	b = Load(Param("blk").Base(), GP64())
	lo, hm = YMM(), YMM()
	VMOVDQU(m0f, lo)
	VMOVDQU(m10, hm)
	hh := YMM()
	VMOVDQU(Mem{Base: b, Disp: 16}, hh)
	for c := 0; c < 4; c++ {
		qv := YMM()
		VMOVDQU(Mem{Base: b, Disp: 48 + 32*c}, qv)
		for i := 0; i < 2; i++ {
			x, y := YMM(), YMM()
			if i == 0 {
				VPAND(qv, lo, x)
			} else {
				VPSRLW(U8(4), qv, x)
				VPAND(lo, x, x)
			}
			switch s := 2*c + i; { // bit s of qh to bit 4
			case s < 4:
				VPSLLW(U8(4-s), hh, y)
			case s == 4:
				VMOVDQA(hh, y)
			default:
				VPSRLW(U8(s-4), hh, y)
			}
			VPAND(hm, y, y)
			VPOR(y, x, x)
			VMOVDQU(x, Mem{Base: d, Disp: group(2*c + i)})
		}
	}
	VZEROUPPER()
	RET()
}
