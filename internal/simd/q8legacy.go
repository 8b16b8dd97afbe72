package simd

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The legacy block types' dot products with quantized activations, as
// llama.cpp computes them: each token row is quantized once per matrix
// product to Q8_0 blocks (QuantizeQ80; for Q4_0, Q5_0, IQ4_NL, MXFP4 and
// Q8_0 weights) or Q8_1 blocks (QuantizeQ81; for Q4_1 and Q5_1), and every
// weight block is dotted with the activations' int8 codes in integer
// arithmetic. Per block b the kernels form the exact int32 sum
// S_b = Σ_j v_bj·c_bj of the weight block's integer values v (see
// DotQ40 …) and the activation codes c, then finish in float32 in this
// order, each operation rounded (no fused multiply-add), t_b being
// (w_b·a_b)·float32(S_b), w_b the weight block's scale, a_b the
// activations' d:
//
//	Q4_1, Q5_1 (m_b the block's min, s_b the activations' s):
//	  s += t_b; ms += m_b·s_b (b in order); result = s + ms
//	the others, n4 = 4⌊nb/4⌋ blocks in 4 lanes (the kernels' groups of 4):
//	  acc[b%4] += t_b for b < n4, then s += t_b for the rest;
//	  result = ((acc[0]+acc[1]) + (acc[2]+acc[3])) + s
//
// The kernels (AVX2: VPSIGNB and VPMADDUBSW, exact since no int16 pair can
// exceed 2·128·127; AVX-512 VNNI: VPDPBUSD) compute exactly this, bit for
// bit with the Go twins, for activation codes in −127..127 (QuantizeQ80
// and QuantizeQ81 make no −128; the sign moved onto a −128 code would
// overflow, as in ggml's kernels). llama.cpp's ggml_vec_dot_*_q8_* sum the blocks in
// 8 lanes with fused multiply-adds, so the results agree with theirs up to
// float32 rounding.

// Q80BlockBytes is the size of one Q8_0 activation block: binary16 d and
// 32 int8 codes (ggml's block_q8_0, the weights' Q8_0 layout too).
const Q80BlockBytes = 34

// Q81BlockBytes is the size of one Q8_1 block (ggml's block_q8_1):
// binary16 d, binary16 s = d·Σ codes, 32 int8 codes.
const Q81BlockBytes = 36

// QuantizeQ80 sets dst to the len(x)/32 Q8_0 blocks of x as llama.cpp's
// x86 build quantizes activations (quantize_row_q8_0 with AVX2, which
// rounds differently from quantize_row_q8_0_ref): per block, amax the
// largest magnitude, d = amax/127 (stored as binary16), id = 127/amax (0
// for amax = 0) and code_j = round-half-even(x_j·id), the product rounded
// to float32 first. It panics unless len(x) is a multiple of 32 and
// len(dst) == len(x)/32·Q80BlockBytes.
func QuantizeQ80(dst []byte, x []float32) {
	checkQ8Quantize("QuantizeQ80", len(dst), len(x), Q80BlockBytes)
	quantizeQ80(dst, x)
}

// quantizeQ80Generic is QuantizeQ80's twin.
func quantizeQ80Generic(dst []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		q := dst[b*Q80BlockBytes : (b+1)*Q80BlockBytes]
		d, _ := quantizeQ8Block(q[2:], x[32*b:32*b+32])
		binary.LittleEndian.PutUint16(q, F32ToF16Scalar(d))
	}
}

// QuantizeQ81 is QuantizeQ80 for Q8_1 blocks (quantize_row_q8_1 with
// AVX2): the same d and codes, and s = d·float32(Σ codes) as binary16.
func QuantizeQ81(dst []byte, x []float32) {
	checkQ8Quantize("QuantizeQ81", len(dst), len(x), Q81BlockBytes)
	for b := 0; b < len(x)/32; b++ {
		q := dst[b*Q81BlockBytes : (b+1)*Q81BlockBytes]
		d, sum := quantizeQ8Block(q[4:], x[32*b:32*b+32])
		binary.LittleEndian.PutUint16(q, F32ToF16Scalar(d))
		binary.LittleEndian.PutUint16(q[2:], F32ToF16Scalar(d*float32(sum)))
	}
}

// quantizeQ8Block writes the 32 codes of xb to c and returns d (float32)
// and the codes' sum.
func quantizeQ8Block(c []byte, xb []float32) (float32, int32) {
	var abits uint32 // the largest magnitude's bits (NaNs aside)
	for _, v := range xb {
		if a := math.Float32bits(v) &^ (1 << 31); a > abits && a <= 0x7f800000 {
			abits = a
		}
	}
	amax := math.Float32frombits(abits)
	d := amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	var sum int32
	for j, v := range xb {
		// round half to even: |v·id| ≤ 127 (ulps) keeps nearestInt exact
		r := max(-128, min(127, nearestInt8(float32(v*id))))
		c[j] = byte(int8(r))
		sum += r
	}
	return d, sum
}

func checkQ8Quantize(op string, dlen, xlen, blockBytes int) {
	if xlen%32 != 0 || dlen != xlen/32*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d values is not whole blocks of 32, or %d bytes is not %d blocks of %d", op, xlen, dlen, xlen/32, blockBytes))
	}
}

// checkQ8Dot returns the number of blocks of q (whole blocks of qBytes)
// and panics unless w holds as many blocks of wBytes.
func checkQ8Dot(op string, wlen, qlen, wBytes, qBytes int) int {
	nb := qlen / qBytes
	if qlen%qBytes != 0 || wlen < nb*wBytes {
		panic(fmt.Sprintf("simd: %s: %d bytes of activations is not whole blocks of %d, or %d bytes of weights are fewer than %d blocks", op, qlen, qBytes, wlen, nb))
	}
	return nb
}

// DotQ40Q80 returns the dot product of the Q4_0 blocks at w with the Q8_0
// blocks at q (QuantizeQ80; one per weight block), in the order above. It
// panics unless len(q) is whole blocks and w holds as many.
func DotQ40Q80(w, q []byte) float32 {
	return dotQ8Legacy(qdQ40, w, q, checkQ8Dot("DotQ40Q80", len(w), len(q), q40BlockBytes, Q80BlockBytes))
}

// DotQ41Q81 is DotQ40Q80 for Q4_1 weights and Q8_1 activations
// (QuantizeQ81), with the mins' term m_b·s_b.
func DotQ41Q81(w, q []byte) float32 {
	return dotQ8Legacy(qdQ41, w, q, checkQ8Dot("DotQ41Q81", len(w), len(q), q41BlockBytes, Q81BlockBytes))
}

// DotQ50Q80 is DotQ40Q80 for Q5_0 weights.
func DotQ50Q80(w, q []byte) float32 {
	return dotQ8Legacy(qdQ50, w, q, checkQ8Dot("DotQ50Q80", len(w), len(q), q50BlockBytes, Q80BlockBytes))
}

// DotQ51Q81 is DotQ41Q81 for Q5_1 weights.
func DotQ51Q81(w, q []byte) float32 {
	return dotQ8Legacy(qdQ51, w, q, checkQ8Dot("DotQ51Q81", len(w), len(q), q51BlockBytes, Q81BlockBytes))
}

// DotIQ4NLQ80 is DotQ40Q80 for IQ4_NL weights.
func DotIQ4NLQ80(w, q []byte) float32 {
	return dotQ8Legacy(qdIQ4NL, w, q, checkQ8Dot("DotIQ4NLQ80", len(w), len(q), iq4nlBlockBytes, Q80BlockBytes))
}

// DotMXFP4Q80 is DotQ40Q80 for MXFP4 weights (the block's scale the halved
// E8M0 value, with the doubled e2m1 values, as ggml's).
func DotMXFP4Q80(w, q []byte) float32 {
	return dotQ8Legacy(qdMXFP4, w, q, checkQ8Dot("DotMXFP4Q80", len(w), len(q), mxfp4BlockBytes, Q80BlockBytes))
}

// DotQ80Q80 is DotQ40Q80 for Q8_0 weights (ggml's block_q8_0: binary16 d
// and 32 int8 values, the block's bytes; ggml_vec_dot_q8_0_q8_0).
func DotQ80Q80(w, q []byte) float32 {
	return dotQ8Legacy(qdQ80, w, q, checkQ8Dot("DotQ80Q80", len(w), len(q), Q80BlockBytes, Q80BlockBytes))
}

// q8LegacyMins reports whether type t takes Q8_1 activations and a min.
func q8LegacyMins(t qdotType) bool { return t == qdQ41 || t == qdQ51 }

// dotQ8LegacyGeneric is the twin of the nb-block dots of type t.
func dotQ8LegacyGeneric(t qdotType, w, q []byte, nb int) float32 {
	qb, off := Q80BlockBytes, 2
	if q8LegacyMins(t) {
		qb, off = Q81BlockBytes, 4
	}
	bb := qdotBlockBytes[t]
	var s, ms float32
	var acc [4]float32
	n4 := nb &^ 3
	if off == 4 {
		n4 = 0 // Q4_1, Q5_1: one sum
	}
	var v [32]int8
	for b := 0; b < nb; b++ {
		blk, qk := w[b*bb:(b+1)*bb], q[b*qb:(b+1)*qb]
		d := qdotValues(t, blk, &v)
		var sum int32
		for j, c := range qk[off : off+32] {
			sum += int32(v[j]) * int32(int8(c))
		}
		a := F16ToF32Scalar(binary.LittleEndian.Uint16(qk))
		if t := float32(d * a * float32(sum)); b < n4 {
			acc[b%4] += t
		} else {
			s += t
		}
		if off == 4 {
			m := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))
			ms += float32(m * F16ToF32Scalar(binary.LittleEndian.Uint16(qk[2:])))
		}
	}
	if off == 2 {
		return float32(float32(acc[0]+acc[1])+float32(acc[2]+acc[3])) + s
	}
	return s + ms
}

// nearestInt8 rounds f (|f| ≤ 2^22) to the nearest integer, ties to even,
// through the float32 addition of 1.5·2^23.
func nearestInt8(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}
