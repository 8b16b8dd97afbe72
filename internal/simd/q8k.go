package simd

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8KBlockBytes is the size of one Q8_K block as ggml lays out block_q8_K:
// float32 d (little-endian), 256 int8 codes, then 16 int16 sums of 16
// codes each. Q8_K is the activation format of llama.cpp's k-quant dot
// products (ggml_vec_dot_q4_K_q8_K and its siblings): each token's
// activations are quantized once per matrix product and every weight row
// is dotted with the codes in integer arithmetic.
const Q8KBlockBytes = 4 + kBlockSize + 2*16

// QuantizeQ8K sets dst to the len(x)/256 Q8_K blocks of x, bit for bit as
// ggml's quantize_row_q8_K_ref computes them: per block of 256 values, the
// value of largest magnitude max (the first of equal magnitudes), iscale =
// −127/max, code_j = min(127, round-half-even(iscale·x_j)) (the product
// rounded to float32 first), d = 1/iscale and the 16 sums of 16 codes. A
// block of zeros gets d = 0 and zero codes and sums (ggml leaves its sums
// unset). For blocks holding an infinity the codes are unspecified. It
// panics unless len(x) is a multiple of 256 and len(dst) ==
// len(x)/256·Q8KBlockBytes.
func QuantizeQ8K(dst []byte, x []float32) {
	if len(x)%kBlockSize != 0 || len(dst) != len(x)/kBlockSize*Q8KBlockBytes {
		panic(fmt.Sprintf("simd: QuantizeQ8K: %d values is not whole blocks of %d, or %d bytes is not %d blocks of %d", len(x), kBlockSize, len(dst), len(x)/kBlockSize, Q8KBlockBytes))
	}
	quantizeQ8K(dst, x)
}

func quantizeQ8KGeneric(dst []byte, x []float32) {
	for b := 0; b < len(x)/kBlockSize; b++ {
		xb := x[b*kBlockSize : (b+1)*kBlockSize]
		q := dst[b*Q8KBlockBytes : (b+1)*Q8KBlockBytes]
		// The first value of largest magnitude, by the magnitudes' bits
		// (ordered as the magnitudes; NaNs, as in ggml, never win).
		var amax uint32
		imax := 0
		for j, v := range xb {
			if a := math.Float32bits(v) &^ (1 << 31); a > amax && a <= 0x7f800000 {
				amax, imax = a, j
			}
		}
		if amax == 0 {
			clear(q)
			continue
		}
		iscale := -127 / xb[imax]
		qs := q[4 : 4+kBlockSize]
		for g := 0; g < 16; g++ {
			var sum int32
			for j := 16 * g; j < 16*g+16; j++ {
				c := min(127, nearestInt(float32(iscale*xb[j])))
				qs[j] = byte(int8(c))
				sum += c
			}
			binary.LittleEndian.PutUint16(q[4+kBlockSize+2*g:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(q, math.Float32bits(1/iscale))
	}
}

// nearestInt is ggml's nearest_int: f rounded to the nearest integer, ties
// to even, through the float32 addition of 1.5·2^23 (|f| ≤ 2^22).
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func checkKQ8K(op string, wlen, qlen, blockBytes int) int {
	nb := qlen / Q8KBlockBytes
	if qlen%Q8KBlockBytes != 0 || wlen < nb*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d bytes of activations is not whole Q8_K blocks of %d, or %d bytes of weights are fewer than %d super-blocks", op, qlen, Q8KBlockBytes, wlen, nb))
	}
	return nb
}

// DotQ4KQ8K returns the dot product of the q4_K super-blocks at w (144
// bytes each) with the Q8_K blocks at q (QuantizeQ8K; one per super-block),
// as ggml's ggml_vec_dot_q4_K_q8_K defines it: per super-block, the exact
// integer sums S = Σ_g scale_g·Σ_{l in g} q_l·c_l over its 8 groups of 32
// codes q (0..15) and activation codes c, and M = Σ_g min_g·(bsum_{2g} +
// bsum_{2g+1}); then, in float32 and in this order, s += (d_w·d_q)·S and
// s −= (dmin_w·d_q)·M, each product rounded, over the super-blocks in
// order, from s = 0. Every kernel set computes these bits; llama.cpp's
// kernels sum the same per-block terms in another order, so results agree
// with theirs up to float32 rounding. It panics unless len(q) is a
// multiple of Q8KBlockBytes and w holds len(q)/Q8KBlockBytes super-blocks.
func DotQ4KQ8K(w, q []byte) float32 {
	nb := checkKQ8K("DotQ4KQ8K", len(w), len(q), q4KBlockBytes)
	return dotQ4KQ8K(w, q, nb)
}

// DotQ5KQ8K is DotQ4KQ8K for q5_K super-blocks (176 bytes; codes 0..31,
// ggml_vec_dot_q5_K_q8_K).
func DotQ5KQ8K(w, q []byte) float32 {
	nb := checkKQ8K("DotQ5KQ8K", len(w), len(q), q5KBlockBytes)
	return dotQ5KQ8K(w, q, nb)
}

// DotQ6KQ8K is DotQ4KQ8K for q6_K super-blocks (210 bytes;
// ggml_vec_dot_q6_K_q8_K): S = Σ_g scale_g·Σ_{l in g} (q_l − 32)·c_l over
// 16 groups of 16 codes q (0..63) and int8 scales, and s += (d_w·d_q)·S.
func DotQ6KQ8K(w, q []byte) float32 {
	nb := checkKQ8K("DotQ6KQ8K", len(w), len(q), q6KBlockBytes)
	return dotQ6KQ8K(w, q, nb)
}

// q8kBlock returns the d, codes and sums of Q8_K block b at q.
func q8kBlock(q []byte, b int) (d float32, qs []byte, bsum func(g int) int32) {
	blk := q[b*Q8KBlockBytes : (b+1)*Q8KBlockBytes]
	return math.Float32frombits(binary.LittleEndian.Uint32(blk)), blk[4 : 4+kBlockSize], func(g int) int32 {
		return int32(int16(binary.LittleEndian.Uint16(blk[4+kBlockSize+2*g:])))
	}
}

// q4KScaleMins returns the 8 6-bit scales and mins of a q4_K or q5_K
// super-block (ggml's get_scale_min_k4 packing, as q4KScales).
func q4KScaleMins(blk []byte) (sc, mn [8]int32) {
	q := blk[4:16]
	for j := 0; j < 8; j++ {
		if j < 4 {
			sc[j], mn[j] = int32(q[j]&63), int32(q[j+4]&63)
		} else {
			sc[j], mn[j] = int32(q[j+4]&15|(q[j-4]>>6)<<4), int32(q[j+4]>>4|(q[j]>>6)<<4)
		}
	}
	return sc, mn
}

// dotKQ8KGeneric is the twin of DotQ4KQ8K (blockBytes 144, code q4KCode)
// and DotQ5KQ8K (176, q5KCode).
func dotKQ8KGeneric(w, q []byte, nb, blockBytes int, code func(blk []byte, c, i, l int) uint8) float32 {
	var s float32
	for b := 0; b < nb; b++ {
		blk := w[b*blockBytes : (b+1)*blockBytes]
		yd, qs, bsum := q8kBlock(q, b)
		sc, mn := q4KScaleMins(blk)
		var sum, mins int32
		for c := 0; c < 4; c++ {
			for i := 0; i < 2; i++ {
				var p int32
				for l := 0; l < 32; l++ {
					p += int32(code(blk, c, i, l)) * int32(int8(qs[64*c+32*i+l]))
				}
				sum += sc[2*c+i] * p
			}
		}
		for g := 0; g < 8; g++ {
			mins += mn[g] * (bsum(2*g) + bsum(2*g+1))
		}
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))
		s += float32(float32(d*yd) * float32(sum))
		s -= float32(float32(dmin*yd) * float32(mins))
	}
	return s
}

func dotQ4KQ8KGeneric(w, q []byte, nb int) float32 {
	return dotKQ8KGeneric(w, q, nb, q4KBlockBytes, q4KCode)
}

func dotQ5KQ8KGeneric(w, q []byte, nb int) float32 {
	return dotKQ8KGeneric(w, q, nb, q5KBlockBytes, q5KCode)
}

func dotQ6KQ8KGeneric(w, q []byte, nb int) float32 {
	var s float32
	for b := 0; b < nb; b++ {
		blk := w[b*q6KBlockBytes : (b+1)*q6KBlockBytes]
		yd, qs, _ := q8kBlock(q, b)
		var sum int32
		for h := 0; h < 2; h++ {
			ql, qh := blk[64*h:64*h+64], blk[128+32*h:160+32*h]
			for k := 0; k < 4; k++ {
				var p [2]int32
				for l := 0; l < 32; l++ {
					var c int32
					switch k {
					case 0:
						c = int32(ql[l]&15 | (qh[l]&3)<<4)
					case 1:
						c = int32(ql[l+32]&15 | (qh[l]>>2&3)<<4)
					case 2:
						c = int32(ql[l]>>4 | (qh[l]>>4&3)<<4)
					case 3:
						c = int32(ql[l+32]>>4 | (qh[l]>>6&3)<<4)
					}
					p[l/16] += (c - 32) * int32(int8(qs[128*h+32*k+l]))
				}
				g := 8*h + 2*k
				sum += int32(int8(blk[192+g]))*p[0] + int32(int8(blk[192+g+1]))*p[1]
			}
		}
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[208:]))
		s += float32(float32(d*yd) * float32(sum))
	}
	return s
}
