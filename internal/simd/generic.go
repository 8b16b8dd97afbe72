package simd

import "encoding/binary"

// This file holds the pure-Go reference twins of every kernel. They build on
// every platform (no build constraint) so that the tests can compare them with
// the assembly on amd64; in purego builds and on other architectures the
// exported functions route straight to them (see dispatch_generic.go).
//
// The twins do no argument checking: the exported wrappers in simd.go do it.
// Dot products keep four partial sums, so their rounding differs from both a
// naive left-to-right sum and the vector kernels by a few ULPs of Σ|a_i*b_i|.

// q80BlockSize is the number of values in one GGML Q8_0 block, and
// q80BlockBytes the bytes it takes: a little-endian binary16 scale d followed
// by 32 int8 codes; value i of the block is d*code[i].
const (
	q80BlockSize  = 32
	q80BlockBytes = 34
)

// q40BlockBytes and q41BlockBytes are the sizes of GGML Q4_0 and Q4_1 blocks
// of q80BlockSize (32) values. A Q4_0 block is a binary16 scale d and 16
// bytes of 4-bit codes; a Q4_1 block is d, a binary16 offset m and the same
// 16 bytes. Byte j holds value j in its low nibble and value j+16 in its
// high nibble.
const (
	q40BlockBytes = 18
	q41BlockBytes = 20
)

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyF32Generic(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}

func scaleF32Generic(x []float32, alpha float32) {
	for i := range x {
		x[i] *= alpha
	}
}

func sumF32Generic(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16Generic(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += F16ToF32Scalar(w[i]) * x[i]
		s1 += F16ToF32Scalar(w[i+1]) * x[i+1]
		s2 += F16ToF32Scalar(w[i+2]) * x[i+2]
		s3 += F16ToF32Scalar(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += F16ToF32Scalar(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16Generic(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += BF16ToF32Scalar(w[i]) * x[i]
		s1 += BF16ToF32Scalar(w[i+1]) * x[i+1]
		s2 += BF16ToF32Scalar(w[i+2]) * x[i+2]
		s3 += BF16ToF32Scalar(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += BF16ToF32Scalar(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyF16Generic(y []float32, alpha float32, x []uint16) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * F16ToF32Scalar(x[i])
	}
}

func axpyBF16Generic(y []float32, alpha float32, x []uint16) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * BF16ToF32Scalar(x[i])
	}
}

// dotQ80Generic sums each block's code*x in float32, then scales the block sum
// by d, the same association the vector kernel uses.
func dotQ80Generic(w []byte, x []float32) float32 {
	nb := len(x) / q80BlockSize
	w = w[:nb*q80BlockBytes]
	var s float32
	for b := 0; b < nb; b++ {
		blk := w[b*q80BlockBytes : (b+1)*q80BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		xb := x[b*q80BlockSize : (b+1)*q80BlockSize]
		var p0, p1, p2, p3 float32
		for i := 0; i < q80BlockSize; i += 4 {
			p0 += float32(int8(blk[2+i])) * xb[i]
			p1 += float32(int8(blk[3+i])) * xb[i+1]
			p2 += float32(int8(blk[4+i])) * xb[i+2]
			p3 += float32(int8(blk[5+i])) * xb[i+3]
		}
		s += d * ((p0 + p1) + (p2 + p3))
	}
	return s
}

func f16ToF32Generic(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = F16ToF32Scalar(h)
	}
}

func bf16ToF32Generic(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = BF16ToF32Scalar(h)
	}
}

func f32ToF16Generic(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, f := range src {
		dst[i] = F32ToF16Scalar(f)
	}
}

func f32ToBF16Generic(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, f := range src {
		dst[i] = F32ToBF16Scalar(f)
	}
}

// The matrix products run the weight row in the outer loop so that it stays in
// cache while every token row meets it.

func matMulF32Generic(dst []float32, ldd int, x []float32, nt, cols int, w []float32, r0, r1 int) {
	for r := r0; r < r1; r++ {
		wr := w[r*cols : (r+1)*cols]
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = dotF32Generic(wr, x[t*cols:(t+1)*cols])
		}
	}
}

func matMulF16Generic(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	for r := r0; r < r1; r++ {
		wr := w[r*cols : (r+1)*cols]
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = dotF16Generic(wr, x[t*cols:(t+1)*cols])
		}
	}
}

func matMulBF16Generic(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	for r := r0; r < r1; r++ {
		wr := w[r*cols : (r+1)*cols]
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = dotBF16Generic(wr, x[t*cols:(t+1)*cols])
		}
	}
}

func matMulQ80Generic(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	rowBytes := cols / q80BlockSize * q80BlockBytes
	for r := r0; r < r1; r++ {
		wr := w[r*rowBytes : (r+1)*rowBytes]
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = dotQ80Generic(wr, x[t*cols:(t+1)*cols])
		}
	}
}

// The unpacking twins compute code*scale + bias as a product rounded to
// float32 and then a sum: the explicit float32 conversion forbids the
// compiler to fuse them, and the assembly uses separate VMULPS and VADDPS, so
// both paths give the same bits.

func u8ToF32Generic(dst []float32, src []byte, scale, bias float32) {
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = float32(float32(c)*scale) + bias
	}
}

func i8ToF32Generic(dst []float32, src []byte, scale float32) {
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = float32(int8(c)) * scale
	}
}

func u4ToF32Generic(dst []float32, src []byte, scale, bias float32) {
	src = src[:len(dst)/2]
	for k, c := range src {
		dst[2*k] = float32(float32(c&15)*scale) + bias
		dst[2*k+1] = float32(float32(c>>4)*scale) + bias
	}
}

func u2ToF32Generic(dst []float32, src []byte, scale, bias float32) {
	src = src[:len(dst)/4]
	for k, c := range src {
		d := dst[4*k : 4*k+4]
		d[0] = float32(float32(c&3)*scale) + bias
		d[1] = float32(float32(c>>2&3)*scale) + bias
		d[2] = float32(float32(c>>4&3)*scale) + bias
		d[3] = float32(float32(c>>6)*scale) + bias
	}
}

func u8ToF32VecGeneric(dst []float32, src []byte, s, z []float32) {
	src, s, z = src[:len(dst)], s[:len(dst)], z[:len(dst)]
	for i, c := range src {
		dst[i] = float32(float32(c)*s[i]) + z[i]
	}
}

func u4ToF32VecGeneric(dst []float32, src []byte, s, z []float32) {
	src, s, z = src[:len(dst)/2], s[:len(dst)], z[:len(dst)]
	for k, c := range src {
		i := 2 * k
		dst[i] = float32(float32(c&15)*s[i]) + z[i]
		dst[i+1] = float32(float32(c>>4)*s[i+1]) + z[i+1]
	}
}

func u2ToF32VecGeneric(dst []float32, src []byte, s, z []float32) {
	src, s, z = src[:len(dst)/4], s[:len(dst)], z[:len(dst)]
	for k, c := range src {
		for m := 0; m < 4; m++ {
			i := 4*k + m
			dst[i] = float32(float32(c>>(2*m)&3)*s[i]) + z[i]
		}
	}
}

// The grouped twins give group g, values [g*group, (g+1)*group), its own
// scale[g] and bias[g]. Where every group starts on a byte boundary of the
// packed codes they run the ungrouped twin group by group; otherwise value
// by value.

func u8ToF32GroupsGeneric(dst []float32, src []byte, group int, scale, bias []float32) {
	bias = bias[:len(scale)]
	for g, s := range scale {
		i := g * group
		u8ToF32Generic(dst[i:i+group], src[i:i+group], s, bias[g])
	}
}

func u4ToF32GroupsGeneric(dst []float32, src []byte, group int, scale, bias []float32) {
	bias = bias[:len(scale)]
	if group%2 == 0 {
		for g, s := range scale {
			i := g * group
			u4ToF32Generic(dst[i:i+group], src[i/2:(i+group)/2], s, bias[g])
		}
		return
	}
	dst = dst[:len(scale)*group]
	for i := range dst {
		g := i / group
		dst[i] = float32(float32(src[i/2]>>(4*(i%2))&15)*scale[g]) + bias[g]
	}
}

func u2ToF32GroupsGeneric(dst []float32, src []byte, group int, scale, bias []float32) {
	bias = bias[:len(scale)]
	if group%4 == 0 {
		for g, s := range scale {
			i := g * group
			u2ToF32Generic(dst[i:i+group], src[i/4:(i+group)/4], s, bias[g])
		}
		return
	}
	dst = dst[:len(scale)*group]
	for i := range dst {
		g := i / group
		dst[i] = float32(float32(src[i/4]>>(2*(i%4))&3)*scale[g]) + bias[g]
	}
}

func q80ToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*q80BlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*q80BlockBytes : (b+1)*q80BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for i := range out {
			out[i] = d * float32(int8(blk[2+i]))
		}
	}
}

func q40ToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*q40BlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*q40BlockBytes : (b+1)*q40BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for j, c := range blk[2:] {
			out[j] = d * float32(int(c&15)-8)
			out[j+16] = d * float32(int(c>>4)-8)
		}
	}
}

func q41ToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*q41BlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*q41BlockBytes : (b+1)*q41BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		m := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for j, c := range blk[4:] {
			out[j] = float32(d*float32(c&15)) + m
			out[j+16] = float32(d*float32(c>>4)) + m
		}
	}
}

// The attention twins run the query rows in the outer loop: one dot product
// per (query, row) pair for the scores, one axpy per (query, row) pair for
// the weighted sum of rows.

func scoresF32Generic(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
	for i := 0; i < nq; i++ {
		qi := q[i*dim : (i+1)*dim]
		for j := 0; j < n; j++ {
			dst[i*ldd+j] = dotF32Generic(qi, rows[j*dim:(j+1)*dim])
		}
	}
}

func accumulateF32Generic(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
	for i := 0; i < nq; i++ {
		ai := acc[i*dim : (i+1)*dim]
		for j := 0; j < n; j++ {
			axpyF32Generic(ai, w[i*ldw+j], rows[j*dim:(j+1)*dim])
		}
	}
}
