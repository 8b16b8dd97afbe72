package quant

import (
	"math"
)

// FP4 scalar conversions (OCP E2M1, docs/quant-schemes.md §9).
//
// E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; a code is a nibble,
// bit 3 the sign, bits 0–2 the magnitude index into {0, 0.5, 1, 1.5, 2, 3,
// 4, 6}. There are no infinities or NaNs; 0x8 is −0.
//
// Two roundings are in use, and they differ only on the midpoints 0.25,
// 0.75, 1.25, 1.75, 2.5, 3.5 and 5:
//
//   - EncodeE2M1 rounds to nearest, ties to even (the code whose mantissa
//     bit is 0), and saturates beyond ±6: PTX's cvt.rn.satfinite.e2m1x2.f32,
//     which the nvfp4 cache writers of vLLM (FlashInfer) and TensorRT-LLM
//     run on Blackwell. So 0.25 → 0, 0.75 → 1, 1.25 → 1, 1.75 → 2, 2.5 → 2,
//     3.5 → 4, 5 → 4. A negative value that rounds to zero gives −0 (0x8).
//   - EncodeE2M1Up counts the midpoints at or below |x|, so ties go up
//     (0.25 → 0.5, 2.5 → 3, 5 → 6): SGLang's KVFP4QuantizeUtil
//     (torch.sum(|x| ≥ E2M1_BOUNDS)), with the sign bit set only for x < 0.
//
// NaN has no E2M1 code: EncodeE2M1 gives +6 (0x7) and EncodeE2M1Up 0, as
// the block quantizers never produce a NaN scaled value from finite input
// (PTX's result for NaN is not documented here; kvq does not rely on it).

// e2m1Magnitudes are the magnitudes of the codes 0–7.
var e2m1Magnitudes = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// e2m1Values holds the value of each of the 16 codes.
var e2m1Values = func() (t [16]float32) {
	for i := range 16 {
		t[i] = e2m1Magnitudes[i&7]
		if i&8 != 0 {
			t[i] = -t[i]
		}
	}
	return t
}()

// DecodeE2M1 returns the value of the E2M1 code c (its low nibble). It is exact.
func DecodeE2M1(c uint8) float32 { return e2m1Values[c&15] }

// EncodeE2M1 rounds x to E2M1, ties to even, saturating at ±6.
func EncodeE2M1(x float32) uint8 {
	bits := math.Float32bits(x)
	sign := uint8(bits>>28) & 8
	a := math.Float32frombits(bits &^ (1 << 31))
	var m uint8
	switch {
	case a != a:
		return 0x7
	case a <= 0.25:
		m = 0
	case a < 0.75:
		m = 1
	case a <= 1.25:
		m = 2
	case a < 1.75:
		m = 3
	case a <= 2.5:
		m = 4
	case a < 3.5:
		m = 5
	case a <= 5:
		m = 6
	default:
		m = 7
	}
	return sign | m
}

// e2m1Bounds are the midpoints between consecutive magnitudes.
var e2m1Bounds = [7]float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5}

// EncodeE2M1Up rounds x to E2M1 as SGLang does: ties away from zero,
// saturating at ±6.
func EncodeE2M1Up(x float32) uint8 {
	var sign uint8
	if x < 0 {
		sign = 8
	}
	a := abs32f(x)
	var m uint8
	for _, b := range e2m1Bounds {
		if a >= b {
			m++
		}
	}
	return sign | m
}

// nvfp4Sixth is 1/6 in float32: NVIDIA's quantizers compute a block's
// scale as amax · (1/6) (a reciprocal, then a product).
const nvfp4Sixth = float32(1.0 / 6)

// mxfp4Floor is the smallest block scale SGLang's quantizer takes
// (torch.clamp(block_max / 6, min=1e-10)), giving exponent −33.
const mxfp4Floor = float32(1e-10)

// mxfp4MaxExp is the largest block exponent kvq stores for fp4_e2m1: 6·2^125
// is finite in float32, 6·2^126 is not. SGLang's quantizer takes e = 126 or
// 127 for blocks whose amax exceeds 6·2^125 (about 2.6e38) and its float32
// decode then gives ±Inf; kvq caps e at 125, so such values saturate to
// ±6·2^125 instead. Finite input never decodes to Inf.
const mxfp4MaxExp = 125

// fp4Block is the number of values that share a scale.
const fp4Block = 16

// Reference codecs: float64 arithmetic, rounding to float32 exactly where
// the engines' float32 kernels round, and E4M3 and E2M1 rounding by search
// over every representable value rather than by bit manipulation. The
// fast codecs must give the same bytes and the same decoded values
// (fp4_test.go).

// refE4M3 rounds v ≥ 0 to the nearest finite E4M3 value, ties to the even
// code, saturating at 448, by search over the 127 finite magnitudes.
func refE4M3(v float64) uint8 {
	best, bestErr := uint8(0), math.Inf(1)
	for c := range 0x7f { // 0x7f is NaN
		d := math.Abs(refE4M3Value(uint8(c)) - v)
		if d < bestErr || d == bestErr && c&1 == 0 {
			best, bestErr = uint8(c), d
		}
	}
	return best
}

// refE4M3Value is the OCP definition of a positive E4M3 code's value.
func refE4M3Value(c uint8) float64 {
	e, m := int(c>>3&15), float64(c&7)
	if e == 0 {
		return m / 8 * math.Ldexp(1, -6)
	}
	return (1 + m/8) * math.Ldexp(1, e-7)
}

// refE2M1 rounds v to the nearest E2M1 value by search; ties go to the even
// code (up false) or away from zero (up true); beyond ±6 it saturates.
func refE2M1(v float64, up bool) uint8 {
	if math.IsNaN(v) {
		if up {
			return 0
		}
		return 0x7
	}
	a := min(math.Abs(v), 6)
	best, bestErr := 0, math.Inf(1)
	for m := range 8 {
		d := math.Abs(float64(e2m1Magnitudes[m]) - a)
		if d < bestErr || d == bestErr && (up || m&1 == 0) {
			best, bestErr = m, d
		}
	}
	code := uint8(best)
	if up && v < 0 || !up && math.Signbit(v) {
		code |= 8
	}
	return code
}

// refNVFP4Row encodes one row with NVIDIA's two-level scheme at decode
// global scale sg: per block of 16, sf = fp32(amax·fp32(1/6))/sg rounded to
// E4M3 (saturating), codes = E2M1(fp32(x·fp32(1/(sf·sg)))), and writes the
// row as the tile stores it (codes, then scales).
func refNVFP4Row(dst []byte, x []float32, sg float32) {
	dim := len(x)
	for b := 0; b < dim/fp4Block; b++ {
		blk := x[b*fp4Block : (b+1)*fp4Block]
		amax := 0.0
		for _, v := range blk {
			if a := math.Abs(float64(v)); a > amax {
				amax = a
			}
		}
		sf := float64(float32(amax * float64(nvfp4Sixth)))
		sf = float64(float32(sf / float64(sg)))
		sc := refE4M3(sf)
		sd := refE4M3Value(sc) * float64(sg)
		out := 0.0
		if sd != 0 {
			out = min(float64(float32(1/float64(float32(sd)))), math.MaxFloat32)
		}
		dst[dim/2+b] = sc
		for j, v := range blk {
			c := refE2M1(float64(float32(float64(v)*out)), false)
			i := b*fp4Block + j
			dst[i/2] |= c << (4 * uint(i&1))
		}
	}
}

// refMXFP4Row encodes one row as SGLang's fp4_e2m1 cache: per block of 16,
// e = ⌈log2 max(fp32(amax/6), 1e−10)⌉, the scale byte e+127, codes =
// E2M1 of x/2^e with ties away from zero.
func refMXFP4Row(dst []byte, x []float32) {
	dim := len(x)
	for b := 0; b < dim/fp4Block; b++ {
		blk := x[b*fp4Block : (b+1)*fp4Block]
		amax := 0.0
		for _, v := range blk {
			if a := math.Abs(float64(v)); a > amax {
				amax = a
			}
		}
		s := float64(float32(amax / 6))
		s = max(s, float64(mxfp4Floor))
		e := mxfp4MaxExp // an infinite amax
		if !math.IsInf(s, 0) {
			e = min(int(math.Ceil(math.Log2(s))), mxfp4MaxExp)
		}
		dst[dim/2+b] = uint8(e + 127)
		for j, v := range blk {
			c := refE2M1(float64(float32(float64(v)/math.Ldexp(1, e))), true)
			i := b*fp4Block + j
			dst[i/2] |= c << (4 * uint(i&1))
		}
	}
}

// refFP4DecodeRow decodes one stored row in float64: code value × block
// scale (E4M3 times sg, or 2^(b−127)).
func refFP4DecodeRow(dst []float64, row []byte, mx bool, sg float32) {
	dim := len(dst)
	for i := range dst {
		c := row[i/2] >> (4 * uint(i&1)) & 15
		sb := row[dim/2+i/fp4Block]
		v := float64(e2m1Magnitudes[c&7])
		if c&8 != 0 {
			v = -v
		}
		if mx {
			// In float32, as SGLang's torch.exp2: byte 255 is 2^128 = +Inf
			// (never written: e ≤ mxfp4MaxExp).
			dst[i] = v * float64(float32(math.Ldexp(1, int(sb)-127)))
		} else {
			sv := refE4M3Value(sb & 0x7f)
			if sb&0x80 != 0 {
				sv = -sv
			}
			if sb&0x7f == 0x7f {
				sv = math.NaN()
			}
			dst[i] = v * float64(float32(sv*float64(sg)))
		}
	}
}
