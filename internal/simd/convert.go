package simd

import "math"

// F16ToF32Scalar widens the IEEE 754 binary16 value with bits h to float32.
// The conversion is exact for every finite value, subnormals included. A
// signalling NaN comes back quiet (the 0x0040_0000 bit set) with its sign and
// payload kept, which is what x86's VCVTPH2PS does, so the scalar and the
// vector paths agree bit for bit.
func F16ToF32Scalar(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		if mant == 0 {
			return math.Float32frombits(sign | 0x7f80_0000)
		}
		return math.Float32frombits(sign | 0x7fc0_0000 | mant<<13)
	case 0:
		// Zero or subnormal: mant * 2^-24, exact in float32.
		return math.Float32frombits(sign | math.Float32bits(float32(mant)*0x1p-24))
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// F32ToF16Scalar narrows f to IEEE 754 binary16 bits, rounding to nearest with
// ties to even. Values that round past the largest half (65504) become ±Inf,
// results below the normal range become correctly rounded subnormals or ±0,
// and a NaN becomes a quiet NaN with its sign and top payload bits (as x86's
// VCVTPS2PH does).
func F32ToF16Scalar(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7f_ffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	he := exp - 112 // biased binary16 exponent
	if he >= 0x1f {
		return sign | 0x7c00
	}
	if he <= 0 {
		if he < -10 {
			return sign // below half the smallest subnormal: ±0
		}
		// Subnormal result in units of 2^-24: the 24-bit significand shifted
		// right by 14-he (14..24), rounded to nearest even. A carry into
		// bit 10 yields the smallest normal, which is the right encoding.
		m := mant | 0x80_0000
		shift := uint(14 - he)
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(he)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++ // may carry into the exponent, up to 0x7c00 (Inf): both correct
	}
	return sign | uint16(r)
}

// BF16ToF32Scalar widens the bfloat16 value with bits h to float32. It is
// exact: the bits move to the top half of the float32. NaNs keep their bits.
func BF16ToF32Scalar(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16Scalar narrows f to bfloat16 bits, rounding to nearest with ties to
// even; values past the largest bfloat16 become ±Inf. A NaN becomes a quiet NaN
// (0x0040 set) that keeps its sign and top payload bits.
func F32ToBF16Scalar(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fff_ffff > 0x7f80_0000 {
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
