package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// The constants of ExpTaylor, as float32; the same literals as in
// exptaylor.go (etLo ... etC6).
const (
	etLo    float32 = -87.3
	etHi    float32 = 88.3
	etLog2e float32 = 1.44269504088896341
	etMagic float32 = 12582912
	etLn2Hi float32 = 0.693145751953125
	etLn2Lo float32 = 1.42860682030941723212e-6
	etC2    float32 = 1.0 / 2
	etC3    float32 = 1.0 / 6
	etC4    float32 = 1.0 / 24
	etC5    float32 = 1.0 / 120
	etC6    float32 = 1.0 / 720
)

// etTable holds ExpTaylor's constants, each in all 8 lanes, as bit
// patterns: the floats, then the integer 127 (the exponent bias).
var etTable = []uint32{
	math.Float32bits(etLo), math.Float32bits(etHi), math.Float32bits(etLog2e),
	math.Float32bits(etMagic), math.Float32bits(etLn2Hi), math.Float32bits(etLn2Lo),
	math.Float32bits(etC2), math.Float32bits(etC3), math.Float32bits(etC4),
	math.Float32bits(etC5), math.Float32bits(etC6), math.Float32bits(1), 127,
}

// expShiftTaylor: dst[i] = ExpTaylor(float32(x[i]*scale) - shift), the same
// sequence of separately rounded float32 operations as the Go twin:
//
//	f  = t*log2e + magic               (VMULPS, VADDPS)
//	n  = bits(f) - bits(magic)         (VPSUBD: round(t*log2e) as an integer)
//	fn = f - magic
//	r  = (t - fn*ln2hi) - fn*ln2lo
//	p  = r*c6 + c5, then p = r*p + c for c in c4, c3, c2, 1, 1
//	e  = p * bits((n+127)<<23)
//
// and lanes with t < lo become 0. Before computing a step's groups it
// checks them for t > hi or a NaN (VCMPPS NLE_UQ); if there is one, it
// returns the number of values done so far without touching that step, and
// the Go caller computes the group with the twin (which calls math.Exp
// there) and calls again. As in expShiftSum, the main loop interleaves two
// groups to hide the latency of the dependent chain.
func expShiftTaylor() {
	name := "expShiftTaylorAVX2"
	header(name, "func(dst []float32, x []float32, scale float32, shift float32) int",
		name+" sets dst[i] = ExpTaylor(float32(x[i]*scale) - shift) for i < len(x)&^7",
		"in order, stopping before the first step of 8 or 16 values that holds an",
		"argument above 88.3 or a NaN; it returns how many values it set.")
	const ways = 2
	dst := Mem{Base: Load(Param("dst").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n, nw := groupBounds(ways)
	scale := broadcastParam("scale")
	shift := broadcastParam("shift")
	c := constTable("etconsts", etTable)
	cf := func(f float32) Mem { return c(math.Float32bits(f)) }
	magic := YMM()
	VMOVUPS(cf(etMagic), magic)
	i := GP64()
	XORQ(i, i)

	// groups computes the groups at ms into ds.
	groups := func(ms, ds []Mem, exit string) {
		w := len(ms)
		vec, each := interleave(w)
		t, f, fn, r, p := vec(), vec(), vec(), vec(), vec()
		each(func(g int) { VMULPS(ms[g], scale, t[g]) })
		each(func(g int) { VSUBPS(shift, t[g], t[g]) })
		// Stop before this step if any lane is above hi or a NaN.
		over := vec()
		each(func(g int) { VCMPPS(U8(0x16), cf(etHi), t[g], over[g]) }) // !(t <= hi)
		for g := 1; g < w; g++ {
			VORPS(over[g], over[0], over[0])
		}
		mask := GP32()
		VMOVMSKPS(over[0], mask)
		TESTL(mask, mask)
		JNE(LabelRef(exit))
		each(func(g int) { VMULPS(cf(etLog2e), t[g], f[g]) })
		each(func(g int) { VADDPS(magic, f[g], f[g]) })
		each(func(g int) { VSUBPS(magic, f[g], fn[g]) })
		each(func(g int) { VPSUBD(magic, f[g], f[g]) }) // n
		each(func(g int) { VMULPS(cf(etLn2Hi), fn[g], r[g]) })
		each(func(g int) { VSUBPS(r[g], t[g], r[g]) }) // t - fn*ln2hi
		each(func(g int) { VMULPS(cf(etLn2Lo), fn[g], fn[g]) })
		each(func(g int) { VSUBPS(fn[g], r[g], r[g]) }) // - fn*ln2lo
		each(func(g int) { VMULPS(cf(etC6), r[g], p[g]) })
		each(func(g int) { VADDPS(cf(etC5), p[g], p[g]) })
		for _, k := range []float32{etC4, etC3, etC2, 1, 1} {
			each(func(g int) { VMULPS(r[g], p[g], p[g]) })
			each(func(g int) { VADDPS(cf(k), p[g], p[g]) })
		}
		each(func(g int) { VPADDD(c(127), f[g], f[g]) })
		each(func(g int) { VPSLLD(U8(23), f[g], f[g]) })
		each(func(g int) { VMULPS(f[g], p[g], p[g]) })
		each(func(g int) {
			under := YMM()
			VCMPPS(U8(0x11), cf(etLo), t[g], under) // t < lo (ordered, quiet)
			VANDNPS(p[g], under, p[g])
			VMOVUPS(p[g], ds[g])
		})
	}

	Label(name + "_loop2")
	CMPQ(i, nw)
	JAE(LabelRef(name + "_loop1"))
	groups([]Mem{x.Idx(i, 4), x.Idx(i, 4).Offset(32)}, []Mem{dst.Idx(i, 4), dst.Idx(i, 4).Offset(32)}, name+"_done")
	ADDQ(U32(8*ways), i)
	JMP(LabelRef(name + "_loop2"))

	Label(name + "_loop1")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	groups([]Mem{x.Idx(i, 4)}, []Mem{dst.Idx(i, 4)}, name+"_done")
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	Store(i, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
