package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// quantizeQ80AVX2 writes simd.QuantizeQ80's kernel: per block of 32
// float32, amax is the largest of the magnitudes' bits, NaNs left out
// (an unsigned integer maximum of non-negative floats is their float
// maximum), d = amax/127 and id = 127/amax (0 for amax = 0) in float32,
// and every code is the twin's nearestInt8(x·id): the product rounded to
// float32, plus 1.5·2^23, its low 23 bits less 2^22, clamped to
// [−128, 127] as int32, then packed to bytes in order. d is stored as
// binary16 rounded to nearest even (VCVTPS2PH, as F32ToF16Scalar).
func quantizeQ80AVX2() {
	name := "quantizeQ80AVX2"
	header(name, "func(dst []byte, x []float32, nb int)",
		name+" sets dst to the nb Q8_0 blocks of the 32·nb values at x, as",
		"simd's twin quantizes them, byte for byte.")
	dst := Load(Param("dst").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	nb := Load(Param("nb"), GP64())
	c := dwordTable("q8qconst", 0x7fffffff, 0x7f800000, 0x42fe0000, 0x4b400000, 0x007fffff, 0x00400000, 0xffffff80, 127,
		0, 4, 1, 5, 2, 6, 3, 7)
	abs, inf := YMM(), YMM()
	VPBROADCASTD(c.Offset(0), abs)
	VPBROADCASTD(c.Offset(4), inf)
	perm := YMM()
	VMOVDQU(c.Offset(32), perm)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	var v, a [4]VecVirtual
	for i := range v {
		v[i], a[i] = YMM(), YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, v[i])
		VPAND(abs, v[i], a[i])
		m := YMM()
		VPCMPGTD(inf, a[i], m) // NaN
		VPANDN(a[i], m, a[i])
	}
	VPMAXUD(a[1], a[0], a[0])
	VPMAXUD(a[3], a[2], a[2])
	VPMAXUD(a[2], a[0], a[0])
	mx, t := XMM(), XMM()
	VEXTRACTI128(U8(1), a[0], mx)
	VPMAXUD(a[0].AsX(), mx, mx)
	VPSHUFD(U8(0x4e), mx, t)
	VPMAXUD(t, mx, mx)
	VPSHUFD(U8(0xb1), mx, t)
	VPMAXUD(t, mx, mx) // amax in every dword
	k := XMM()
	VBROADCASTSS(c.Offset(8), k) // 127
	d := XMM()
	VDIVSS(k, mx, d) // amax/127
	VCVTPS2PH(U8(0), d, d)
	g := GP32()
	VMOVD(d, g)
	MOVW(g.As16(), Mem{Base: dst})
	id := XMM()
	VDIVPS(mx, k, id) // 127/amax
	z := XMM()
	VPXOR(z, z, z)
	VPCMPEQD(z, mx, z)
	VPANDN(id, z, id) // 0 where amax = 0
	idy := YMM()
	VPBROADCASTD(id, idy)
	magic, low, half, lo, hi := YMM(), YMM(), YMM(), YMM(), YMM()
	VPBROADCASTD(c.Offset(12), magic)
	VPBROADCASTD(c.Offset(16), low)
	VPBROADCASTD(c.Offset(20), half)
	VPBROADCASTD(c.Offset(24), lo)
	VPBROADCASTD(c.Offset(28), hi)
	for i := range v {
		VMULPS(idy, v[i], v[i])
		VADDPS(magic, v[i], v[i])
		VPAND(low, v[i], v[i])
		VPSUBD(half, v[i], v[i])
		VPMAXSD(lo, v[i], v[i])
		VPMINSD(hi, v[i], v[i])
	}
	VPACKSSDW(v[1], v[0], v[0])
	VPACKSSDW(v[3], v[2], v[2])
	VPACKSSWB(v[2], v[0], v[0]) // dwords x0a x1a x2a x3a x0b x1b x2b x3b
	VPERMD(v[0], perm, v[0])
	VMOVDQU(v[0], Mem{Base: dst, Disp: 2})
	ADDQ(U32(128), x)
	ADDQ(U32(34), dst)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
