package quant

import (
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

// FP8 scalar conversions (OCP 8-bit floating point, docs/quant-schemes.md
// §1.1).
//
// E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, NaN is
// S.1111.111 (0x7F, 0xFF); largest finite ±448, smallest normal 2^-6,
// smallest subnormal 2^-9.
//
// E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: exponent 31
// with mantissa 0 is ±Inf, with mantissa ≠ 0 NaN; largest finite ±57344,
// smallest normal 2^-14, smallest subnormal 2^-16. An E5M2 byte is exactly
// the top byte of the IEEE half with the same value.
//
// Encoding rounds to nearest, ties to even, in the subnormal range too; values
// below half the smallest subnormal become ±0 (the sign is kept). NaN encodes
// as 0x7F with the input's sign (0x7F/0xFF), in both formats. Overflow
// follows one of two modes:
//
//   - saturating (sat true, CUDA __NV_SATFINITE as vLLM's cache kernels use):
//     finite values that round past the largest finite value, and ±Inf,
//     become ±max finite (0x7E/0xFE for E4M3, 0x7B/0xFB for E5M2);
//   - non-saturating (sat false, PyTorch .to(float8_*)): E4M3 results past
//     448 become NaN (so 464 < |x| < 480 rounds to NaN, 464 ties down to 448,
//     and ±Inf gives NaN); E5M2 results past 57344 become ±Inf
//     (|x| ≥ 61440).

// FP8Kind selects an 8-bit float encoding.
type FP8Kind uint8

const (
	// E4M3 is OCP E4M3FN (torch.float8_e4m3fn), vLLM's "fp8" and "fp8_e4m3".
	E4M3 FP8Kind = iota
	// E5M2 is OCP E5M2 (torch.float8_e5m2), vLLM's "fp8_e5m2".
	E5M2
)

// String returns "e4m3" or "e5m2".
func (k FP8Kind) String() string {
	if k == E5M2 {
		return "e5m2"
	}
	return "e4m3"
}

// Max returns the largest finite value of the encoding (448 or 57344).
func (k FP8Kind) Max() float32 {
	if k == E5M2 {
		return 57344
	}
	return 448
}

// fp8Params are the bit-level parameters of one encoding.
type fp8Params struct {
	mbits   uint   // stored mantissa bits
	bias    int    // exponent bias
	maxCode uint32 // code of the largest finite value (sign clear)
	nanOvf  bool   // non-saturating overflow gives NaN (E4M3FN) rather than Inf
}

var (
	e4m3Params = fp8Params{mbits: 3, bias: 7, maxCode: 0x7E, nanOvf: true}
	e5m2Params = fp8Params{mbits: 2, bias: 15, maxCode: 0x7B}
)

// EncodeE4M3 converts x to E4M3FN, saturating at ±448 when sat is true (see
// the package notes above for both modes).
func EncodeE4M3(x float32, sat bool) uint8 { return fp8Encode(x, &e4m3Params, sat) }

// EncodeE5M2 converts x to E5M2, saturating at ±57344 when sat is true.
func EncodeE5M2(x float32, sat bool) uint8 { return fp8Encode(x, &e5m2Params, sat) }

// DecodeE4M3 returns the value of the E4M3FN code b (NaN for 0x7F and 0xFF).
// It is exact.
func DecodeE4M3(b uint8) float32 { return fp8Decode[E4M3][b] }

// DecodeE5M2 returns the value of the E5M2 code b. It is exact.
func DecodeE5M2(b uint8) float32 { return fp8Decode[E5M2][b] }

// Encode converts x with the kind's encoding.
func (k FP8Kind) Encode(x float32, sat bool) uint8 {
	if k == E5M2 {
		return EncodeE5M2(x, sat)
	}
	return EncodeE4M3(x, sat)
}

// Decode returns the value of code b in the kind's encoding.
func (k FP8Kind) Decode(b uint8) float32 { return fp8Decode[k&1][b] }

func fp8Encode(x float32, p *fp8Params, sat bool) uint8 {
	bits := math.Float32bits(x)
	sign := uint8(bits>>24) & 0x80
	a := bits & 0x7fff_ffff
	switch {
	case a > 0x7f80_0000: // NaN
		return sign | 0x7f
	case a == 0x7f80_0000: // ±Inf
		return sign | fp8Overflow(p, sat)
	case a < 0x0080_0000: // zero or float32 subnormal (< 2^-126): far below half an fp8 subnormal
		return sign
	}
	m := a&0x7f_ffff | 0x80_0000 // 24-bit significand, value m·2^(e-23)
	fe := int(a>>23) - 127 + p.bias
	var r uint32
	if fe >= 1 {
		// Normal: keep mbits of the fraction, round the dropped bits.
		shift := 23 - p.mbits
		r = uint32(fe)<<p.mbits | (m&0x7f_ffff)>>shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++ // may carry into the exponent: still the right code
		}
	} else {
		// Subnormal: count units of the smallest subnormal 2^(1-bias-mbits).
		// A carry out of the mantissa gives the smallest normal, correctly.
		shift := uint(24 - int(p.mbits) - fe)
		if shift > 24 {
			return sign // below half the smallest subnormal
		}
		r = m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
	}
	if r > p.maxCode {
		return sign | fp8Overflow(p, sat)
	}
	return sign | uint8(r)
}

// fp8Overflow is the code (sign clear) of an overflowing value.
func fp8Overflow(p *fp8Params, sat bool) uint8 {
	switch {
	case sat:
		return uint8(p.maxCode)
	case p.nanOvf:
		return 0x7f
	default:
		return 0x7c // E5M2 +Inf
	}
}

// fp8Decode holds the value of every code, [E4M3] and [E5M2]. The tables
// are built through the half-precision views the attention kernels use
// (fp8E4M3ToF16, b<<8 for E5M2), so the table and the kernels agree by
// construction; the tests check them against the OCP definition.
var fp8Decode = func() (t [2][256]float32) {
	for i := range 256 {
		b := uint8(i)
		t[E4M3][i] = simd.F16ToF32Scalar(fp8E4M3ToF16(b)) * 256
		if b&0x7f == 0x7f {
			t[E4M3][i] = float32(math.NaN())
			if b&0x80 != 0 {
				t[E4M3][i] = -t[E4M3][i]
			}
		}
		t[E5M2][i] = simd.F16ToF32Scalar(uint16(b) << 8)
	}
	return t
}()

// fp8E4M3ToF16 returns the IEEE half bits of value(b)/256 for a finite E4M3
// code b. Scaling by 2^-8 maps E4M3's exponent bias 7 onto the half's bias
// 15, so the exponent and mantissa fields move over unchanged (subnormals
// land on half subnormals); the result is exact. The NaN codes map to ±1.875
// (480/256) and must be handled by the caller.
func fp8E4M3ToF16(b uint8) uint16 {
	return uint16(b&0x80)<<8 | uint16(b&0x7f)<<7
}
