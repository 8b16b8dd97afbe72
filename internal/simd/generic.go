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
