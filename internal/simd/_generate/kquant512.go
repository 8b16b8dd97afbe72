package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The k-quant kernels of kquant.go on 512-bit registers: 16 codes a
// vector, so that a q4_K/q5_K group of 32 values takes two and a q6_K
// group of 16 one. The decoders compute every value with the same exact
// conversion, the same rounded multiply and (q4_K, q5_K) the same rounded
// subtract as the AVX2 kernels and ggml, so they agree bit for bit; the dot
// products keep other partial sums than the AVX2 ones and agree with the
// Go twins within the dot products' tolerance. The scales are unpacked per
// super-block into the 16 float32 values of scratch at sc, in the AVX2
// kernels' layout, and taken from there by embedded broadcasts. They need
// AVX-512 F, BW (the masked word broadcasts) and VL.

func kquant512() {
	for _, five := range []bool{false, true} {
		dotQ4KSums512(five)
		q4KToF32512(five)
	}
	dotQ6K512(false)
	dotQ6K512(true)
}

// halfMasks returns k registers with the low and the high 8 bits of 16 set.
func halfMasks() (lo, hi Op) {
	r := GP32()
	lo, hi = K(), K()
	MOVL(U32(0x00ff), r)
	KMOVW(r, lo)
	MOVL(U32(0xff00), r)
	KMOVW(r, hi)
	return lo, hi
}

// q4KScales512 writes sc[g] = d·scale_g and sc[8+g] = dmin·min_g (g < 8)
// for the q4_K (q5_K) super-block at w to the scratch at s, as q4KScales
// does, and returns them in one ZMM (each product one rounding, as ggml's).
// The bytes are put together with instructions of AVX-512 F and VL only
// (VMOVD and unpacks, not VPINSRD, whose EVEX form is AVX-512 DQ).
func q4KScales512(w, s Register, kLo, kHi Op) VecVirtual {
	a, b, c := q4KPacked(w)
	t := GP32()
	part := func(src GPVirtual, shift int) GPVirtual {
		// q4KLow for shift < 0, else q4KHigh
		r := GP32()
		if shift < 0 {
			q4KLow(src, r)
		} else {
			q4KHigh(src, c, shift, r, t)
		}
		return r
	}
	v := []VecVirtual{XMM(), XMM(), XMM(), XMM()}
	for i, r := range []GPVirtual{part(a, -1), part(a, 0), part(b, -1), part(b, 4)} {
		VMOVD(r, v[i])
	}
	VPUNPCKLDQ(v[1], v[0], v[0]) // scales 0-7
	VPUNPCKLDQ(v[3], v[2], v[2]) // mins 0-7
	VPUNPCKLQDQ(v[2], v[0], v[0])
	z := ZMM()
	VPMOVZXBD(v[0], z)
	VCVTDQ2PS(z, z)
	h := YMM()
	VPBROADCASTW_Z(Mem{Base: w}, kLo, h) // d in words 0-7
	VPBROADCASTW(Mem{Base: w, Disp: 2}, kHi, h)
	f := ZMM()
	VCVTPH2PS(h, f)
	VMULPS(f, z, z)
	VMOVUPS(z, Mem{Base: s})
	return z
}

// q4KCodes512 returns the 16 codes l = 16k..16k+15 of groups 2c (lo) and
// 2c+1 (hi) of the super-block at w as float32 lanes: the nibbles of the
// bytes at qsAt+32c+16k, with five the fifth bits from the qh values hb
// (bytes 16+16k.. zero-extended) ORed in.
func q4KCodes512(w Register, qsAt, c, k int, mask, bit4 VecVirtual, hb VecVirtual) (lo, hi VecVirtual) {
	v := ZMM()
	lo, hi = ZMM(), ZMM()
	VPMOVZXBD(Mem{Base: w, Disp: qsAt + 32*c + 16*k}, v)
	VPANDD(mask, v, lo)
	VPSRLD(U8(4), v, hi)
	if hb != nil {
		for i, dst := range []VecVirtual{lo, hi} {
			t := hb
			switch sh := 4 - (2*c + i); { // bring bit 2c+i to bit 4
			case sh > 0:
				t = ZMM()
				VPSLLD(U8(sh), hb, t)
			case sh < 0:
				t = ZMM()
				VPSRLD(U8(-sh), hb, t)
			}
			VPTERNLOGD(U8(0xf8), bit4, t, dst) // dst | (t & bit4)
		}
	}
	VCVTDQ2PS(lo, lo)
	VCVTDQ2PS(hi, hi)
	return lo, hi
}

// q4KLayout returns a q4_K (five: q5_K) kernel's super-block size and the
// offset of its nibbles.
func q4KLayout(five bool) (blockBytes, qsAt int) {
	if five {
		return 176, 48
	}
	return 144, 16
}

// dotQ4KSums512 writes dotQ4KSumsAVX512 (dotQ5KSumsAVX512 with five):
// dotQ4KSums's arithmetic on 16 lanes. The min terms are the high 8 lanes
// of their accumulator (the low 8 accumulate scale terms nobody needs);
// only those are taken off at the end. (A masked multiply-add reading xs
// from 32 bytes early, lanes 0-7 masked off, ran as fast as this in
// BenchmarkMatVecSets but made decoding a Q4_K_M model on Zen 4 0.63 times
// as fast as with the AVX2 kernels, against 1.11 now.)
func dotQ4KSums512(five bool) {
	name := "dotQ4KSumsAVX512"
	if five {
		name = "dotQ5KSumsAVX512"
	}
	blockBytes, qsAt := q4KLayout(five)
	header(name, "func(w []byte, x []float32, xs []float32, sc []float32) float32",
		name+" returns what "+name[:len(name)-6]+"AVX2 does (Σ over the len(x)/256",
		"super-blocks at w of Σ_g d·scale_g·Σ_l q_l·x_l − Σ_g dmin·min_g·xs[g]) with",
		"other partial sums. sc is a scratch of at least 16 float32 values.")
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	xs := Load(Param("xs").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	kLo, kHi := halfMasks()
	mask := splat32(15)
	var bit4 VecVirtual
	if five {
		bit4 = splat32(16)
	}
	tot := zeros512(4)
	minacc := zeros512(1)[0]

	kquantLoop(name, w, nb, 3)
	sz := q4KScales512(w, s, kLo, kHi)
	xv := ZMM()
	VBROADCASTF64X4(Mem{Base: xs}, xv) // xs[g] in lanes g and 8+g
	VFMADD231PS(xv, sz, minacc)        // lanes 8-15: dmin·min_g·xs[g]
	var hb [2]VecVirtual
	if five {
		for k := range hb {
			hb[k] = ZMM()
			VPMOVZXBD(Mem{Base: w, Disp: 16 + 16*k}, hb[k])
		}
	}
	for c := 0; c < 4; c++ {
		accL, accH := ZMM(), ZMM()
		for k := 0; k < 2; k++ {
			lo, hi := q4KCodes512(w, qsAt, c, k, mask, bit4, hb[k])
			xl, xh := Mem{Base: x, Disp: 4 * (64*c + 16*k)}, Mem{Base: x, Disp: 4 * (64*c + 32 + 16*k)}
			groupDots(k == 0, xl, xh, lo, hi, accL, accH)
		}
		VFMADD231PS_BCST(Mem{Base: s, Disp: 4 * (2 * c)}, accL, tot[c%2])
		VFMADD231PS_BCST(Mem{Base: s, Disp: 4 * (2*c + 1)}, accH, tot[2+c%2])
	}
	kquantNext(name, w, x, xs, nb, blockBytes)
	r := addTree(tot)
	VSUBPS(minacc, r, kHi, r) // lanes 0-7 of minacc hold d·scale_g·xs[g]
	Store(hsum512(r), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// q4KToF32512 writes q4KToF32AVX512 (q5KToF32AVX512 with five): every
// value float32(d·scale_g·q) − dmin·min_g, two roundings, as ggml's
// dequantize_row_q4_K (q5_K) and q4KToF32AVX2 compute it.
func q4KToF32512(five bool) {
	name, ggml := "q4KToF32AVX512", "dequantize_row_q4_K"
	if five {
		name, ggml = "q5KToF32AVX512", "dequantize_row_q5_K"
	}
	blockBytes, qsAt := q4KLayout(five)
	header(name, "func(x []float32, w []byte, sc []float32)",
		name+" sets x to the values of the len(x)/256 super-blocks at w, bit",
		"for bit as ggml's "+ggml+" computes them. sc is a scratch of at",
		"least 16 float32 values.")
	x := Load(Param("x").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	kLo, kHi := halfMasks()
	mask := splat32(15)
	var bit4 VecVirtual
	if five {
		bit4 = splat32(16)
	}

	kquantLoop(name, w, nb, 3)
	q4KScales512(w, s, kLo, kHi)
	var hb [2]VecVirtual
	if five {
		for k := range hb {
			hb[k] = ZMM()
			VPMOVZXBD(Mem{Base: w, Disp: 16 + 16*k}, hb[k])
		}
	}
	for c := 0; c < 4; c++ {
		for k := 0; k < 2; k++ {
			lo, hi := q4KCodes512(w, qsAt, c, k, mask, bit4, hb[k])
			for i, v := range []VecVirtual{lo, hi} {
				g := 2*c + i
				VMULPS_BCST(Mem{Base: s, Disp: 4 * g}, v, v)
				VSUBPS_BCST(Mem{Base: s, Disp: 4 * (8 + g)}, v, v)
				VMOVUPS(v, Mem{Base: x, Disp: 4 * (64*c + 32*i + 16*k)})
			}
		}
	}
	kquantNext(name, w, x, nil, nb, blockBytes)
	VZEROUPPER()
	RET()
}

// dotQ6K512 writes dotQ6KAVX512 (q6KToF32AVX512 with decode): dotQ6K's
// arithmetic on 16 lanes, a vector per group of 16 values, every value
// (d·scale_j)·(q−32) rounded once as ggml's dequantize_row_q6_K rounds it;
// the dot product multiplies it with x into 8 accumulators.
func dotQ6K512(decode bool) {
	name := "dotQ6KAVX512"
	sig, doc := "func(w []byte, x []float32, sc []float32) float32", []string{name + " returns what dotQ6KAVX2 does (Σ over the len(x)/256 q6_K",
		"super-blocks at w of (d·scale_j)·(q−32)*x) with other partial sums. sc is",
		"a scratch of at least 16 float32 values."}
	if decode {
		name = "q6KToF32AVX512"
		sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " sets x to the values (d·scale_j)·(q−32) of the len(x)/256",
			"q6_K super-blocks at w, bit for bit as ggml's dequantize_row_q6_K",
			"computes them. sc is a scratch of at least 16 float32 values."}
	}
	header(name, sig, doc...)
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	lo4, hi2, off := splat32(15), splat32(48), splat32(32)
	var acc []VecVirtual
	if !decode {
		acc = zeros512(8)
	}

	kquantLoop(name, w, nb, 4)
	// sc[j] = d·scale_j
	sz := ZMM()
	VPMOVSXBD(Mem{Base: w, Disp: 192}, sz)
	VCVTDQ2PS(sz, sz)
	VMULPS(q80Scale512(Mem{Base: w, Disp: 208}), sz, sz)
	VMOVUPS(sz, Mem{Base: s})
	for h := 0; h < 2; h++ {
		for k := 0; k < 2; k++ { // 16 lanes l = 16k..16k+15 of the 32
			q, parts := q6KLoad(w, h, k, true)
			for p, part := range parts {
				v := ZMM()
				if part.hiNib {
					VPSRLD(U8(4), part.src, v)
				} else {
					VPANDD(lo4, part.src, v)
				}
				t := q
				switch {
				case part.shl > 0:
					t = ZMM()
					VPSLLD(U8(part.shl), q, t)
				case part.shl < 0:
					t = ZMM()
					VPSRLD(U8(-part.shl), q, t)
				}
				VPTERNLOGD(U8(0xf8), hi2, t, v) // v | (t & 48)
				VPSUBD(off, v, v)
				VCVTDQ2PS(v, v)
				i := part.at + 16*k // value index within the half
				VMULPS_BCST(Mem{Base: s, Disp: 4 * (8*h + i/16)}, v, v)
				if decode {
					VMOVUPS(v, Mem{Base: x, Disp: 4 * (128*h + i)})
					continue
				}
				VFMADD231PS(Mem{Base: x, Disp: 4 * (128*h + i)}, v, acc[p+4*k])
			}
		}
	}
	kquantNext(name, w, x, nil, nb, 210)
	if !decode {
		Store(hsum512(addTree(acc)), ReturnIndex(0))
	}
	VZEROUPPER()
	RET()
}
