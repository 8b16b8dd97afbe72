package simd

import (
	"fmt"
	"math"
)

// The constants of ExpTaylor, as float32 (the same literals as in
// _generate/exptaylor.go). etLo and etHi bound the arguments computed
// through the polynomial; ln 2 is split for a Cody–Waite reduction.
const (
	etLo    float32 = -87.3
	etHi    float32 = 88.3
	etLog2e float32 = 1.44269504088896341
	etMagic float32 = 12582912 // 1.5·2^23: adding it rounds to an integer
	etLn2Hi float32 = 0.693145751953125
	etLn2Lo float32 = 1.42860682030941723212e-6
	etC2    float32 = 1.0 / 2
	etC3    float32 = 1.0 / 6
	etC4    float32 = 1.0 / 24
	etC5    float32 = 1.0 / 120
	etC6    float32 = 1.0 / 720
)

// ExpTaylor returns e^t in float32 by the probe trainer's method (internal/train
// has used it since its first run, so its weights depend on these exact
// bits): n = round(t·log2e) to nearest even, r = t − n·ln2 with ln2 in two
// parts, e^r by its Taylor series to r^6 (truncation below 1.3e-7 on
// |r| <= ln2/2), evaluated by Horner's rule, and 2^n applied by a multiply.
// Every product and sum is rounded on its own (no fused multiply-add; the
// explicit conversions forbid the compiler to fuse them). t < -87.3 gives
// 0; t > 88.3 and a NaN give float32(math.Exp(float64(t))).
//
// ExpShiftSum's exponential is a different one (Cephes' polynomial with
// fused multiply-adds); this one exists so that the trainer stays
// bit-identical while its loops move to ExpShiftTaylor.
func ExpTaylor(t float32) float32 {
	switch {
	case t < etLo:
		return 0
	case t > etHi || t != t:
		return float32(math.Exp(float64(t)))
	}
	f := float32(t*etLog2e) + etMagic
	n := int32(math.Float32bits(f)) - int32(math.Float32bits(etMagic))
	fn := f - etMagic
	r := float32(t-float32(fn*etLn2Hi)) - float32(fn*etLn2Lo)
	p := float32(r*etC6) + etC5
	p = float32(r*p) + etC4
	p = float32(r*p) + etC3
	p = float32(r*p) + etC2
	p = float32(r*p) + 1
	p = float32(r*p) + 1
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// ExpShiftTaylor sets dst[i] = ExpTaylor(float32(x[i]*scale) - shift) for
// i < len(x): the product is rounded before the subtraction. dst may be x
// (in place); otherwise they must not overlap. With scale -1 and shift 0 it
// is ExpTaylor(-x[i]); with scale 1, ExpTaylor(x[i] - shift). The assembly
// and the pure-Go kernels give the same bits for every input; groups of 8
// that hold an argument above 88.3 or a NaN go through ExpTaylor. It
// panics if dst is shorter than x.
func ExpShiftTaylor(dst, x []float32, scale, shift float32) {
	if len(dst) < len(x) {
		panic(fmt.Sprintf("simd: ExpShiftTaylor: len(dst) %d < len(x) %d", len(dst), len(x)))
	}
	expShiftTaylor(dst[:len(x)], x, scale, shift)
}

func expShiftTaylorGeneric(dst, x []float32, scale, shift float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = ExpTaylor(float32(v*scale) - shift)
	}
}
