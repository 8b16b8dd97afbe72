package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Softmax kernels: the maximum of a row of scores, and exp(x*scale - shift)
// in place with the sum of the results.
//
// The exponential is the same sequence of float32 operations as expF32, the
// Go twin in generic.go, so the two agree bit for bit: separate rounded
// VMULPS, VADDPS and VSUBPS where expF32 rounds each product and sum, and
// fused VFMADD/VFNMADD where expF32 calls fma32 (math.FMA's float64 result
// rounded to float32, which gives the same bits for every argument of the
// exponential: see fma32 and TestExpExhaustive).
//
// avo allocates from all 32 vector registers, and X16-X31 need AVX-512
// encodings: the kernels are written to need at most 16 at a time, and
// TestNoAVX512Registers checks the generated file.

// The constants of the exponential, as float32; the same literals as in
// generic.go (expLo ... expP5).
const (
	expLo    float32 = -87.33654 // below: the result flushes to 0
	expHi    float32 = 88.72283  // above: the result is +Inf
	expLog2e float32 = 1.44269504088896341
	expMagic float32 = 12582912 // 1.5*2^23: adding it rounds to an integer
	expC1    float32 = 0.693359375
	expC2    float32 = -2.12194440e-4
	expP0    float32 = 1.9875691500e-4
	expP1    float32 = 1.3981999507e-3
	expP2    float32 = 8.3334519073e-3
	expP3    float32 = 4.1665795894e-2
	expP4    float32 = 1.6666665459e-1
	expP5    float32 = 5.0000001201e-1
)

// expTable is the static table of the constants of the exponential, each
// in all 8 lanes; the loop reads them from memory (as operands of the
// arithmetic), as there are not enough YMM registers to hold them all.
var expTable = []float32{expLog2e, expMagic, expC1, expC2, expP0, expP1, expP2, expP3, expP4, expP5, 1, expLo, expHi, float32(math.Inf(1))}

// expConsts emits expTable and returns the operand of one of its
// constants.
func expConsts() func(c float32) Mem {
	bits := make([]uint32, len(expTable))
	for i, c := range expTable {
		bits[i] = math.Float32bits(c)
	}
	c := constTable("expconsts", bits)
	return func(f float32) Mem { return c(math.Float32bits(f)) }
}

// constTable emits a read-only table named name with each of the given
// 32-bit patterns in all 8 lanes (32 bytes apiece), and returns the operand
// of the entry holding a pattern; it panics on a pattern not in the table.
func constTable(name string, bits []uint32) func(b uint32) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i, b := range bits {
		for j := 0; j < 8; j++ {
			DATA(32*i+4*j, U32(b))
		}
	}
	return func(b uint32) Mem {
		for i, v := range bits {
			if v == b {
				return m.Offset(32 * i)
			}
		}
		panic(fmt.Sprintf("%s: no constant %#08x", name, b))
	}
}

// broadcastF32 returns a YMM with c in every lane.
func broadcastF32(c float32) VecVirtual { return broadcastConst(math.Float32bits(c)) }

// maxF32 keeps four running maxima over 32 values per iteration. VMAXPS
// does not keep a NaN: it returns its memory operand when either operand
// is a NaN, so a NaN of x enters the maximum and is replaced at the next
// step. Each new maximum is therefore tested for NaN and the tests ORed
// together; the Go caller rescans x when any NaN was seen.
func maxF32() {
	name := "maxF32AVX2"
	header(name, "func(x []float32) (m float32, nan bool)",
		name+" returns the largest x[i] for i < len(x)&^7 (-Inf if there is none)",
		"and whether any of them is a NaN; m is meaningless when nan is true.",
		"Zeros compare equal: m may be -0 when the largest value is +0.")
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	n32 := elementBounds(n, 32)
	acc := make([]VecVirtual, 4)
	acc[0] = broadcastF32(float32(math.Inf(-1)))
	for k := 1; k < 4; k++ {
		acc[k] = YMM()
		VMOVAPS(acc[0], acc[k])
	}
	nan := zeros(1)[0]

	// Each vector of 8 values of x is folded into its accumulator a, and
	// its NaNs recorded in nan: after VMAXPS a lane of a is a NaN exactly
	// when that lane of x is.
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		u := make([]VecVirtual, vecs)
		for k := range u {
			a := acc[k]
			VMAXPS(x.Idx(i, 4).Offset(32*k), a, a)
			u[k] = YMM()
			VCMPPS(U8(3), a, a, u[k]) // unordered: a is a NaN
		}
		if vecs > 1 {
			VORPS(u[1], u[0], u[0])
			VORPS(u[3], u[2], u[2])
			VORPS(u[2], u[0], u[0])
		}
		VORPS(u[0], nan, nan)
	})

	Label(name + "_done")
	VMAXPS(acc[1], acc[0], acc[0])
	VMAXPS(acc[3], acc[2], acc[2])
	VMAXPS(acc[2], acc[0], acc[0])
	hi := XMM()
	VEXTRACTF128(U8(1), acc[0], hi)
	lo := acc[0].AsX()
	VMAXPS(hi, lo, lo)
	t := XMM()
	VPERMILPS(U8(0b01_00_11_10), lo, t) // lanes 2, 3, 0, 1
	VMAXPS(t, lo, lo)
	VPERMILPS(U8(0b10_11_00_01), lo, t) // lanes 1, 0, 3, 2
	VMAXPS(t, lo, lo)
	Store(lo, ReturnIndex(0))
	mask := GP32()
	VMOVMSKPS(nan, mask)
	TESTL(mask, mask)
	b := GP8()
	SETNE(b)
	Store(b, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

// expShiftSum: x[i] = exp(x[i]*scale - shift) and the float64 sum of the
// results, over len(x)&^7 values. The sum keeps 8 float64 lanes (value i
// goes into lane i%8, in order, as the Go twin's lane[i%8]) and combines
// them as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
//
// Per group of 8, with t = float32(x*scale) - shift and fma the fused
// multiply-add (one rounding):
//
//	k = fma(t, log2e, magic)        (n = round(t*log2e) sits in the low bits of k)
//	n = k - magic                   (exact)
//	r = fma(-n, c1, t)              (exact)
//	r = fma(-n, c2, r)
//	p = fma(fma(fma(fma(fma(p0, r, p1), r, p2), r, p3), r, p4), r, p5)
//	y = fma(p, r*r, r) + 1
//	e = y * 2^n, by adding n<<23 (the low bits of k shifted) to the bits of y
//
// then lanes with t < lo become 0 and lanes with t > hi or t a NaN become
// t + Inf (+Inf, or the NaN). Those lanes compute garbage before the
// selection; no clamp is needed because nothing traps.
//
// Each group is one long chain of dependent operations (about 50 cycles),
// and the scheduler holds only so many waiting operations, so the main loop
// interleaves two groups, instruction by instruction; a second loop takes
// single groups. More groups would need more than the 16 YMM registers of
// AVX2. The float64 conversions for the sum read the stored results back
// (store-to-load forwarding) rather than extracting the upper half.
func expShiftSum() {
	name := "expShiftSumAVX2"
	header(name, "func(x []float32, scale float32, shift float32) float64",
		name+" sets x[i] = expF32(float32(x[i]*scale) - shift) for i < len(x)&^7",
		"and returns their sum in float64: 8 lanes, value i added to lane i%8,",
		"combined as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).")
	const ways = 2
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n, nw := groupBounds(ways)
	scale := broadcastParam("scale")
	shift := broadcastParam("shift")
	c := expConsts()
	magic := YMM()
	VMOVUPS(c(expMagic), magic)
	acc := zeros(2)
	i := GP64()
	XORQ(i, i)

	// groups computes the groups at ms, interleaved.
	groups := func(ms []Mem) {
		w := len(ms)
		vec, each := interleave(w)
		t, k, nf, r, p, z := vec(), vec(), vec(), vec(), vec(), vec()
		each(func(g int) { VMULPS(ms[g], scale, t[g]) })
		each(func(g int) { VSUBPS(shift, t[g], t[g]) })
		each(func(g int) { VMOVAPS(magic, k[g]) })
		each(func(g int) { VFMADD231PS(c(expLog2e), t[g], k[g]) }) // k = t*log2e + magic
		each(func(g int) { VSUBPS(magic, k[g], nf[g]) })
		each(func(g int) { VMOVAPS(t[g], r[g]) })
		each(func(g int) { VFNMADD231PS(c(expC1), nf[g], r[g]) }) // r = t - n*c1
		each(func(g int) { VFNMADD231PS(c(expC2), nf[g], r[g]) }) // r -= n*c2
		each(func(g int) { VMOVUPS(c(expP1), p[g]) })
		each(func(g int) { VFMADD231PS(c(expP0), r[g], p[g]) }) // p = p0*r + p1
		for _, ci := range []float32{expP2, expP3, expP4, expP5} {
			each(func(g int) { VFMADD213PS(c(ci), r[g], p[g]) }) // p = p*r + ci
		}
		each(func(g int) { VMULPS(r[g], r[g], z[g]) })
		each(func(g int) { VFMADD213PS(r[g], z[g], p[g]) }) // p = p*z + r
		each(func(g int) { VADDPS(c(1), p[g], p[g]) })
		each(func(g int) { VPSLLD(U8(23), k[g], k[g]) })
		each(func(g int) { VPADDD(k[g], p[g], p[g]) })
		each(func(g int) {
			under := YMM()
			VCMPPS(U8(0x11), c(expLo), t[g], under) // t < lo (ordered, quiet)
			VANDNPS(p[g], under, p[g])
		})
		each(func(g int) {
			over := YMM()
			VCMPPS(U8(0x16), c(expHi), t[g], over) // !(t <= hi): t > hi or a NaN (quiet)
			VADDPS(c(float32(math.Inf(1))), t[g], t[g])
			VBLENDVPS(over, t[g], p[g], p[g])
			VMOVUPS(p[g], ms[g])
		})
		for g := 0; g < w; g++ { // in order: lane j gets the values i%8 == j in order
			lo, hi := YMM(), YMM()
			VCVTPS2PD(ms[g], lo)
			VADDPD(lo, acc[0], acc[0])
			VCVTPS2PD(ms[g].Offset(16), hi)
			VADDPD(hi, acc[1], acc[1])
		}
	}

	Label(name + "_loop2")
	CMPQ(i, nw)
	JAE(LabelRef(name + "_loop1"))
	groups([]Mem{x.Idx(i, 4), x.Idx(i, 4).Offset(32)})
	ADDQ(U32(8*ways), i)
	JMP(LabelRef(name + "_loop2"))

	Label(name + "_loop1")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	groups([]Mem{x.Idx(i, 4)})
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	VADDPD(acc[1], acc[0], acc[0]) // l0+l4, l1+l5, l2+l6, l3+l7
	h := XMM()
	VEXTRACTF128(U8(1), acc[0], h)
	s := acc[0].AsX()
	VADDPD(h, s, s) // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
	VHADDPD(s, s, s)
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// groupBounds loads len(x) and returns it rounded down to a multiple of 8
// (n) and of 8*ways (nw): the ends of the single-group and interleaved
// loops.
func groupBounds(ways int) (n, nw Register) {
	n = Load(Param("x").Len(), GP64())
	nw = GP64()
	MOVQ(n, nw)
	ANDQ(I32(int32(-8*ways)), nw)
	ANDQ(I32(-8), n)
	return n, nw
}

// interleave returns helpers for code that computes w groups of 8 side by
// side, instruction by instruction: vec makes one YMM per group, and each
// emits f for every group in order.
func interleave(w int) (vec func() []VecVirtual, each func(f func(g int))) {
	vec = func() []VecVirtual {
		v := make([]VecVirtual, w)
		for g := range v {
			v[g] = YMM()
		}
		return v
	}
	each = func(f func(g int)) {
		for g := 0; g < w; g++ {
			f(g)
		}
	}
	return vec, each
}
