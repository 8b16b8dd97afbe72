package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The GGML k-quant dot products (docs/weight-formats.md): one weight row of
// packed super-blocks of 256 values against float32 activations. The Go
// caller (kquant_amd64.go) unpacks each super-block's scales into float32
// first, so the kernels only decode codes: sc holds, per super-block, 16
// float32 values whose meaning depends on the type (see each kernel).

// kquantConsts holds the constants kquantConst made, by name.
var kquantConsts = map[string]Mem{}

// kquantConst returns a RODATA vector of 8 copies of v (made once per name).
func kquantConst(name string, v uint32) Mem {
	if m, ok := kquantConsts[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	kquantConsts[name] = m
	for j := 0; j < 8; j++ {
		DATA(4*j, U32(v))
	}
	return m
}

// dotQ4K writes dotQ4KAVX2: Σ over len(x)/256 q4_K super-blocks (144
// bytes: d, dmin, 12 scale bytes, then 128 bytes of nibbles) of
// Σ_g Σ_l (sc[2g]*q − sc[2g+1])*x, where sc[2g] = d·scale_g and
// sc[2g+1] = dmin·min_g for the 8 groups g of 32 values (group 2c takes the
// low nibbles of bytes 32c..32c+31, group 2c+1 their high nibbles).
func dotQ4K(decode bool) {
	name := "dotQ4KAVX2"
	sig, doc := "func(w []byte, x []float32, sc []float32) float32", []string{name + " returns Σ over the len(x)/256 q4_K super-blocks at w (144 bytes",
		"each) of (sc[16b+2g]*q − sc[16b+2g+1])*x for every code q of group g of",
		"super-block b and its activation x, each value rounded after the product",
		"and after the difference. len(w) must be at least len(x)/256*144 and",
		"len(sc) at least len(x)/256*16."}
	if decode {
		name = "q4KToF32AVX2"
		sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " sets x to the values of the len(x)/256 q4_K super-blocks at w:",
			"sc[16b+2g]*q − sc[16b+2g+1] for every code q of group g of super-block b,",
			"rounded after the product and after the difference (ggml's",
			"dequantize_row_q4_K, bit for bit, given ggml's products as sc)."}
	}
	header(name, sig, doc...)
	mask := kquantConst("q4kmask", 15)
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	var acc []VecVirtual
	if !decode {
		acc = zeros(4)
	}
	m := YMM()
	VMOVDQU(mask, m)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	prefetchLine(Mem{Base: w})
	prefetchLine(Mem{Base: w, Disp: 64})
	prefetchLine(Mem{Base: w, Disp: 128})
	for c := 0; c < 4; c++ {
		slo, mlo, shi, mhi := YMM(), YMM(), YMM(), YMM()
		VBROADCASTSS(Mem{Base: s, Disp: 16 * c}, slo)
		VBROADCASTSS(Mem{Base: s, Disp: 16*c + 4}, mlo)
		VBROADCASTSS(Mem{Base: s, Disp: 16*c + 8}, shi)
		VBROADCASTSS(Mem{Base: s, Disp: 16*c + 12}, mhi)
		for k := 0; k < 4; k++ {
			v, lo, hi := YMM(), YMM(), YMM()
			VPMOVZXBD(Mem{Base: w, Disp: 16 + 32*c + 8*k}, v)
			VPAND(m, v, lo)
			VPSRLD(U8(4), v, hi)
			VCVTDQ2PS(lo, lo)
			VCVTDQ2PS(hi, hi)
			VMULPS(slo, lo, lo) // lo = slo*lo − mlo, rounded twice as ggml does
			VSUBPS(mlo, lo, lo)
			VMULPS(shi, hi, hi)
			VSUBPS(mhi, hi, hi)
			if decode {
				VMOVUPS(lo, Mem{Base: x, Disp: 4 * (64*c + 8*k)})
				VMOVUPS(hi, Mem{Base: x, Disp: 4 * (64*c + 32 + 8*k)})
				continue
			}
			VFMADD231PS(Mem{Base: x, Disp: 4 * (64*c + 8*k)}, lo, acc[k%2])
			VFMADD231PS(Mem{Base: x, Disp: 4 * (64*c + 32 + 8*k)}, hi, acc[2+k%2])
		}
	}
	ADDQ(U32(144), w)
	ADDQ(U32(1024), x)
	ADDQ(U32(64), s)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	if !decode {
		Store(hsum(addTree(acc)), ReturnIndex(0))
	}
	VZEROUPPER()
	RET()
}

// dotQ6K writes dotQ6KAVX2: Σ over len(x)/256 q6_K super-blocks (210
// bytes: 128 bytes ql, 64 bytes qh, 16 int8 scales, d) of
// Σ_j sc[j]·Σ_{i in group j} (q_i − 32)·x_i, where sc[j] = d·scale_j for
// the 16 groups of 16 values. In each half h of 128 values, byte l of
// ql[64h:] and ql[64h+32:] holds the low 4 bits of values l, l+64 and
// l+32, l+96 (low, high nibble), and bit pairs 0-1, 2-3, 4-5, 6-7 of
// byte l of qh[32h:] their high 2 bits (values l, l+32, l+64, l+96).
func dotQ6K(decode bool) {
	name := "dotQ6KAVX2"
	sig, doc := "func(w []byte, x []float32, sc []float32) float32", []string{name + " returns Σ over the len(x)/256 q6_K super-blocks at w (210 bytes",
		"each) of sc[16b+j]*(q−32)*x for every 6-bit code q of group j (16 values)",
		"of super-block b and its activation x. len(w) must be at least",
		"len(x)/256*210 and len(sc) at least len(x)/256*16."}
	if decode {
		name = "q6KToF32AVX2"
		sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " sets x to the values sc[16b+j]*(q−32) of the len(x)/256 q6_K",
			"super-blocks at w (ggml's dequantize_row_q6_K, bit for bit, given",
			"ggml's products d·scale as sc)."}
	}
	header(name, sig, doc...)
	m15 := kquantConst("q6kmask15", 15)
	m48 := kquantConst("q6kmask48", 48)
	k32 := kquantConst("q6k32", 32)
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	var acc []VecVirtual
	if !decode {
		acc = zeros(4)
	}
	lo4, hi2, off := YMM(), YMM(), YMM()
	VMOVDQU(m15, lo4)
	VMOVDQU(m48, hi2)
	VMOVDQU(k32, off)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	prefetchLine(Mem{Base: w})
	prefetchLine(Mem{Base: w, Disp: 64})
	prefetchLine(Mem{Base: w, Disp: 128})
	prefetchLine(Mem{Base: w, Disp: 192})
	for h := 0; h < 2; h++ {
		for k := 0; k < 4; k++ { // 8 lanes l = 8k..8k+7 of the 32
			a, b, q := YMM(), YMM(), YMM()
			VPMOVZXBD(Mem{Base: w, Disp: 64*h + 8*k}, a)       // ql[l]: values l (low), l+64 (high)
			VPMOVZXBD(Mem{Base: w, Disp: 64*h + 32 + 8*k}, b)  // ql[l+32]: values l+32, l+96
			VPMOVZXBD(Mem{Base: w, Disp: 128 + 32*h + 8*k}, q) // qh[l]
			// value index within the half, and the shifts that bring its
			// two high bits to bits 4-5
			for _, part := range []struct {
				src   VecVirtual
				hiNib bool
				shl   int // qh << shl (or >> −shl) & 48
				at    int // value offset within the half
			}{{a, false, 4, 0}, {b, false, 2, 32}, {a, true, 0, 64}, {b, true, -2, 96}} {
				v, t := YMM(), YMM()
				if part.hiNib {
					VPSRLD(U8(4), part.src, v)
				} else {
					VPAND(lo4, part.src, v)
				}
				switch {
				case part.shl > 0:
					VPSLLD(U8(part.shl), q, t)
					VPAND(hi2, t, t)
				case part.shl < 0:
					VPSRLD(U8(-part.shl), q, t)
					VPAND(hi2, t, t)
				default:
					VPAND(hi2, q, t)
				}
				VPOR(t, v, v)
				VPSUBD(off, v, v)
				VCVTDQ2PS(v, v)
				i := part.at + 8*k // value index within the half
				g := YMM()
				VBROADCASTSS(Mem{Base: s, Disp: 4 * (8*h + i/16)}, g)
				VMULPS(g, v, v)
				if decode {
					VMOVUPS(v, Mem{Base: x, Disp: 4 * (128*h + i)})
					continue
				}
				VFMADD231PS(Mem{Base: x, Disp: 4 * (128*h + i)}, v, acc[(part.at/32)%4])
			}
		}
	}
	ADDQ(U32(210), w)
	ADDQ(U32(1024), x)
	ADDQ(U32(64), s)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	if !decode {
		Store(hsum(addTree(acc)), ReturnIndex(0))
	}
	VZEROUPPER()
	RET()
}
