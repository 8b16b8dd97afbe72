package simd

import (
	"encoding/binary"
	"fmt"
	"math"
)

// GGML k-quant super-blocks: 256 values in q4KBlockBytes (block_q4_K: fp16
// d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles) or
// q6KBlockBytes (block_q6_K: 128 bytes of low nibbles, 64 of high bit
// pairs, 16 int8 scales, fp16 d), as pkg/gguf documents them.
const (
	kBlockSize      = 256
	q4KBlockBytes   = 144
	q5KBlockBytes   = 176
	q6KBlockBytes   = 210
	q2KBlockBytes   = 84
	q3KBlockBytes   = 110
	iq4XSBlockBytes = 136
	mxfp4BlockBytes = 17
)

// The 4-bit table types' levels as int8: ggml's kvalues_iq4nl (iq4_nl,
// iq4_xs) and kvalues_mxfp4 (the e2m1 values doubled; the block scale is
// halved to match).
var (
	iq4Levels8  = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	mxfp4Levels = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

func checkK(op string, wlen, xlen, blockBytes int) {
	if xlen%kBlockSize != 0 || wlen < xlen/kBlockSize*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d values is not whole super-blocks of %d, or %d bytes of weights are too few", op, xlen, kBlockSize, wlen))
	}
}

// DotQ4K returns Σ_i w_i·x[i] over the len(x)/256 q4_K super-blocks at w
// (144 bytes each), w_i decoded as ggml does (d·scale·q − dmin·min), up to
// rounding: the kernels may fuse the decode's multiply and subtract and
// keep several partial sums. It panics unless len(x) is a multiple of 256
// and w holds len(x)/256 super-blocks.
func DotQ4K(w []byte, x []float32) float32 {
	checkK("DotQ4K", len(w), len(x), q4KBlockBytes)
	return dotQ4K(w, x)
}

// DotQ5K is DotQ4K for q5_K super-blocks (176 bytes each; a fifth bit per
// code).
func DotQ5K(w []byte, x []float32) float32 {
	checkK("DotQ5K", len(w), len(x), q5KBlockBytes)
	return dotQ5K(w, x)
}

// DotQ6K is DotQ4K for q6_K super-blocks (210 bytes each; w_i = d·scale·(q−32)).
func DotQ6K(w []byte, x []float32) float32 {
	checkK("DotQ6K", len(w), len(x), q6KBlockBytes)
	return dotQ6K(w, x)
}

// RowDecoder decodes weights for MatMulDecoded: DecodeRow sets dst to the
// len(dst) values of weight row r from column c0 on (c0 a multiple of 256;
// len(dst) a multiple of 32, 256 but at the end of a row).
type RowDecoder interface {
	DecodeRow(dst []float32, r, c0 int)
}

// MatMulDecoded is the packed prefill product for weights that decode a
// block of columns at a time (the GGML block types): for weight rows
// [r0, end) it sets dst[t*ldd+r] = Σ_c x[t*cols+c]·W[r][c] for t < nt,
// decoding each 16-row × 256-column panel once with dec and multiplying it
// with the token rows in MatMulF16's packed micro-kernels (one fused
// multiply-add a column, in order, so a token row's result depends neither
// on the other token rows nor on the row split, at multiples of 16). end
// is r0 plus the largest multiple of 16 rows ≤ r1−r0 where the packed path
// runs, r0 where it does not (the pure-Go twins): the caller computes the
// rows from end on. It is worth it from MatMulDecodedTokens() token rows.
// cols must be a multiple of 32.
func MatMulDecoded(dst []float32, ldd int, x []float32, nt, cols int, dec RowDecoder, r0, r1 int) (end int) {
	if cols%32 != 0 || r0 < 0 || r1 < r0 || len(x) < nt*cols || nt > 0 && r1 > 0 && len(dst) < (nt-1)*ldd+r1 {
		panic(fmt.Sprintf("simd: MatMulDecoded: %d token rows of %d columns, rows [%d, %d), %d outputs at stride %d", nt, cols, r0, r1, len(dst), ldd))
	}
	if nt == 0 {
		return r0
	}
	return matMulDecoded(dst, ldd, x, nt, cols, dec, r0, r1)
}

// MatMulDecodedTokens is the fewest token rows from which MatMulDecoded's
// packed path pays for itself with the kernels selected now (Q8_0's
// threshold: the decoding, like Q8_0's widening, happens once per panel),
// math.MaxInt where there is none.
func MatMulDecodedTokens() int { return matMulDecodedTokens() }

// GroupSums32 sets xs[g] to the float32 sum of x[32g:32g+32], for the sums
// DotQ4KSums and DotQ5KSums take (in an unspecified order). It panics
// unless len(x) == 32*len(xs).
func GroupSums32(xs, x []float32) {
	checkLen("GroupSums32", len(x), 32*len(xs))
	groupSums32(xs, x)
}

func groupSums32Generic(xs, x []float32) {
	for g := range xs {
		v := x[32*g : 32*g+32]
		var s [8]float32
		for i := 0; i < 32; i += 8 {
			for j := range s {
				s[j] += v[i+j]
			}
		}
		xs[g] = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
	}
}

// DotQ4KSums is DotQ4K computed as llama.cpp's k-quant dots arrange it:
// Σ_g d·scale_g·Σ_{l in g} q_l·x_l − Σ_g dmin·min_g·xs[g], with xs the
// activations' group sums (GroupSums32), computed once per activation row
// and shared by every weight row, so that the inner loop only converts and
// multiplies codes. The result rounds differently from DotQ4K's, and can
// lose more to cancellation where d·scale·q and dmin·min nearly cancel. It
// panics as DotQ4K does, or unless len(xs) == len(x)/32.
func DotQ4KSums(w []byte, x, xs []float32) float32 {
	checkK("DotQ4KSums", len(w), len(x), q4KBlockBytes)
	checkLen("DotQ4KSums", len(x), 32*len(xs))
	return dotQ4KSums(w, x, xs)
}

// DotQ5KSums is DotQ4KSums for q5_K.
func DotQ5KSums(w []byte, x, xs []float32) float32 {
	checkK("DotQ5KSums", len(w), len(x), q5KBlockBytes)
	checkLen("DotQ5KSums", len(x), 32*len(xs))
	return dotQ5KSums(w, x, xs)
}

// Q4KToF32 sets dst to the values of the len(dst)/256 q4_K super-blocks at
// w, bit for bit as ggml's dequantize_row_q4_K computes them. It panics as
// DotQ4K does.
func Q4KToF32(dst []float32, w []byte) {
	checkK("Q4KToF32", len(w), len(dst), q4KBlockBytes)
	q4KToF32(dst, w)
}

// Q5KToF32 is Q4KToF32 for q5_K (ggml's dequantize_row_q5_K).
func Q5KToF32(dst []float32, w []byte) {
	checkK("Q5KToF32", len(w), len(dst), q5KBlockBytes)
	q5KToF32(dst, w)
}

// Q6KToF32 is Q4KToF32 for q6_K (ggml's dequantize_row_q6_K).
func Q6KToF32(dst []float32, w []byte) {
	checkK("Q6KToF32", len(w), len(dst), q6KBlockBytes)
	q6KToF32(dst, w)
}

// Q2KToF32 sets dst to the values of the len(dst)/256 q2_K super-blocks at
// w (84 bytes each: 16 bytes of 4-bit scales and mins, 64 bytes of 2-bit
// codes, fp16 d and dmin), bit for bit as ggml's dequantize_row_q2_K
// computes them: float32(d·scale·q) − dmin·min. It panics as Q4KToF32 does.
func Q2KToF32(dst []float32, w []byte) {
	checkK("Q2KToF32", len(w), len(dst), q2KBlockBytes)
	q23KToF32(dst, w, q2KBlockBytes, q2KScales, q2KToF32Generic)
}

// Q3KToF32 is Q2KToF32 for q3_K (110 bytes: 32 bytes of high bits, 64 of
// 2-bit codes, 12 of 6-bit scales, fp16 d; ggml's dequantize_row_q3_K:
// d·(scale−32)·(q − 4·(1−high bit))).
func Q3KToF32(dst []float32, w []byte) {
	checkK("Q3KToF32", len(w), len(dst), q3KBlockBytes)
	q23KToF32(dst, w, q3KBlockBytes, q3KScales, q3KToF32Generic)
}

// q2KScales sets sc[j] = d·(scales[j]&15) and sc[16+j] = dmin·(scales[j]>>4).
func q2KScales(sc []float32, blk []byte) {
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[80:]))
	dmin := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[82:]))
	for j, c := range blk[:16] {
		sc[j], sc[16+j] = d*float32(c&15), dmin*float32(c>>4)
	}
}

// q3KScales sets sc[j] = d·(scale_j − 32) for the 16 6-bit scales of the
// q3_K super-block blk (low 4 bits in bytes 96..103, high 2 bits in
// 104..107).
func q3KScales(sc []float32, blk []byte) {
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[108:]))
	s := blk[96:108]
	for j := 0; j < 16; j++ {
		lo := s[j%8] >> (4 * uint(j/8)) & 15
		hi := s[8+j%4] >> (2 * uint(j/4)) & 3
		sc[j] = d * float32(int(lo|hi<<4)-32)
	}
}

func q2KToF32Generic(dst []float32, w []byte) {
	var sc [32]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*q2KBlockBytes:]
		q2KScales(sc[:], blk)
		for n := 0; n < 2; n++ {
			for j := 0; j < 4; j++ {
				for h := 0; h < 2; h++ {
					is := 8*n + 2*j + h
					y := dst[b*kBlockSize+128*n+32*j+16*h:]
					for l := 0; l < 16; l++ {
						q := blk[16+32*n+16*h+l] >> uint(2*j) & 3
						y[l] = float32(sc[is]*float32(q)) - sc[16+is]
					}
				}
			}
		}
	}
}

func q3KToF32Generic(dst []float32, w []byte) {
	var sc [32]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*q3KBlockBytes:]
		q3KScales(sc[:], blk)
		for n := 0; n < 2; n++ {
			for j := 0; j < 4; j++ {
				for h := 0; h < 2; h++ {
					is := 8*n + 2*j + h
					y := dst[b*kBlockSize+128*n+32*j+16*h:]
					for l := 0; l < 16; l++ {
						q := int(blk[32+32*n+16*h+l] >> uint(2*j) & 3)
						if blk[16*h+l]>>uint(4*n+j)&1 == 0 {
							q -= 4
						}
						y[l] = sc[is] * float32(q)
					}
				}
			}
		}
	}
}

// IQ4XSToF32 sets dst to the values of the len(dst)/256 iq4_xs super-blocks
// at w (136 bytes each: fp16 d, 16 bits of high scale bits, 4 bytes of low
// scale nibbles, 128 bytes of 4-bit indices), bit for bit as ggml's
// dequantize_row_iq4_xs computes them: d·(scale−32)·kvalues_iq4nl[q]. It
// panics as Q4KToF32 does.
func IQ4XSToF32(dst []float32, w []byte) {
	checkK("IQ4XSToF32", len(w), len(dst), iq4XSBlockBytes)
	var sc [8]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*iq4XSBlockBytes : (b+1)*iq4XSBlockBytes]
		iq4XSScales(&sc, blk)
		lutBlocks(dst[b*kBlockSize:(b+1)*kBlockSize], blk[8:], 16, sc[:], &iq4Levels8)
	}
}

// iq4XSScales sets sc[ib] = d·(scale_ib − 32) for the 8 sub-blocks of the
// iq4_xs super-block blk.
func iq4XSScales(sc *[8]float32, blk []byte) {
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
	sh := binary.LittleEndian.Uint16(blk[2:])
	for ib := range sc {
		ls := int(blk[4+ib/2]>>(4*uint(ib%2))&15) | int(sh>>(2*uint(ib))&3)<<4
		sc[ib] = d * float32(ls-32)
	}
}

// MXFP4ToF32 sets dst to the values of the len(dst)/32 mxfp4 blocks at w
// (17 bytes each: an E8M0 exponent e, then 16 bytes of e2m1 codes), bit for
// bit as ggml's dequantize_row_mxfp4 computes them:
// kvalues_mxfp4[q]·2^(e−128). It panics unless len(dst) is a multiple of 32
// and w holds len(dst)/32 blocks.
func MXFP4ToF32(dst []float32, w []byte) {
	if len(dst)%32 != 0 || len(w) < len(dst)/32*mxfp4BlockBytes {
		panic(fmt.Sprintf("simd: MXFP4ToF32: %d values is not whole blocks of 32, or %d bytes are too few", len(dst), len(w)))
	}
	var sc [64]float32
	nb := len(dst) / 32
	for b := 0; b < nb; b += len(sc) {
		n := min(len(sc), nb-b)
		for i := 0; i < n; i++ {
			sc[i] = e8m0Half(w[(b+i)*mxfp4BlockBytes])
		}
		lutBlocks(dst[32*b:32*(b+n)], w[b*mxfp4BlockBytes+1:], mxfp4BlockBytes, sc[:n], &mxfp4Levels)
	}
}

// e8m0Half is ggml's ggml_e8m0_to_fp32_half: 2^(e−128) (subnormal for e < 2).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func lutBlocksGeneric(dst []float32, codes []byte, stride int, sc []float32, table *[16]int8) {
	for b, f := range sc {
		q, y := codes[b*stride:b*stride+16], dst[32*b:32*b+32]
		for j, c := range q {
			y[j] = f * float32(table[c&15])
			y[j+16] = f * float32(table[c>>4])
		}
	}
}

// q4KScales sets sc[2g] = d·scale_g and sc[2g+1] = dmin·min_g for the 8
// groups of the q4_K super-block blk (ggml's get_scale_min_k4 packing).
func q4KScales(sc []float32, blk []byte) {
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
	dmin := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))
	q := blk[4:16]
	for j := 0; j < 8; j++ {
		var s, m uint8
		if j < 4 {
			s, m = q[j]&63, q[j+4]&63
		} else {
			s, m = q[j+4]&15|(q[j-4]>>6)<<4, q[j+4]>>4|(q[j]>>6)<<4
		}
		sc[2*j], sc[2*j+1] = d*float32(s), dmin*float32(m)
	}
}

// q6KScales sets sc[j] = d·scale_j for the 16 groups of the q6_K
// super-block blk.
func q6KScales(sc []float32, blk []byte) {
	d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[208:]))
	for j := 0; j < 16; j++ {
		sc[j] = d * float32(int8(blk[192+j]))
	}
}

// dotQ4KGeneric is the twin: each value decoded as ggml's
// dequantize_row_q4_K rounds it, times x, summed in order per group.
func dotQ4KGeneric(w []byte, x []float32) float32 {
	var s float32
	var sc [16]float32
	for b := 0; b < len(x)/kBlockSize; b++ {
		blk := w[b*q4KBlockBytes : (b+1)*q4KBlockBytes]
		q4KScales(sc[:], blk)
		xb := x[b*kBlockSize : (b+1)*kBlockSize]
		for c := 0; c < 4; c++ {
			qs := blk[16+32*c : 48+32*c]
			var p0, p1 float32
			for l, q := range qs {
				p0 += float32(float32(sc[4*c]*float32(q&15))-sc[4*c+1]) * xb[64*c+l]
				p1 += float32(float32(sc[4*c+2]*float32(q>>4))-sc[4*c+3]) * xb[64*c+32+l]
			}
			s += p0 + p1
		}
	}
	return s
}

// dotQ6KGeneric is the twin for q6_K.
func dotQ6KGeneric(w []byte, x []float32) float32 {
	var s float32
	var sc [16]float32
	for b := 0; b < len(x)/kBlockSize; b++ {
		blk := w[b*q6KBlockBytes : (b+1)*q6KBlockBytes]
		q6KScales(sc[:], blk)
		for h := 0; h < 2; h++ {
			ql, qh := blk[64*h:64*h+64], blk[128+32*h:160+32*h]
			xb := x[b*kBlockSize+128*h:]
			var p [4]float32
			for l := 0; l < 32; l++ {
				q := [4]int{
					int(ql[l]&15|(qh[l]&3)<<4) - 32,
					int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32,
					int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32,
					int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32,
				}
				for k := range q {
					p[k] += float32(sc[8*h+(l+32*k)/16]*float32(q[k])) * xb[l+32*k]
				}
			}
			s += (p[0] + p[1]) + (p[2] + p[3])
		}
	}
	return s
}

func q4KToF32Generic(dst []float32, w []byte) {
	var sc [16]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*q4KBlockBytes : (b+1)*q4KBlockBytes]
		q4KScales(sc[:], blk)
		y := dst[b*kBlockSize : (b+1)*kBlockSize]
		for c := 0; c < 4; c++ {
			for l, q := range blk[16+32*c : 48+32*c] {
				y[64*c+l] = float32(sc[4*c]*float32(q&15)) - sc[4*c+1]
				y[64*c+32+l] = float32(sc[4*c+2]*float32(q>>4)) - sc[4*c+3]
			}
		}
	}
}

func q6KToF32Generic(dst []float32, w []byte) {
	var sc [16]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*q6KBlockBytes : (b+1)*q6KBlockBytes]
		q6KScales(sc[:], blk)
		for h := 0; h < 2; h++ {
			ql, qh := blk[64*h:64*h+64], blk[128+32*h:160+32*h]
			y := dst[b*kBlockSize+128*h:]
			for l := 0; l < 32; l++ {
				y[l] = sc[8*h+l/16] * float32(int(ql[l]&15|(qh[l]&3)<<4)-32)
				y[l+32] = sc[8*h+2+l/16] * float32(int(ql[l+32]&15|(qh[l]>>2&3)<<4)-32)
				y[l+64] = sc[8*h+4+l/16] * float32(int(ql[l]>>4|(qh[l]>>4&3)<<4)-32)
				y[l+96] = sc[8*h+6+l/16] * float32(int(ql[l+32]>>4|(qh[l]>>6&3)<<4)-32)
			}
		}
	}
}

// q5KCode returns code l (0..31) of group 2c+i of the q5_K super-block blk.
func q5KCode(blk []byte, c, i, l int) uint8 {
	q := blk[48+32*c+l]
	if i == 1 {
		q >>= 4
	}
	return q&15 | (blk[16+l]>>uint(2*c+i)&1)<<4
}

func dotQ5KGeneric(w []byte, x []float32) float32 {
	var s float32
	var sc [16]float32
	for b := 0; b < len(x)/kBlockSize; b++ {
		blk := w[b*q5KBlockBytes : (b+1)*q5KBlockBytes]
		q4KScales(sc[:], blk)
		xb := x[b*kBlockSize : (b+1)*kBlockSize]
		for c := 0; c < 4; c++ {
			var p0, p1 float32
			for l := 0; l < 32; l++ {
				p0 += float32(float32(sc[4*c]*float32(q5KCode(blk, c, 0, l)))-sc[4*c+1]) * xb[64*c+l]
				p1 += float32(float32(sc[4*c+2]*float32(q5KCode(blk, c, 1, l)))-sc[4*c+3]) * xb[64*c+32+l]
			}
			s += p0 + p1
		}
	}
	return s
}

func q5KToF32Generic(dst []float32, w []byte) {
	var sc [16]float32
	for b := 0; b < len(dst)/kBlockSize; b++ {
		blk := w[b*q5KBlockBytes : (b+1)*q5KBlockBytes]
		q4KScales(sc[:], blk)
		y := dst[b*kBlockSize : (b+1)*kBlockSize]
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				y[64*c+l] = float32(sc[4*c]*float32(q5KCode(blk, c, 0, l))) - sc[4*c+1]
				y[64*c+32+l] = float32(sc[4*c+2]*float32(q5KCode(blk, c, 1, l))) - sc[4*c+3]
			}
		}
	}
}

// dotKSumsGeneric is the twin of DotQ4KSums (blockBytes 144, code q4KCode)
// and DotQ5KSums (176, q5KCode).
func dotKSumsGeneric(w []byte, x, xs []float32, blockBytes int, code func(blk []byte, c, i, l int) uint8) float32 {
	var s float32
	var sc [16]float32
	for b := 0; b < len(x)/kBlockSize; b++ {
		blk := w[b*blockBytes : (b+1)*blockBytes]
		q4KScales(sc[:], blk)
		xb := x[b*kBlockSize : (b+1)*kBlockSize]
		var mins float32
		for g := 0; g < 8; g++ {
			mins += sc[2*g+1] * xs[8*b+g]
		}
		var p float32
		for c := 0; c < 4; c++ {
			var pl, ph float32
			for l := 0; l < 32; l++ {
				pl += float32(code(blk, c, 0, l)) * xb[64*c+l]
				ph += float32(code(blk, c, 1, l)) * xb[64*c+32+l]
			}
			p += sc[4*c]*pl + sc[4*c+2]*ph
		}
		s += p - mins
	}
	return s
}

// q4KCode returns code l (0..31) of group 2c+i of the q4_K super-block blk.
func q4KCode(blk []byte, c, i, l int) uint8 {
	q := blk[16+32*c+l]
	if i == 1 {
		return q >> 4
	}
	return q & 15
}

func dotQ4KSumsGeneric(w []byte, x, xs []float32) float32 {
	return dotKSumsGeneric(w, x, xs, q4KBlockBytes, q4KCode)
}

func dotQ5KSumsGeneric(w []byte, x, xs []float32) float32 {
	return dotKSumsGeneric(w, x, xs, q5KBlockBytes, q5KCode)
}
