package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The GGML k-quant dot products (docs/weight-formats.md): one weight row of
// packed super-blocks of 256 values against float32 activations. The Go
// kernels unpack each super-block's scales into float32 first, into the 16
// float32 values of scratch at sc (see q4KScales and q6KScales), then
// broadcast them per group.

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

// dotQ4K writes dotQ4KAVX2 (q4KToF32AVX2 with decode): Σ over len(x)/256
// q4_K super-blocks (144 bytes: d, dmin, 12 scale bytes, then 128 bytes of
// nibbles) of Σ_g Σ_l (d·scale_g·q − dmin·min_g)*x for the 8 groups g of 32
// values (group 2c takes the low nibbles of bytes 32c..32c+31, group 2c+1
// their high nibbles); with decode, the values themselves.
func dotQ4K(decode, five bool) {
	name := "dotQ4KAVX2"
	sig, doc := "func(w []byte, x []float32, sc []float32) float32", []string{name + " returns Σ over the len(x)/256 q4_K super-blocks at w (144 bytes",
		"each) of (d·scale_g·q − dmin·min_g)*x for every code q of group g and its",
		"activation x, each value rounded as ggml's dequantize_row_q4_K rounds it.",
		"len(w) must be at least len(x)/256*144; sc is a scratch of at least 16",
		"float32 values."}
	if decode {
		name = "q4KToF32AVX2"
		sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " sets x to the values of the len(x)/256 q4_K super-blocks at w,",
			"bit for bit as ggml's dequantize_row_q4_K computes them. sc is a scratch",
			"of at least 16 float32 values."}
	}
	blockBytes, qsAt := 144, 16
	if five {
		// q5_K: as q4_K with 32 bytes qh at 16 (bit 2c of qh[l] is the fifth
		// bit of value l of group 2c, bit 2c+1 that of group 2c+1) and the
		// nibbles at 48.
		blockBytes, qsAt = 176, 48
		name = "dotQ5KAVX2"
		sig, doc = "func(w []byte, x []float32, sc []float32) float32", []string{name + " is dotQ4KAVX2 for q5_K super-blocks (176 bytes each: a",
			"fifth bit per code from qh)."}
		if decode {
			name = "q5KToF32AVX2"
			sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " is q4KToF32AVX2 for q5_K super-blocks (ggml's",
				"dequantize_row_q5_K, bit for bit)."}
		}
	}
	header(name, sig, doc...)
	mask := kquantConst("q4kmask", 15)
	bit4 := kquantConst("q5kbit4", 16)
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

	kquantLoop(name, w, nb, 3)
	q4KScales(w, s)
	for c := 0; c < 4; c++ {
		slo, mlo, shi, mhi := YMM(), YMM(), YMM(), YMM()
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (2 * c)}, slo)
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (8 + 2*c)}, mlo)
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (2*c + 1)}, shi)
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (8 + 2*c + 1)}, mhi)
		for k := 0; k < 4; k++ {
			lo, hi := q4KCodes(w, qsAt, c, k, m, bit4, five)
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
	kquantNext(name, w, x, nil, nb, blockBytes)
	if !decode {
		Store(hsum(addTree(acc)), ReturnIndex(0))
	}
	VZEROUPPER()
	RET()
}

// kquantLoop starts a k-quant kernel's loop over its nb super-blocks at w
// (name_loop, left for name_done when nb is 0), prefetching the first lines
// of each (prefetchLines).
func kquantLoop(name string, w, nb Register, lines int) {
	countLoop(name, nb)
	prefetchLines(w, lines)
}

// countLoop starts a loop that counts nb down: name_loop, left for
// name_done when nb is 0.
func countLoop(name string, nb Register) {
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
}

// kquantNext ends the loop kquantLoop started, for kernels over float32
// activations: w moves on by a super-block of blockBytes, x by its 256
// activations and xs, where not nil, by their 8 group sums; nb counts
// down. name_done follows.
func kquantNext(name string, w, x, xs, nb Register, blockBytes int) {
	ADDQ(U32(uint32(blockBytes)), w)
	ADDQ(U32(1024), x)
	if xs != nil {
		ADDQ(U32(32), xs)
	}
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
}

// q4KCodes returns the 8 codes l = 8k..8k+7 of groups 2c (lo) and 2c+1
// (hi) of the q4_K super-block at w as float32 lanes: the nibbles of the
// bytes at qsAt+32c+8k, with five the fifth bits of the q5_K qh bytes at
// 16+8k ORed in (bit 2c+i of qh[l] brought to bit4). q4KCodes512 is its
// AVX-512 form.
func q4KCodes(w Register, qsAt, c, k int, m VecVirtual, bit4 Op, five bool) (lo, hi VecVirtual) {
	v := YMM()
	lo, hi = YMM(), YMM()
	VPMOVZXBD(Mem{Base: w, Disp: qsAt + 32*c + 8*k}, v)
	VPAND(m, v, lo)
	VPSRLD(U8(4), v, hi)
	if five {
		h := YMM()
		VPMOVZXBD(Mem{Base: w, Disp: 16 + 8*k}, h)
		for i, dst := range []VecVirtual{lo, hi} {
			t := YMM()
			shiftBits(4-(2*c+i), h, t, false) // bring bit 2c+i to bit 4
			VPAND(bit4, t, t)
			VPOR(t, dst, dst)
		}
	}
	VCVTDQ2PS(lo, lo)
	VCVTDQ2PS(hi, hi)
	return lo, hi
}

// groupDots adds the products lo·xl and hi·xh (two groups' codes and
// their activations) to accL and accH, or with first sets them to those
// products (dotQ4KSums, dotQ4KSums512).
func groupDots(first bool, xl, xh Mem, lo, hi, accL, accH VecVirtual) {
	if first {
		VMULPS(xl, lo, accL)
		VMULPS(xh, hi, accH)
		return
	}
	VFMADD231PS(xl, lo, accL)
	VFMADD231PS(xh, hi, accH)
}

// shiftBits sets dst to src shifted left by sh bits, right by −sh where sh
// is negative, or copied where it is 0: dword lanes, or with words 16-bit
// ones (how the k-quant kernels bring a code's high bits from qh into
// place).
func shiftBits(sh int, src, dst VecVirtual, words bool) {
	shl, shr := VPSLLD, VPSRLD
	if words {
		shl, shr = VPSLLW, VPSRLW
	}
	switch {
	case sh > 0:
		shl(U8(sh), src, dst)
	case sh < 0:
		shr(U8(-sh), src, dst)
	default:
		VMOVDQA(src, dst)
	}
}

// dotQ6K writes dotQ6KAVX2 (q6KToF32AVX2 with decode): Σ over len(x)/256
// q6_K super-blocks (210 bytes: 128 bytes ql, 64 bytes qh, 16 int8 scales,
// d) of Σ_j Σ_{i in group j} (d·scale_j)·(q_i − 32)·x_i for the 16 groups
// of 16 values. In each half h of 128 values, byte l of
// ql[64h:] and ql[64h+32:] holds the low 4 bits of values l, l+64 and
// l+32, l+96 (low, high nibble), and bit pairs 0-1, 2-3, 4-5, 6-7 of
// byte l of qh[32h:] their high 2 bits (values l, l+32, l+64, l+96).
func dotQ6K(decode bool) {
	name := "dotQ6KAVX2"
	sig, doc := "func(w []byte, x []float32, sc []float32) float32", []string{name + " returns Σ over the len(x)/256 q6_K super-blocks at w (210 bytes",
		"each) of (d·scale_j)·(q−32)*x for every 6-bit code q of group j (16",
		"values) and its activation x. len(w) must be at least len(x)/256*210;",
		"sc is a scratch of at least 16 float32 values."}
	if decode {
		name = "q6KToF32AVX2"
		sig, doc = "func(x []float32, w []byte, sc []float32)", []string{name + " sets x to the values (d·scale_j)·(q−32) of the len(x)/256",
			"q6_K super-blocks at w, bit for bit as ggml's dequantize_row_q6_K",
			"computes them. sc is a scratch of at least 16 float32 values."}
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

	kquantLoop(name, w, nb, 4)
	q6KScales(w, s)
	for h := 0; h < 2; h++ {
		for k := 0; k < 4; k++ { // 8 lanes l = 8k..8k+7 of the 32
			q, parts := q6KLoad(w, h, k, false)
			for _, part := range parts {
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
	kquantNext(name, w, x, nil, nb, 210)
	if !decode {
		Store(hsum(addTree(acc)), ReturnIndex(0))
	}
	VZEROUPPER()
	RET()
}

// q6KPart is one of the four 32-value parts of a half (128 values) of a
// q6_K super-block, in the lanes q6KLoad loaded: the low 4 bits of its
// codes are the low (hiNib: high) nibbles of src, the high 2 bits those of
// qh shifted left by shl (right by −shl) to bits 4-5, and its values stand
// at value offset at of the half.
type q6KPart struct {
	src   VecVirtual
	hiNib bool
	shl   int
	at    int
}

// q6KLoad loads the ql and qh bytes of lanes l = 8k..8k+7 (with z, ZMMs of
// lanes 16k..16k+15) of half h of the q6_K super-block at w, zero-extended
// to dwords, and returns qh and the four parts they hold.
func q6KLoad(w Register, h, k int, z bool) (qh VecVirtual, parts []q6KPart) {
	n, vec := 8, YMM
	if z {
		n, vec = 16, ZMM
	}
	a, b, q := vec(), vec(), vec()
	VPMOVZXBD(Mem{Base: w, Disp: 64*h + n*k}, a)       // ql[l]: values l (low), l+64 (high)
	VPMOVZXBD(Mem{Base: w, Disp: 64*h + 32 + n*k}, b)  // ql[l+32]: values l+32, l+96
	VPMOVZXBD(Mem{Base: w, Disp: 128 + 32*h + n*k}, q) // qh[l]
	return q, []q6KPart{{a, false, 4, 0}, {b, false, 2, 32}, {a, true, 0, 64}, {b, true, -2, 96}}
}

// halfBroadcast returns 8 float32 copies of the binary16 at m.
func halfBroadcast(m Mem) VecVirtual {
	h, f := XMM(), YMM()
	VPBROADCASTW(m, h)
	VCVTPH2PS(h, f)
	return f
}

// q4KScales writes, for the q4_K super-block at w, sc[g] = d·scale_g and
// sc[8+g] = dmin·min_g (g = 0..7) to the scratch at s: the 6-bit scales
// and mins of the 12 bytes at w+4 unpacked four at a time (bytes 0-3:
// scales 0-3 and the top bits of scales 4-7; bytes 4-7: mins 0-3 and the
// top bits of mins 4-7; bytes 8-11: the low nibbles of scales and mins
// 4-7), each product rounded once as ggml's get_scale_min_k4 and
// dequantize_row_q4_K compute it.
func q4KScales(w, s Register) (scales, mins VecVirtual) {
	a, b, c := q4KPacked(w)
	t := GP32()
	lo, hi := GP32(), GP32()
	vs, vm := XMM(), XMM()
	q4KLow(a, lo)
	q4KHigh(a, c, 0, hi, t)
	VMOVD(lo, vs)
	VPINSRD(U8(1), hi, vs, vs)
	q4KLow(b, lo)
	q4KHigh(b, c, 4, hi, t)
	VMOVD(lo, vm)
	VPINSRD(U8(1), hi, vm, vm)
	ys, ym := YMM(), YMM()
	VPMOVZXBD(vs, ys)
	VPMOVZXBD(vm, ym)
	VCVTDQ2PS(ys, ys)
	VCVTDQ2PS(ym, ym)
	VMULPS(halfBroadcast(Mem{Base: w}), ys, ys)
	VMULPS(halfBroadcast(Mem{Base: w, Disp: 2}), ym, ym)
	VMOVUPS(ys, Mem{Base: s})
	VMOVUPS(ym, Mem{Base: s, Disp: 32})
	return ys, ym
}

// q4KPacked loads the 12 bytes of 6-bit scales and mins of the q4_K (q5_K)
// super-block at w (bytes 4..15, ggml's get_scale_min_k4 packing) as the
// dwords a (scales 0..3, and the top bits of scales 4..7), b (the same for
// the mins) and c (the low nibbles of scales and mins 4..7). q4KLow and
// q4KHigh take the values out, four bytes at a time.
func q4KPacked(w Register) (a, b, c GPVirtual) {
	a, b, c = GP32(), GP32(), GP32()
	MOVL(Mem{Base: w, Disp: 4}, a)
	MOVL(Mem{Base: w, Disp: 8}, b)
	MOVL(Mem{Base: w, Disp: 12}, c)
	return a, b, c
}

// q4KLow sets r to scales 0..3 (src a of q4KPacked) or mins 0..3 (src b),
// a byte each: src & 0x3f3f3f3f.
func q4KLow(src, r GPVirtual) {
	MOVL(src, r)
	ANDL(U32(0x3f3f3f3f), r)
}

// q4KHigh sets r to scales 4..7 (src a, shift 0) or mins 4..7 (src b,
// shift 4), a byte each: ((c >> shift) & 0x0f0f0f0f) | ((src >> 2) &
// 0x30303030), with t a scratch.
func q4KHigh(src, c GPVirtual, shift int, r, t GPVirtual) {
	MOVL(c, r)
	if shift > 0 {
		SHRL(U8(shift), r)
	}
	ANDL(U32(0x0f0f0f0f), r)
	MOVL(src, t)
	SHRL(U8(2), t)
	ANDL(U32(0x30303030), t)
	ORL(t, r)
}

// q6KScales writes sc[j] = d·scale_j (j = 0..15) for the q6_K super-block
// at w to the scratch at s.
func q6KScales(w, s Register) {
	y0, y1 := YMM(), YMM()
	VPMOVSXBD(Mem{Base: w, Disp: 192}, y0)
	VPMOVSXBD(Mem{Base: w, Disp: 200}, y1)
	VCVTDQ2PS(y0, y0)
	VCVTDQ2PS(y1, y1)
	d := halfBroadcast(Mem{Base: w, Disp: 208})
	VMULPS(d, y0, y0)
	VMULPS(d, y1, y1)
	VMOVUPS(y0, Mem{Base: s})
	VMOVUPS(y1, Mem{Base: s, Disp: 32})
}

// dotQ4KSums writes dotQ4KSumsAVX2 (dotQ5KSumsAVX2 with five): the q4_K
// (q5_K) dot product with the scales taken out of the inner loop, as
// llama.cpp's k-quant dots do: Σ_g d·scale_g·Σ_{l in g} q_l·x_l −
// Σ_g dmin·min_g·xs_g, where xs holds each 32-value group's activation sum
// (computed once per activation row by the caller and shared by every
// weight row). It rounds differently from decoding each value first.
func dotQ4KSums(five bool) {
	name, blockBytes, qsAt := "dotQ4KSumsAVX2", 144, 16
	if five {
		name, blockBytes, qsAt = "dotQ5KSumsAVX2", 176, 48
	}
	header(name, "func(w []byte, x []float32, xs []float32, sc []float32) float32",
		name+" returns Σ over the len(x)/256 super-blocks at w of",
		"Σ_g d·scale_g·Σ_l q_l·x_l − Σ_g dmin·min_g·xs[g] over their 8 groups g of",
		"32 values (xs: each group's activation sum, len(x)/32 of them). sc is a",
		"scratch of at least 16 float32 values.")
	mask := kquantConst("q4kmask", 15)
	bit4 := kquantConst("q5kbit4", 16)
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	xs := Load(Param("xs").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(8), nb)
	tot := zeros(4)
	minacc := zeros(1)[0]
	m := YMM()
	VMOVDQU(mask, m)

	kquantLoop(name, w, nb, 3)
	_, mins := q4KScales(w, s)
	VFMADD231PS(Mem{Base: xs}, mins, minacc)
	for c := 0; c < 4; c++ {
		accL, accH := YMM(), YMM()
		for k := 0; k < 4; k++ {
			lo, hi := q4KCodes(w, qsAt, c, k, m, bit4, five)
			xl, xh := Mem{Base: x, Disp: 4 * (64*c + 8*k)}, Mem{Base: x, Disp: 4 * (64*c + 32 + 8*k)}
			groupDots(k == 0, xl, xh, lo, hi, accL, accH)
		}
		slo, shi := YMM(), YMM()
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (2 * c)}, slo)
		VBROADCASTSS(Mem{Base: s, Disp: 4 * (2*c + 1)}, shi)
		VFMADD231PS(slo, accL, tot[c%2])
		VFMADD231PS(shi, accH, tot[2+c%2])
	}
	kquantNext(name, w, x, xs, nb, blockBytes)
	r := addTree(tot)
	VSUBPS(minacc, r, r)
	Store(hsum(r), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// groupSums32 writes groupSums32AVX2: xs[g] = the sum of x[32g:32g+32] for
// g < len(xs) (four 8-lane vectors added pairwise, then across lanes).
func groupSums32() {
	name := "groupSums32AVX2"
	header(name, "func(xs []float32, x []float32)",
		name+" sets xs[g] to the sum of x[32g:32g+32] for g < len(xs): the four",
		"8-value vectors added as (v0+v2)+(v1+v3), then the 8 lanes as hsum adds",
		"them. len(x) must be at least 32*len(xs).")
	xs := Load(Param("xs").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("xs").Len(), GP64())
	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	v := make([]VecVirtual, 4)
	for i := range v {
		v[i] = YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, v[i])
	}
	VMOVSS(hsum(addTree(v)), Mem{Base: xs})
	ADDQ(U32(4), xs)
	ADDQ(U32(128), x)
	DECQ(n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// lutBlocks writes lutBlocksAVX2, the decoder of the 4-bit table types
// (iq4_nl's levels in iq4_xs, mxfp4's doubled e2m1 values): len(sc) blocks
// of 32 values, block b's 16 code bytes at codes+b*stride laid out as ggml's
// (value j < 16 in the low nibble of byte j, value j+16 in its high
// nibble), value = sc[b]·table[code], one rounding (ggml's products).
func lutBlocks() {
	name := "lutBlocksAVX2"
	header(name, "func(dst []float32, codes []byte, stride int, sc []float32, table *[16]int8)",
		name+" sets dst[32b+j] = sc[b]*table[code j of block b] for b < len(sc),",
		"block b's 16 code bytes at codes[b*stride:] (value j < 16 in the low",
		"nibble of byte j, value j+16 in its high nibble). len(dst) must be at",
		"least 32*len(sc) and len(codes) at least (len(sc)−1)*stride+16.")
	m := GLOBL("nib16", RODATA|NOPTR)
	for j := 0; j < 4; j++ {
		DATA(4*j, U32(0x0f0f0f0f))
	}
	d := Load(Param("dst").Base(), GP64())
	c := Load(Param("codes").Base(), GP64())
	stride := Load(Param("stride"), GP64())
	s := Load(Param("sc").Base(), GP64())
	n := Load(Param("sc").Len(), GP64())
	tbl, m15 := XMM(), XMM()
	VMOVDQU(Mem{Base: Load(Param("table"), GP64())}, tbl)
	VMOVDQU(m, m15)
	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	q, lo, hi := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: c}, q)
	VPAND(m15, q, lo)
	VPSRLW(U8(4), q, hi)
	VPAND(m15, hi, hi)
	VPSHUFB(lo, tbl, lo)
	VPSHUFB(hi, tbl, hi)
	f := YMM()
	VBROADCASTSS(Mem{Base: s}, f)
	for i, src := range []VecVirtual{lo, hi} {
		a, t, b := YMM(), XMM(), YMM()
		VPMOVSXBD(src, a)
		VPSRLDQ(U8(8), src, t)
		VPMOVSXBD(t, b)
		VCVTDQ2PS(a, a)
		VCVTDQ2PS(b, b)
		VMULPS(f, a, a)
		VMULPS(f, b, b)
		VMOVUPS(a, Mem{Base: d, Disp: 64 * i})
		VMOVUPS(b, Mem{Base: d, Disp: 64*i + 32})
	}
	ADDQ(stride, c)
	ADDQ(U32(4), s)
	ADDQ(U32(128), d)
	DECQ(n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// q23K writes q2KToF32AVX2 (q3KToF32AVX2 with three): the q2_K (q3_K)
// row decoders. The Go caller unpacks 32 float32 values per super-block
// into sc (q2_K: d·scale_j at j, dmin·min_j at 16+j; q3_K: d·(scale_j−32)
// at j) for the 16 groups of 16 values. Value l of the 32-byte run of half
// n, bit pair j, group half h is code (qs[32n+16h+l] >> 2j) & 3 for value
// 128n+32j+16h+l; q2_K decodes it as float32(d·scale·q) − dmin·min, q3_K
// as d·(scale−32)·(q − 4 + 4·bit), bit being bit 4n+j of hmask[16h+l].
func q23K(three bool) {
	name, blockBytes, qsAt := "q2KToF32AVX2", 84, 16
	if three {
		name, blockBytes, qsAt = "q3KToF32AVX2", 110, 32
	}
	header(name, "func(dst []float32, w []byte, sc []float32)",
		name+" sets dst to the values of the len(dst)/256 super-blocks at w, with",
		"each super-block's 16 group scales (and, for q2_K, 16 offsets) unpacked",
		"into 32 float32 values of sc per super-block, bit for bit as ggml's",
		"dequantize_row computes them. len(w) and len(sc) must hold len(dst)/256",
		"super-blocks.")
	m3 := kquantConst("k2bits3", 3)
	one := kquantConst("k2one", 1)
	four := kquantConst("k2four", 4)
	d := Load(Param("dst").Base(), GP64())
	w := Load(Param("w").Base(), GP64())
	s := Load(Param("sc").Base(), GP64())
	nb := Load(Param("dst").Len(), GP64())
	SHRQ(U8(8), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for n := 0; n < 2; n++ {
		for j := 0; j < 4; j++ {
			for h := 0; h < 2; h++ {
				is := 8*n + 2*j + h
				dl, ml := YMM(), YMM()
				VBROADCASTSS(Mem{Base: s, Disp: 4 * is}, dl)
				if !three {
					VBROADCASTSS(Mem{Base: s, Disp: 4 * (16 + is)}, ml)
				}
				for k := 0; k < 2; k++ {
					v := YMM()
					VPMOVZXBD(Mem{Base: w, Disp: qsAt + 32*n + 16*h + 8*k}, v)
					if j > 0 {
						VPSRLD(U8(2*j), v, v)
					}
					VPAND(m3, v, v)
					if three {
						hb := YMM()
						VPMOVZXBD(Mem{Base: w, Disp: 16*h + 8*k}, hb)
						if b := 4*n + j; b > 0 {
							VPSRLD(U8(b), hb, hb)
						}
						VPAND(one, hb, hb)
						VPSLLD(U8(2), hb, hb)
						VPADDD(hb, v, v)
						VPSUBD(four, v, v)
					}
					VCVTDQ2PS(v, v)
					VMULPS(dl, v, v)
					if !three {
						VSUBPS(ml, v, v)
					}
					VMOVUPS(v, Mem{Base: d, Disp: 4 * (128*n + 32*j + 16*h + 8*k)})
				}
			}
		}
	}
	ADDQ(U32(1024), d)
	ADDQ(U32(blockBytes), w)
	ADDQ(U32(128), s)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
