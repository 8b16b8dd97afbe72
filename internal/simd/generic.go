package simd

import (
	"encoding/binary"
	"math"
)

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

// q50BlockBytes, q51BlockBytes and iq4nlBlockBytes are the sizes of GGML
// Q5_0, Q5_1 and IQ4_NL blocks of 32 values. Q5_0 is d, a little-endian
// uint32 qh and 16 bytes qs; Q5_1 is d, m, qh and qs; value j's 5-bit code
// is its nibble (laid out as in Q4_0) with bit j of qh on top. IQ4_NL is d
// and 16 bytes of 4-bit indices into iq4nlLevels, laid out as in Q4_0.
const (
	q50BlockBytes   = 22
	q51BlockBytes   = 24
	iq4nlBlockBytes = 18
)

// iq4nlLevels is GGML's kvalues_iq4nl, the IQ4_NL levels. It is never
// written.
var iq4nlLevels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

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

func mulF32Generic(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] = x[i] * y[i]
	}
}

// mulAddF32Generic rounds the product to float32 before the sum: the
// explicit conversion forbids the compiler to fuse them (which it may do
// for acc[i] += x[i]*y[i] where FMA is available), so that the result is
// the assembly's VMULPS then VADDPS, bit for bit.
func mulAddF32Generic(acc, x, y []float32) {
	x, y = x[:len(acc)], y[:len(acc)]
	for i := range acc {
		acc[i] += float32(x[i] * y[i])
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

// u4Code returns 4-bit code i of a run of n codes.
func u4Code(src []byte, n, i int) uint8 {
	k, sh := U4Pos(i, n)
	return src[k] >> sh & 15
}

func u4ToF32Generic(dst []float32, src []byte, scale, bias float32) {
	n := len(dst)
	src = src[:n/2]
	for b := 0; b < n; b += 32 {
		h := min(32, n-b) / 2
		for k, c := range src[b/2 : b/2+h] {
			dst[b+k] = float32(float32(c&15)*scale) + bias
			dst[b+h+k] = float32(float32(c>>4)*scale) + bias
		}
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
	n := len(dst)
	src, s, z = src[:n/2], s[:n], z[:n]
	for b := 0; b < n; b += 32 {
		h := min(32, n-b) / 2
		for k, c := range src[b/2 : b/2+h] {
			i, j := b+k, b+h+k
			dst[i] = float32(float32(c&15)*s[i]) + z[i]
			dst[j] = float32(float32(c>>4)*s[j]) + z[j]
		}
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
// scale[g] and bias[g]. Where every group is a whole run of its own (8-bit
// codes, 2-bit groups on a byte boundary, 4-bit groups of whole blocks of
// 32) they run the ungrouped twin group by group; otherwise value by value.

func u8ToF32GroupsGeneric(dst []float32, src []byte, group int, scale, bias []float32) {
	bias = bias[:len(scale)]
	for g, s := range scale {
		i := g * group
		u8ToF32Generic(dst[i:i+group], src[i:i+group], s, bias[g])
	}
}

func u4ToF32GroupsGeneric(dst []float32, src []byte, group int, scale, bias []float32) {
	bias = bias[:len(scale)]
	if group%32 == 0 {
		for g, s := range scale {
			i := g * group
			u4ToF32Generic(dst[i:i+group], src[i/2:(i+group)/2], s, bias[g])
		}
		return
	}
	dst = dst[:len(scale)*group]
	n := len(dst)
	for i := range dst {
		g := i / group
		dst[i] = float32(float32(u4Code(src, n, i))*scale[g]) + bias[g]
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

// The table-lookup twins copy table entries, so they give the assembly's
// bits whatever the table holds.

func lut4ToF32Generic(dst []float32, src []byte, table *[16]float32) {
	src = src[:len(dst)/2]
	for k, c := range src {
		d := dst[2*k : 2*k+2 : 2*k+2]
		d[0] = table[c&15]
		d[1] = table[c>>4]
	}
}

func lut3ToF32Generic(dst []float32, src []byte, table *[8]float32) {
	src = src[:len(dst)/8*3]
	for g := 0; g+3 <= len(src); g += 3 {
		w := uint32(src[g]) | uint32(src[g+1])<<8 | uint32(src[g+2])<<16
		d := dst[g/3*8 : g/3*8+8 : g/3*8+8]
		for k := range d {
			d[k] = table[w>>(3*k)&7]
		}
	}
}

func lut2ToF32Generic(dst []float32, src []byte, table *[4]float32) {
	src = src[:len(dst)/4]
	for k, c := range src {
		d := dst[4*k : 4*k+4 : 4*k+4]
		d[0] = table[c&3]
		d[1] = table[c>>2&3]
		d[2] = table[c>>4&3]
		d[3] = table[c>>6]
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

// e5m2Value returns the value of the OCP E5M2 code c, which is the top byte
// of the binary16 with the same value (NaN codes give quiet NaNs, as
// F16ToF32Scalar makes them).
func e5m2Value(c byte) float32 { return F16ToF32Scalar(uint16(c) << 8) }

// e4m3Value returns the value of the OCP E4M3FN code c. The binary16 with
// bits (c&0x7f)<<7 | (c&0x80)<<8 is value/256 exactly (the exponent biases
// are 7 and 15; subnormals map to subnormals), so the product by 256 is
// exact. The codes 0x7f and 0xff are the NaNs: the quiet NaN 0x7fc00000
// with the code's sign. This is how pkg/quant builds its decoding table.
func e4m3Value(c byte) float32 {
	if c&0x7f == 0x7f {
		return math.Float32frombits(uint32(c&0x80)<<24 | 0x7fc0_0000)
	}
	return F16ToF32Scalar(uint16(c&0x80)<<8|uint16(c&0x7f)<<7) * 256
}

// scaleValue returns v*scale, rounded once. A NaN v is returned as it is
// (it is already quiet), whatever scale is: that is what the product gives
// when scale is not a NaN, and what the assembly gives when it is too (x86
// returns the first NaN operand, and the kernels put the value first).
func scaleValue(v, scale float32) float32 {
	if v != v {
		return v
	}
	return v * scale
}

func e5m2ToF32Generic(dst []float32, src []byte, scale float32) {
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = scaleValue(e5m2Value(c), scale)
	}
}

func e4m3ToF32Generic(dst []float32, src []byte, scale float32) {
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = scaleValue(e4m3Value(c), scale)
	}
}

func q50ToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*q50BlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*q50BlockBytes : (b+1)*q50BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		qh := binary.LittleEndian.Uint32(blk[2:])
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for j, c := range blk[6:] {
			lo := int(c&15) | int(qh>>j&1)<<4
			hi := int(c>>4) | int(qh>>(j+16)&1)<<4
			out[j] = d * float32(lo-16)
			out[j+16] = d * float32(hi-16)
		}
	}
}

func q51ToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*q51BlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*q51BlockBytes : (b+1)*q51BlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		m := F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))
		qh := binary.LittleEndian.Uint32(blk[4:])
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for j, c := range blk[8:] {
			lo := c&15 | byte(qh>>j&1)<<4
			hi := c>>4 | byte(qh>>(j+16)&1)<<4
			out[j] = float32(d*float32(lo)) + m
			out[j+16] = float32(d*float32(hi)) + m
		}
	}
}

func iq4nlToF32Generic(dst []float32, src []byte) {
	nb := len(dst) / q80BlockSize
	src = src[:nb*iq4nlBlockBytes]
	for b := 0; b < nb; b++ {
		blk := src[b*iq4nlBlockBytes : (b+1)*iq4nlBlockBytes]
		d := F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
		out := dst[b*q80BlockSize : (b+1)*q80BlockSize]
		for j, c := range blk[2:] {
			out[j] = d * float32(iq4nlLevels[c&15])
			out[j+16] = d * float32(iq4nlLevels[c>>4])
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

// The softmax twins. maxF32Generic defines MaxF32's result exactly (the
// first NaN, else the maximum with a zero maximum made +0), and
// expShiftSumGeneric ExpShiftSum's results and sum: the assembly computes
// the same operations, in the same order, so both paths give the same
// bits.

func maxF32Generic(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		} else if v != v {
			return v
		}
	}
	if m == 0 {
		return 0 // +0, also when every zero was -0
	}
	return m
}

// The constants of expF32, as float32 (the same literals as in
// _generate/softmax.go). expLo is float32(ln 2^-126) rounded up and expHi
// the largest float32 whose exponential is finite; c1 + c2 is ln 2 split
// as in Cephes (c1 has 9 significant bits, so n*c1 is exact for |n| < 2^15),
// and p0..p5 are Cephes' expf polynomial.
const (
	expLo    float32 = -87.33654
	expHi    float32 = 88.72283
	expLog2e float32 = 1.44269504088896341
	expMagic float32 = 12582912 // 1.5*2^23: adding it rounds to an integer
	expC1    float32 = 0.693359375
	expC2    float32 = -2.12194440e-4
	expP0    float32 = 1.9875691500e-4
	expP1    float32 = 1.3981999507e-3
	expP2    float32 = 8.3334519073e-3
	expP3    float32 = 4.1665795894e-2
	expP4    float32 = 1.6666665459e-1
	expP5    float32 = 5.0000001201e-1
)

// expF32 returns e^t in float32 (see ExpShiftSum for the accuracy): 0 for
// t < expLo (results below the smallest normal float32 flush to 0), +Inf
// for t > expHi, t itself for a NaN. Otherwise, with n = round(t*log2e) to
// nearest even, r = t - n*ln2 in two steps and e^t = e^r * 2^n:
//
//   - k = fma(t, log2e, magic) holds n in its low mantissa bits (magic is
//     1.5*2^23, so the sum is rounded to an integer), and n = k - magic
//     exactly;
//   - r = t - n*c1 is exact (n*c1 is exact, and so is the difference, by
//     Sterbenz's lemma when n != 0); r = fma(-n, c2, r);
//   - e^r = fma(p(r), r*r, r) + 1, with p evaluated by Horner's rule in
//     fused steps;
//   - 2^n is applied by adding n<<23 (k's bits shifted: magic's own bits
//     shift out) to the bits of e^r, which is exact: e^r lies in [0.7, 1.42],
//     and the result stays normal and finite for t in [expLo, expHi].
//
// fma is fma32, which matches VFMADD231PS here (see fma32); the other
// products and sums are rounded separately (the float32 conversions forbid
// the compiler to fuse them). The assembly runs exactly these operations,
// so the two agree bit for bit.
func expF32(t float32) float32 {
	switch {
	case t < expLo:
		return 0
	case t > expHi:
		return float32(math.Inf(1))
	case t != t:
		return t
	}
	k := fma32(t, expLog2e, expMagic)
	n := k - expMagic
	r := t - float32(n*expC1)
	r = fma32(-n, expC2, r)
	p := fma32(expP0, r, expP1)
	p = fma32(p, r, expP2)
	p = fma32(p, r, expP3)
	p = fma32(p, r, expP4)
	p = fma32(p, r, expP5)
	y := fma32(p, float32(r*r), r) + 1
	return math.Float32frombits(math.Float32bits(y) + math.Float32bits(k)<<23)
}

// fma32 returns a*b + c computed as math.FMA(a, b, c) in float64, then
// rounded to float32. It is written with a float64 product and sum, which
// is the same value (the product of two float32s is exact in float64, so
// the sum rounds once, as math.FMA does) without math.FMA's run-time CPU
// check, which makes it several times slower on amd64 without GOAMD64=v3.
//
// Rounding twice (to float64, then to float32) can differ from the single
// rounding of a float32 fused multiply-add such as VFMADD231PS when the
// float64 result lies exactly halfway between two float32s. For expF32's
// operands it never does: TestExpExhaustive compares the assembly with
// expF32 on all 2^32 float32 arguments (and expF32 depends on nothing
// else), so the two agree bit for bit on every input.
func fma32(a, b, c float32) float32 {
	return float32(float64(a)*float64(b) + float64(c))
}

// expShiftSumGeneric sums the results of the len(x)&^7 leading values in 8
// float64 lanes, value i into lane i%8, combined pairwise as the assembly
// does, then adds the tail's results one by one (expShiftTail, which the
// assembly path shares).
func expShiftSumGeneric(x []float32, scale, shift float32) float64 {
	n := len(x) &^ 7
	var l [8]float64
	for i := 0; i < n; i += 8 {
		v := x[i : i+8 : i+8]
		for j := range v {
			e := expF32(float32(v[j]*scale) - shift)
			v[j] = e
			l[j] += float64(e)
		}
	}
	s := ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
	return expShiftTail(s, x[n:], scale, shift)
}

// expShiftTail sets x[i] = expF32(float32(x[i]*scale) - shift) and returns
// s plus the results, added in order.
func expShiftTail(s float64, x []float32, scale, shift float32) float64 {
	for i, v := range x {
		e := expF32(float32(v*scale) - shift)
		x[i] = e
		s += float64(e)
	}
	return s
}

// The packed-code attention twins work on columns [c0, c1) of each row, so
// that the assembly dispatchers can finish a tail with them (1 to 7
// columns of 8-bit codes, 1 to 31 of 4-bit ones: a 4-bit row is a run of c1
// codes, its last block short).

// codeAt returns code c of the row at b, of 8 bits or, in a run of cols
// codes, of 4 bits.
func codeAt(b []byte, bits, c, cols int) float32 {
	if bits == 8 {
		return float32(b[c])
	}
	return float32(u4Code(b, cols, c))
}

// scoresCodesGeneric sets (add false) or adds to (add true) dst[i*ldd+j]
// the sum over columns [c0, c1) of q[i*ldq+c]*code(j, c), from left to right.
func scoresCodesGeneric(bits int, add bool, dst []float32, ldd int, q []float32, ldq, nq, c0, c1 int, codes []byte, ldc, n int) {
	for i := 0; i < nq; i++ {
		qi := q[i*ldq : i*ldq+c1]
		for j := 0; j < n; j++ {
			row := codes[j*ldc:]
			var s float32
			for c := c0; c < c1; c++ {
				s += qi[c] * codeAt(row, bits, c, c1)
			}
			if add {
				dst[i*ldd+j] += s
			} else {
				dst[i*ldd+j] = s
			}
		}
	}
}

// accumulateCodesGeneric sets acc[i*lda+c] += bias[i] + Σ_j w[i*ldw+j]*code(j, c)
// for columns [c0, c1), summing the rows in order onto bias[i].
func accumulateCodesGeneric(bits int, acc []float32, lda int, bias, w []float32, ldw, nq, c0, c1 int, codes []byte, ldc, n int) {
	for i := 0; i < nq; i++ {
		wi := w[i*ldw : i*ldw+n]
		for c := c0; c < c1; c++ {
			s := bias[i]
			for j, wj := range wi {
				s += wj * codeAt(codes[j*ldc:], bits, c, c1)
			}
			acc[i*lda+c] += s
		}
	}
}
