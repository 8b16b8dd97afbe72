package quant

import (
	"encoding/binary"
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Integer quantization shared by the int, KIVI and quanto formats.
//
// Asymmetric (affine, "min/max") groups store an fp16 scale s and an fp16
// zero z (the group minimum): code q = clamp(roundHalfEven((x−z)/s), 0,
// 2^b−1), value x̂ = q·s + z. Symmetric groups store only s:
// q = clamp(roundHalfEven(x/s), −(2^(b−1)−1), 2^(b−1)−1), x̂ = q·s; codes are
// stored offset by 2^(b−1) so that they are unsigned.
//
// Because s and z are stored in fp16, they are chosen after rounding: z is
// the largest fp16 value ≤ min and s the smallest fp16 value with
// z + s·(2^b−1) ≥ max, so every x of the group lies in the representable
// range and |x − x̂| ≤ s/2 (plus float32 rounding). A constant group gets
// s = 0 and reconstructs exactly to z when the value is representable in
// fp16. Values beyond the fp16 range saturate to ±65504.
//
// Codes are packed per row (a run of head_dim codes): 8-bit codes one per
// byte; 4-bit codes in blocks of 32 (16 bytes) in GGML Q4_0's nibble order,
// byte k of a block holding code k in its low nibble and code k+16 in its
// high nibble (a last block of t < 32 codes pairs k with k+t/2), so that
// one zero-extension of 8 bytes gives two vectors of codes; 2-bit codes
// little end first, code j at bits 2·(j mod 4) of byte j/4.

const maxF16 = 65504

// f16Floor returns the largest fp16 value ≤ x (saturating), as bits and value.
func f16Floor(x float32) (uint16, float32) {
	x = clampF16(x)
	h := simd.F32ToF16Scalar(x)
	v := simd.F16ToF32Scalar(h)
	if v > x {
		h = f16Step(h, -1)
		v = simd.F16ToF32Scalar(h)
	}
	return h, v
}

// f16Ceil returns the smallest fp16 value ≥ x (saturating).
func f16Ceil(x float32) (uint16, float32) {
	x = clampF16(x)
	h := simd.F32ToF16Scalar(x)
	v := simd.F16ToF32Scalar(h)
	if v < x {
		h = f16Step(h, +1)
		v = simd.F16ToF32Scalar(h)
	}
	return h, v
}

func clampF16(x float32) float32 {
	switch {
	case x > maxF16:
		return maxF16
	case x < -maxF16:
		return -maxF16
	case x != x:
		return 0
	}
	return x
}

// f16Step moves a finite fp16 value one ulp up (dir>0) or down.
func f16Step(h uint16, dir int) uint16 {
	neg := h&0x8000 != 0
	mag := h & 0x7fff
	if mag == 0 {
		if dir > 0 {
			return 0x0001
		}
		return 0x8001
	}
	if (dir > 0) != neg {
		if mag >= 0x7bff {
			return h // already at max finite
		}
		return h + 1
	}
	return h - 1
}

// groupParams holds one group's stored parameters.
type groupParams struct {
	s, z   float32 // decoded values
	sb, zb uint16  // fp16 bits
}

// affineParams picks s and z for values in [lo, hi] with b-bit codes.
func affineParams(lo, hi float32, bits int) groupParams {
	zb, z := f16Floor(lo)
	levels := float32(int(1)<<bits - 1)
	span := clampF16(hi) - z
	if span <= 0 {
		return groupParams{z: z, zb: zb}
	}
	sb, s := f16Ceil(span / levels)
	for z+s*levels < clampF16(hi) && sb < 0x7bff { // float32 rounding of the product
		sb = f16Step(sb, +1)
		s = simd.F16ToF32Scalar(sb)
	}
	return groupParams{s: s, z: z, sb: sb, zb: zb}
}

// symParams picks s for values with absolute maximum amax.
func symParams(amax float32, bits int) groupParams {
	levels := float32(int(1)<<(bits-1) - 1)
	if amax <= 0 {
		return groupParams{}
	}
	sb, s := f16Ceil(amax / levels)
	for s*levels < clampF16(amax) && sb < 0x7bff {
		sb = f16Step(sb, +1)
		s = simd.F16ToF32Scalar(sb)
	}
	return groupParams{s: s, sb: sb}
}

// quantAffine returns the code of x.
func quantAffine(x float32, p groupParams, bits int) uint8 {
	if p.s == 0 {
		return 0
	}
	q := math.RoundToEven(float64((clampF16(x) - p.z) / p.s))
	return uint8(max(0, min(q, float64(int(1)<<bits-1))))
}

// quantSym returns the offset code of x.
func quantSym(x float32, p groupParams, bits int) uint8 {
	off := int(1) << (bits - 1)
	if p.s == 0 {
		return uint8(off)
	}
	lim := float64(off - 1)
	q := math.RoundToEven(float64(clampF16(x) / p.s))
	return uint8(int(max(-lim, min(q, lim))) + off)
}

// putCode stores code j of the packed run b (a whole run: 4-bit runs are
// laid out in blocks by their length, 2·len(b) codes).
func putCode(b []byte, j, bits int, code uint8) {
	switch bits {
	case 8:
		b[j] = code
	case 4:
		k, sh := simd.U4Pos(j, 2*len(b))
		b[k] = b[k]&^(0xf<<sh) | code<<sh
	case 2:
		sh := uint(j&3) * 2
		b[j>>2] = b[j>>2]&^(0x3<<sh) | code<<sh
	default:
		panic("quant: unsupported code width")
	}
}

func putF16(b []byte, h uint16) { binary.LittleEndian.PutUint16(b, h) }
func getF16(b []byte) float32   { return simd.F16ToF32Scalar(binary.LittleEndian.Uint16(b)) }
