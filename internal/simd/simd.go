package simd

import "fmt"

// The exported kernels check their arguments, then call the unexported
// dispatchers (dotF32, matMulF16, ...) that dispatch_amd64.go or
// dispatch_generic.go define. A length mismatch is a programmer error and
// panics.

// ForceGeneric makes every kernel use its pure-Go twin until restore is
// called. It is for tests and benchmarks only: it changes package state, so it
// must not run while another goroutine is inside a kernel. Where no assembly
// is built (purego, other architectures) it changes nothing.
func ForceGeneric() (restore func()) {
	old, old512 := useAsm, useAVX512
	useAsm, useAVX512 = false, false
	return func() { useAsm, useAVX512 = old, old512 }
}

// ForceAVX2 makes every kernel use the AVX2 set, not the AVX-512 kernels,
// until restore is called; where those are not selected (a CPU without
// AVX-512, ForceGeneric, purego) it changes nothing. It is for tests and
// benchmarks that compare the two sets; like ForceGeneric it changes
// package state, so it must not run while another goroutine is inside a
// kernel.
func ForceAVX2() (restore func()) {
	old := useAVX512
	useAVX512 = false
	return func() { useAVX512 = old }
}

// ForceAVX512 undoes the AMD Zen choices (see Kernels) until restore is
// called: an AMD Zen 4 or Zen 5 then runs the avx512 set as every other
// CPU with AVX-512 does. Elsewhere it changes nothing. It is for
// benchmarks that compare the two; like ForceAVX2 it changes package
// state.
func ForceAVX512() (restore func()) { return forceZen(false, false) }

// ForceZen4 selects the Zen 4 choice and ForceZen5 the Zen 5 one (see
// Kernels) on any CPU that runs the avx512 set, until restore is called;
// elsewhere they change nothing. They are for benchmarks that measure one
// choice on another AVX-512 CPU; like ForceAVX2 they change package state.
func ForceZen4() (restore func()) { return forceZen4(true) }

// ForceZen5 is ForceZen4 for the Zen 5 choice.
func ForceZen5() (restore func()) { return forceZen(true, false) }

// forceZen4 selects (on) or deselects the Zen 4 choice, decode and
// prefill, until restore is called, on any CPU; where the avx512 set does
// not run it changes nothing. It is for tests, as ForceAVX2.
func forceZen4(on bool) (restore func()) { return forceZen(on, on) }

// forceZen selects the Zen 4 decode choice (decode) and, with it, the Zen
// 4 prefill choice (half512; see isHalf512), until restore is called.
func forceZen(decode, half512 bool) (restore func()) {
	old, oldHalf := useZen4, useHalf512
	useZen4, useHalf512 = decode, half512
	return func() { useZen4, useHalf512 = old, oldHalf }
}

func checkLen(op string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("simd: %s: length mismatch %d != %d", op, a, b))
	}
}

// DotF32 returns Σ a[i]*b[i]. The summation order is unspecified (the vector
// kernels keep several partial sums), so results may differ from a
// left-to-right sum by rounding. It panics if len(a) != len(b).
func DotF32(a, b []float32) float32 {
	checkLen("DotF32", len(a), len(b))
	return dotF32(a, b)
}

// AxpyF32 sets y[i] += alpha*x[i]. It panics if len(x) != len(y).
func AxpyF32(y []float32, alpha float32, x []float32) {
	checkLen("AxpyF32", len(y), len(x))
	axpyF32(y, alpha, x)
}

// ScaleF32 sets x[i] *= alpha.
func ScaleF32(x []float32, alpha float32) {
	scaleF32(x, alpha)
}

// MulF32 sets dst[i] = x[i]*y[i]. dst may be x or y (the same slice, not
// an overlapping one). When x[i] and y[i] are both NaNs, which of the two
// the result carries is unspecified. It panics unless x and y have the
// length of dst.
func MulF32(dst, x, y []float32) {
	checkLen("MulF32", len(dst), len(x))
	checkLen("MulF32", len(dst), len(y))
	mulF32(dst, x, y)
}

// MulAddF32 sets acc[i] += x[i]*y[i], with the product rounded to float32
// before the sum (no fused multiply-add), as the unpacking functions
// compute code*scale + bias: every kernel set gives the same bits, up to
// which NaN a result carries when more than one operand is a NaN. (AxpyF32
// differs: its assembly fuses, so it agrees with its twin only up to
// rounding.) acc may be x or y (the same slice). It panics unless x and y
// have the length of acc.
func MulAddF32(acc, x, y []float32) {
	checkLen("MulAddF32", len(acc), len(x))
	checkLen("MulAddF32", len(acc), len(y))
	mulAddF32(acc, x, y)
}

// DotF16 returns Σ F16ToF32Scalar(w[i])*x[i], with w holding IEEE binary16
// bits. Summation order is unspecified, as for DotF32. It panics if
// len(w) != len(x).
func DotF16(w []uint16, x []float32) float32 {
	checkLen("DotF16", len(w), len(x))
	return dotF16(w, x)
}

// DotBF16 returns Σ BF16ToF32Scalar(w[i])*x[i], with w holding bfloat16 bits.
// Summation order is unspecified, as for DotF32. It panics if
// len(w) != len(x).
func DotBF16(w []uint16, x []float32) float32 {
	checkLen("DotBF16", len(w), len(x))
	return dotBF16(w, x)
}

// AxpyF16 sets y[i] += alpha*F16ToF32Scalar(x[i]). It panics if
// len(x) != len(y).
func AxpyF16(y []float32, alpha float32, x []uint16) {
	checkLen("AxpyF16", len(y), len(x))
	axpyF16(y, alpha, x)
}

// AxpyBF16 sets y[i] += alpha*BF16ToF32Scalar(x[i]). It panics if
// len(x) != len(y).
func AxpyBF16(y []float32, alpha float32, x []uint16) {
	checkLen("AxpyBF16", len(y), len(x))
	axpyBF16(y, alpha, x)
}

// DotQ80 returns Σ_i value(w, i)*x[i] where w holds len(x)/32 GGML Q8_0
// blocks: each block is 34 bytes, a little-endian binary16 scale d followed by
// 32 int8 codes, and value i of the block is d*code[i]. The kernels sum each
// block's code*x products before scaling them by d, so the result is
// Σ_b d_b*Σ_i code_i*x_i up to rounding. It panics unless len(x)%32 == 0 and
// len(w) == len(x)/32*34.
func DotQ80(w []byte, x []float32) float32 {
	checkQ80("DotQ80", len(x))
	checkLen("DotQ80", len(w), len(x)/q80BlockSize*q80BlockBytes)
	return dotQ80(w, x)
}

func checkQ80(op string, cols int) {
	if cols%q80BlockSize != 0 {
		panic(fmt.Sprintf("simd: %s: length %d is not a multiple of %d", op, cols, q80BlockSize))
	}
}

// F16ToF32 sets dst[i] = F16ToF32Scalar(src[i]). It panics if
// len(dst) != len(src).
func F16ToF32(dst []float32, src []uint16) {
	checkLen("F16ToF32", len(dst), len(src))
	f16ToF32(dst, src)
}

// BF16ToF32 sets dst[i] = BF16ToF32Scalar(src[i]). It panics if
// len(dst) != len(src).
func BF16ToF32(dst []float32, src []uint16) {
	checkLen("BF16ToF32", len(dst), len(src))
	bf16ToF32(dst, src)
}

// F32ToF16 sets dst[i] = F32ToF16Scalar(src[i]): round to nearest even,
// overflow to ±Inf, correctly rounded subnormals, NaN to a quiet NaN. It
// panics if len(dst) != len(src).
func F32ToF16(dst []uint16, src []float32) {
	checkLen("F32ToF16", len(dst), len(src))
	f32ToF16(dst, src)
}

// F32ToBF16 sets dst[i] = F32ToBF16Scalar(src[i]): round to nearest even,
// NaN to a quiet NaN. It panics if len(dst) != len(src).
func F32ToBF16(dst []uint16, src []float32) {
	checkLen("F32ToBF16", len(dst), len(src))
	f32ToBF16(dst, src)
}

// The unpacking functions turn integer codes into float32 through an affine
// map. They compute code*scale, round it to float32, then add the bias and
// round again (no fused multiply-add), so the assembly and the pure-Go paths
// give the same bits.

// U8ToF32 sets dst[i] = float32(src[i])*scale + bias. It panics if
// len(dst) != len(src).
func U8ToF32(dst []float32, src []byte, scale, bias float32) {
	checkLen("U8ToF32", len(dst), len(src))
	u8ToF32(dst, src, scale, bias)
}

// I8ToF32 sets dst[i] = float32(int8(src[i]))*scale. It panics if
// len(dst) != len(src).
func I8ToF32(dst []float32, src []byte, scale float32) {
	checkLen("I8ToF32", len(dst), len(src))
	i8ToF32(dst, src, scale)
}

// U4ToF32 sets dst[i] = code_i*scale + bias for a run of 4-bit codes packed
// in blocks of 32 as GGML's Q4_0 (see the package doc): byte k of a block
// holds code k in its low nibble and code k+16 in its high nibble; a last
// block of t < 32 codes pairs code k with code k+t/2. It panics if
// len(dst) != 2*len(src).
func U4ToF32(dst []float32, src []byte, scale, bias float32) {
	checkLen("U4ToF32", len(dst), 2*len(src))
	u4ToF32(dst, src, scale, bias)
}

// U4Pos returns where 4-bit code i of a run of n codes packed as for
// U4ToF32 is: byte k of the run, in its low nibble (shift 0) or its high
// nibble (shift 4).
func U4Pos(i, n int) (k int, shift uint) {
	b := i &^ 31
	h := min(32, n-b) / 2
	if i-b < h {
		return b/2 + i - b, 0
	}
	return b/2 + i - b - h, 4
}

// U2ToF32 sets dst[i] = code_i*scale + bias for 2-bit codes packed four to a
// byte, lowest bits first: code 4k+m is src[k]>>(2m)&3. It panics if
// len(dst) != 4*len(src).
func U2ToF32(dst []float32, src []byte, scale, bias float32) {
	checkLen("U2ToF32", len(dst), 4*len(src))
	u2ToF32(dst, src, scale, bias)
}

// U8ToF32Vec sets dst[i] = float32(src[i])*s[i] + z[i] (per-channel scales
// and zeros). It panics unless src, s and z have the length of dst.
func U8ToF32Vec(dst []float32, src []byte, s, z []float32) {
	checkVec("U8ToF32Vec", len(dst), len(src), len(s), len(z))
	u8ToF32Vec(dst, src, s, z)
}

// U4ToF32Vec sets dst[i] = code_i*s[i] + z[i] with the codes packed as for
// U4ToF32. It panics unless len(dst) == 2*len(src) and s and z have the
// length of dst.
func U4ToF32Vec(dst []float32, src []byte, s, z []float32) {
	checkVec("U4ToF32Vec", len(dst), 2*len(src), len(s), len(z))
	u4ToF32Vec(dst, src, s, z)
}

// U2ToF32Vec sets dst[i] = code_i*s[i] + z[i] with the codes packed as for
// U2ToF32. It panics unless len(dst) == 4*len(src) and s and z have the
// length of dst.
func U2ToF32Vec(dst []float32, src []byte, s, z []float32) {
	checkVec("U2ToF32Vec", len(dst), 4*len(src), len(s), len(z))
	u2ToF32Vec(dst, src, s, z)
}

func checkVec(op string, lenDst, codes, lenS, lenZ int) {
	if lenDst != codes || lenS != lenDst || lenZ != lenDst {
		panic(fmt.Sprintf("simd: %s: %d values for %d codes, %d scales, %d zeros", op, lenDst, codes, lenS, lenZ))
	}
}

// The grouped unpackers convert a run of values split into groups of group
// values, each group with its own scale and bias (value i belongs to group
// i/group), as a KV-cache codec stores a chunk of rows: one call replaces a
// call per group. Codes are packed and rounded as for the ungrouped
// functions, so U8ToF32Groups gives the same bits as one U8ToF32 call per
// group. Any group size works; multiples of 8 (32, 64, 128) are fastest.

// U8ToF32Groups sets dst[i] = float32(src[i])*scale[i/group] +
// bias[i/group], the product rounded before the sum as for U8ToF32. It
// panics unless group > 0, len(dst) is a multiple of group,
// len(src) == len(dst) and len(scale) == len(bias) == len(dst)/group.
func U8ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	checkGroups("U8ToF32Groups", len(dst), len(src), group, len(scale), len(bias))
	u8ToF32Groups(dst, src, group, scale, bias)
}

// U4ToF32Groups sets dst[i] = code_i*scale[i/group] + bias[i/group] with the
// codes packed as for U4ToF32, as one run of len(dst) codes (groups of a
// multiple of 32 codes are whole blocks; other groups share blocks). It
// panics unless group > 0, len(dst) is a multiple of group,
// len(dst) == 2*len(src) and len(scale) == len(bias) == len(dst)/group.
func U4ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	checkGroups("U4ToF32Groups", len(dst), 2*len(src), group, len(scale), len(bias))
	u4ToF32Groups(dst, src, group, scale, bias)
}

// U2ToF32Groups sets dst[i] = code_i*scale[i/group] + bias[i/group] with the
// codes packed as for U2ToF32. It panics unless group > 0, len(dst) is a
// multiple of group, len(dst) == 4*len(src) and
// len(scale) == len(bias) == len(dst)/group.
func U2ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	checkGroups("U2ToF32Groups", len(dst), 4*len(src), group, len(scale), len(bias))
	u2ToF32Groups(dst, src, group, scale, bias)
}

func checkGroups(op string, lenDst, codes, group, lenScale, lenBias int) {
	switch {
	case group <= 0:
		panic(fmt.Sprintf("simd: %s: group %d <= 0", op, group))
	case lenDst != codes:
		panic(fmt.Sprintf("simd: %s: %d values for %d codes", op, lenDst, codes))
	case lenDst%group != 0:
		panic(fmt.Sprintf("simd: %s: %d values are not a whole number of groups of %d", op, lenDst, group))
	case lenScale != lenDst/group || lenBias != lenDst/group:
		panic(fmt.Sprintf("simd: %s: %d groups, %d scales, %d biases", op, lenDst/group, lenScale, lenBias))
	}
}

// The table lookups map packed codes through a table (a codebook): dst[j]
// = table[code j]. They copy the table's bits unchanged, so every kernel
// set gives the same bits. The tables are passed by pointer to fixed-size
// arrays, so a codebook of fewer values is padded by the caller.

// LUT4ToF32 sets dst[j] = table[code j] for 4-bit codes packed in order,
// low nibble first (not in U4ToF32's blocks): code j is
// src[j/2]>>(4*(j%2))&15. It panics unless len(dst) is
// even and len(src) == len(dst)/2.
func LUT4ToF32(dst []float32, src []byte, table *[16]float32) {
	checkLUT("LUT4ToF32", len(dst), 2, len(src), 1)
	lut4ToF32(dst, src, table)
}

// LUT3ToF32 sets dst[j] = table[code j] for 3-bit codes packed as a
// little-endian bit stream, 8 codes in each 3 bytes: with w = b0 | b1<<8 |
// b2<<16 for the bytes src[j/8*3:j/8*3+3], code j is w>>(3*(j%8))&7. It
// panics unless len(dst) is a multiple of 8 and len(src) == len(dst)/8*3.
func LUT3ToF32(dst []float32, src []byte, table *[8]float32) {
	checkLUT("LUT3ToF32", len(dst), 8, len(src), 3)
	lut3ToF32(dst, src, table)
}

// LUT2ToF32 sets dst[j] = table[code j] for 2-bit codes packed as for
// U2ToF32: code j is src[j/4]>>(2*(j%4))&3. It panics unless len(dst) is
// a multiple of 4 and len(src) == len(dst)/4.
func LUT2ToF32(dst []float32, src []byte, table *[4]float32) {
	checkLUT("LUT2ToF32", len(dst), 4, len(src), 1)
	lut2ToF32(dst, src, table)
}

// checkLUT panics unless lenDst is a whole number of units of unit codes
// and lenSrc holds unitBytes bytes for each.
func checkLUT(op string, lenDst, unit, lenSrc, unitBytes int) {
	if lenDst%unit != 0 || lenSrc != lenDst/unit*unitBytes {
		panic(fmt.Sprintf("simd: %s: %d values need a multiple of %d and %d source bytes, have %d", op, lenDst, unit, lenDst/unit*unitBytes, lenSrc))
	}
}

// Q80ToF32 decodes len(dst)/32 GGML Q8_0 blocks (see DotQ80): value i of a
// block is d*code[i]. It panics unless len(dst)%32 == 0 and
// len(src) == len(dst)/32*34.
func Q80ToF32(dst []float32, src []byte) {
	checkQ80("Q80ToF32", len(dst))
	checkLen("Q80ToF32", len(src), len(dst)/q80BlockSize*q80BlockBytes)
	q80ToF32(dst, src)
}

// Q40ToF32 decodes len(dst)/32 GGML Q4_0 blocks. A block is 18 bytes: a
// little-endian binary16 scale d, then 16 bytes qs; value j < 16 is
// d*((qs[j]&15)-8) and value j+16 is d*((qs[j]>>4)-8). It panics unless
// len(dst)%32 == 0 and len(src) == len(dst)/32*18.
func Q40ToF32(dst []float32, src []byte) {
	checkQ80("Q40ToF32", len(dst))
	checkLen("Q40ToF32", len(src), len(dst)/q80BlockSize*q40BlockBytes)
	q40ToF32(dst, src)
}

// Q41ToF32 decodes len(dst)/32 GGML Q4_1 blocks. A block is 20 bytes:
// little-endian binary16 d and m, then 16 bytes qs; value j < 16 is
// d*(qs[j]&15) + m and value j+16 is d*(qs[j]>>4) + m, the product rounded
// before the sum as for U8ToF32. It panics unless len(dst)%32 == 0 and
// len(src) == len(dst)/32*20.
func Q41ToF32(dst []float32, src []byte) {
	checkQ80("Q41ToF32", len(dst))
	checkLen("Q41ToF32", len(src), len(dst)/q80BlockSize*q41BlockBytes)
	q41ToF32(dst, src)
}

// Q50ToF32 decodes len(dst)/32 GGML Q5_0 blocks. A block is 22 bytes: a
// little-endian binary16 scale d, a little-endian uint32 qh, then 16 bytes
// qs; value j is d*(code_j-16) with the 5-bit codes
//
//	code_j    = qs[j]&15 | (qh>>j&1)<<4          j < 16
//	code_j+16 = qs[j]>>4 | (qh>>(j+16)&1)<<4
//
// (GGML's dequantize_row_q5_0). It panics unless len(dst)%32 == 0 and
// len(src) == len(dst)/32*22.
func Q50ToF32(dst []float32, src []byte) {
	checkQ80("Q50ToF32", len(dst))
	checkLen("Q50ToF32", len(src), len(dst)/q80BlockSize*q50BlockBytes)
	q50ToF32(dst, src)
}

// Q51ToF32 decodes len(dst)/32 GGML Q5_1 blocks. A block is 24 bytes:
// little-endian binary16 d and m, then qh and qs as in Q5_0; value j is
// d*code_j + m with the codes of Q50ToF32, the product rounded before the
// sum as for U8ToF32 (GGML's dequantize_row_q5_1). The product of a
// binary16 and a 5-bit code is exact in float32, so this is also what a
// fused multiply-add gives. When d*code_j and m are both NaN, which of the
// two NaNs the value carries is unspecified. It panics unless
// len(dst)%32 == 0 and len(src) == len(dst)/32*24.
func Q51ToF32(dst []float32, src []byte) {
	checkQ80("Q51ToF32", len(dst))
	checkLen("Q51ToF32", len(src), len(dst)/q80BlockSize*q51BlockBytes)
	q51ToF32(dst, src)
}

// IQ4NLToF32 decodes len(dst)/32 GGML IQ4_NL blocks. A block is 18 bytes: a
// little-endian binary16 scale d, then 16 bytes qs of 4-bit indices laid
// out as in Q4_0; value j < 16 is d*T[qs[j]&15] and value j+16 is
// d*T[qs[j]>>4], with T GGML's kvalues_iq4nl table {-127, -104, -83, -65,
// -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}. It panics unless
// len(dst)%32 == 0 and len(src) == len(dst)/32*18.
func IQ4NLToF32(dst []float32, src []byte) {
	checkQ80("IQ4NLToF32", len(dst))
	checkLen("IQ4NLToF32", len(src), len(dst)/q80BlockSize*iq4nlBlockBytes)
	iq4nlToF32(dst, src)
}

// The 8-bit float decoders compute value(src[i])*scale: the conversion of
// the code is exact and the product is rounded once, so that they give the
// bits of float32(decode(code))*scale. A NaN code gives its own NaN (quiet,
// with the code's sign) whatever scale is; other NaN results (a NaN scale,
// ±Inf times 0) follow the IEEE product.

// E5M2ToF32 sets dst[i] = value(src[i])*scale, where value is the OCP
// 8-bit float E5M2 code (1 sign, 5 exponent bits with bias 15, 2 mantissa
// bits; exponent 31 gives ±Inf and NaNs, as in binary16): the binary16
// whose top byte is the code and low byte zero. It panics if
// len(dst) != len(src).
func E5M2ToF32(dst []float32, src []byte, scale float32) {
	checkLen("E5M2ToF32", len(dst), len(src))
	e5m2ToF32(dst, src, scale)
}

// E4M3ToF32 sets dst[i] = value(src[i])*scale, where value is the OCP
// 8-bit float E4M3FN code (1 sign, 4 exponent bits with bias 7, 3 mantissa
// bits; no infinities, largest finite ±448, 0x7f and 0xff NaN). It panics
// if len(dst) != len(src).
func E4M3ToF32(dst []float32, src []byte, scale float32) {
	checkLen("E4M3ToF32", len(dst), len(src))
	e4m3ToF32(dst, src, scale)
}

// checkAttention panics unless the ScoresF32 and AccumulateF32 arguments
// describe valid shapes: m (dst or w) holds nq rows of stride ld with n
// used values each, v (q or acc) nq rows of dim, rows n rows of dim. It
// reports whether there is anything to compute.
func checkAttention(op, mName, ldName string, lenM, ld int, vName string, lenV, nq, dim, lenRows, n int) bool {
	switch {
	case nq < 0 || dim < 0 || n < 0:
		panic(fmt.Sprintf("simd: %s: negative shape nq=%d dim=%d n=%d", op, nq, dim, n))
	case nq == 0 || n == 0:
		return false
	case nq > 1 && ld < n:
		panic(fmt.Sprintf("simd: %s: %s %d < n %d", op, ldName, ld, n))
	case lenM < (nq-1)*ld+n:
		panic(fmt.Sprintf("simd: %s: len(%s) %d < (nq-1)*%s+n %d", op, mName, lenM, ldName, (nq-1)*ld+n))
	case lenV < nq*dim:
		panic(fmt.Sprintf("simd: %s: len(%s) %d < nq*dim %d", op, vName, lenV, nq*dim))
	case lenRows < n*dim:
		panic(fmt.Sprintf("simd: %s: len(rows) %d < n*dim %d", op, lenRows, n*dim))
	}
	return true
}

// ScoresF32 computes the attention scores of nq query rows against n
// decoded rows:
//
//	dst[i*ldd+j] = Σ_{d<dim} q[i*dim+d] * rows[j*dim+d]   for i < nq, j < n
//
// q holds nq rows of dim floats and rows n rows of dim floats, both back to
// back. It is MatMulF32 shaped for a chunk of a KV cache (nq of about 1 to
// 8, n up to a few dozen, dim 64 to 256): each row is read once per block
// of up to 4 queries, with every partial sum in registers. No other dst
// entry is touched. Summation order is unspecified. It panics if a slice is
// too short for the shapes, or if nq > 1 and ldd < n.
func ScoresF32(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
	if !checkAttention("ScoresF32", "dst", "ldd", len(dst), ldd, "q", len(q), nq, dim, len(rows), n) {
		return
	}
	scoresF32(dst, ldd, q, nq, dim, rows, n)
}

// AccumulateF32 adds the weighted sum of n decoded rows to each of nq
// accumulator rows:
//
//	acc[i*dim+d] += Σ_{j<n} w[i*ldw+j] * rows[j*dim+d]   for i < nq, d < dim
//
// acc holds nq rows of dim floats, rows n rows of dim floats, and w nq rows
// of (at least) n weights with stride ldw. The kernels keep a block of
// accumulators in registers while they run over all n rows, so acc is read
// and written once per call rather than once per row. Summation order is
// unspecified. It panics if a slice is too short for the shapes, or if
// nq > 1 and ldw < n.
func AccumulateF32(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
	if !checkAttention("AccumulateF32", "w", "ldw", len(w), ldw, "acc", len(acc), nq, dim, len(rows), n) {
		return
	}
	accumulateF32(acc, w, ldw, nq, dim, rows, n)
}

// MaxF32 returns the largest element of x, or -Inf if x is empty: the
// shift ExpShiftSum needs for a softmax. Zeros compare equal, and a zero
// maximum is returned as +0, even when every zero in x is -0. ±Inf are
// ordinary values. If x holds a NaN, MaxF32 returns the first NaN in x,
// bits unchanged, so that a corrupt score shows up in the softmax rather
// than being skipped. Every kernel set gives the same bits.
func MaxF32(x []float32) float32 {
	return maxF32(x)
}

// ExpShiftSum sets x[i] = exp(x[i]*scale - shift) and returns the sum of
// the new x[i] in float64. After m := MaxF32(x), with scale > 0,
//
//	s := ExpShiftSum(x, scale, m*scale)
//	ScaleF32(x, float32(1/s))
//
// replaces x by softmax(scale*x): for a finite m every argument is then
// <= 0, and the largest element becomes exactly 1, so s >= 1.
//
// The argument is t = float32(x[i]*scale) - shift, the product rounded
// before the subtraction (no fused multiply-add), as "x *= scale; x -= m"
// computes it. exp(t) is computed in float32 with Cephes' method: n =
// round(t*log2e) to nearest even, r = t - n*ln2 with ln2 in two parts, a
// degree-6 polynomial for e^r (Cephes' expf coefficients, evaluated with
// fused multiply-adds) and 2^n applied through the exponent bits. Its
// error is at most 1.02 ulp, a relative error of at most 1e-7 (1.0103 ulp
// and 8.5e-8 measured against math.Exp for every float32 t in
// [-87.33654, 88.72283]). Outside that range:
//
//   - t < -87.33654, where e^t is below the smallest normal float32
//     (2^-126), gives 0: results are never subnormal;
//   - t > 88.72283, where e^t overflows float32, gives +Inf;
//   - a NaN t (a NaN x[i], scale or shift, or Inf-Inf) gives a NaN;
//     t = ±Inf gives +Inf or 0.
//
// The sum adds float64 values in a fixed order: the results of the
// len(x)&^7 leading elements go into 8 float64 lanes (element i into lane
// i%8, in order), the lanes are combined as ((l0+l4)+(l2+l6)) +
// ((l1+l5)+(l3+l7)), then the other results are added one by one. It is
// +Inf if a result is +Inf and a NaN if one is a NaN. The assembly and the
// pure-Go kernels compute the same operations in the same order and give
// the same bits, for x and for the sum.
func ExpShiftSum(x []float32, scale, shift float32) float64 {
	return expShiftSum(x, scale, shift)
}

// checkMatMul panics unless the MatMul arguments describe valid shapes:
// rowLen is the length of one weight row in w's elements.
func checkMatMul(op string, lenDst, ldd, lenX, nt, cols, lenW, rowLen, r0, r1 int) {
	switch {
	case nt < 0 || cols < 0:
		panic(fmt.Sprintf("simd: %s: negative shape nt=%d cols=%d", op, nt, cols))
	case r0 < 0 || r1 < r0:
		panic(fmt.Sprintf("simd: %s: bad row range [%d,%d)", op, r0, r1))
	case nt == 0 || r0 == r1:
		return
	case nt > 1 && ldd < r1:
		panic(fmt.Sprintf("simd: %s: ldd %d < r1 %d", op, ldd, r1))
	case lenX < nt*cols:
		panic(fmt.Sprintf("simd: %s: len(x) %d < nt*cols %d", op, lenX, nt*cols))
	case lenW < r1*rowLen:
		panic(fmt.Sprintf("simd: %s: len(w) %d < r1*%d %d", op, lenW, rowLen, r1*rowLen))
	case lenDst < (nt-1)*ldd+r1:
		panic(fmt.Sprintf("simd: %s: len(dst) %d < (nt-1)*ldd+r1 %d", op, lenDst, (nt-1)*ldd+r1))
	}
}

// MatMulF32 multiplies nt token rows by the transpose of a row-major weight
// matrix, for weight rows r0 to r1-1 only:
//
//	dst[t*ldd+r] = Σ_{c<cols} x[t*cols+c] * w[r*cols+c]   for t < nt, r0 <= r < r1
//
// w is laid out like a PyTorch Linear weight (out × in, row stride cols) and
// x holds nt rows of cols floats back to back. No other dst entry is
// touched, so callers may split [0, rows) across goroutines, each with its
// own [r0, r1). Summation order is unspecified. It panics if a slice is too
// short for the shapes, or if nt > 1 and ldd < r1.
func MatMulF32(dst []float32, ldd int, x []float32, nt, cols int, w []float32, r0, r1 int) {
	checkMatMul("MatMulF32", len(dst), ldd, len(x), nt, cols, len(w), cols, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulF32(dst, ldd, x, nt, cols, w, r0, r1)
}

// MatMulF16 is MatMulF32 with weights stored as IEEE binary16 bits.
func MatMulF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	checkMatMul("MatMulF16", len(dst), ldd, len(x), nt, cols, len(w), cols, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulF16(dst, ldd, x, nt, cols, w, r0, r1)
}

// MatMulPackTokensF16, MatMulPackTokensBF16 and MatMulPackTokensQ80
// return the number of token rows from which MatMulF16, MatMulBF16 and
// MatMulQ80 take the packed path of the amd64 assembly (gemmpack_amd64.go)
// with the kernels selected now, and math.MaxInt where there is no such
// path (the pure-Go twins): below them the packing does not pay for itself.
// A caller that splits a product into several calls and wants the bits of
// one call keeps every call's token rows at or above the threshold (or all
// below it) and its weight-row bounds at multiples of MatMulPackRows.
func MatMulPackTokensF16() int { return packTokens(false, false) }

// MatMulPackTokensBF16 is MatMulPackTokensF16 for BF16 weights.
func MatMulPackTokensBF16() int { return packTokens(false, true) }

// MatMulPackTokensQ80 is MatMulPackTokensF16 for Q8_0 weights.
func MatMulPackTokensQ80() int { return packTokens(true, false) }

// MatMulPackRows is the weight rows of a packed panel.
const MatMulPackRows = 16

// MatMulPackChunkRows is the weight rows the packed path packs at a time:
// every block of token rows meets them before the next chunk's, so a call
// over fewer rows reads the token rows more often (once per chunk).
const MatMulPackChunkRows = 128

// MatMulPackSplitRows returns the multiple of MatMulPackRows at which a
// product on the packed path is best split between calls with the kernels
// selected now: 32 with AVX-512, whose micro-kernels take two panels at a
// time (a call of an odd number of panels takes its last one at half the
// rate), 16 otherwise.
func MatMulPackSplitRows() int {
	if useAsm && useAVX512 {
		return 2 * MatMulPackRows
	}
	return MatMulPackRows
}

// MatMulBF16 is MatMulF32 with weights stored as bfloat16 bits.
func MatMulBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	checkMatMul("MatMulBF16", len(dst), ldd, len(x), nt, cols, len(w), cols, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulBF16(dst, ldd, x, nt, cols, w, r0, r1)
}

// MatMulQ80 is MatMulF32 with each weight row stored as cols/32 Q8_0 blocks
// (cols/32*34 bytes, see DotQ80): each output is Σ_c x[t*cols+c]*d*code for
// weight row r, up to rounding (the kernels may scale the codes by d before
// multiplying, or after summing a block). It panics unless cols%32 == 0, and
// as MatMulF32 does.
func MatMulQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	checkQ80("MatMulQ80", cols)
	checkMatMul("MatMulQ80", len(dst), ldd, len(x), nt, cols, len(w), cols/q80BlockSize*q80BlockBytes, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulQ80(dst, ldd, x, nt, cols, w, r0, r1)
}

// Kernels names the kernel set in use: "avx512" when the AVX-512 kernels
// run (the dot products over F32, F16, BF16 and Q8_0 weights, which decode
// spends its time in; everything else is the AVX2 set), "avx2" when the
// AVX2 assembly runs, "generic" for the pure-Go twins. On an AMD Zen 4 it
// is "avx512-zen4": the avx512 set with the avx2 set's F16 and BF16 dot
// products, so decode over those weights gives the avx2 set's results, and
// the prefill micro-kernels in blocks of 6 token rows; on an AMD Zen 5
// "avx512-zen5": the same decode with the avx512 set's prefill. See isZen4
// and isHalf512 in dispatch_amd64.go.
func Kernels() string {
	switch {
	case half512Enabled():
		return "avx512-zen4"
	case zen4Enabled():
		return "avx512-zen5"
	case avx512Enabled():
		return "avx512"
	case asmEnabled():
		return "avx2"
	}
	return "generic"
}

// checkCodeAttention panics unless the Scores and Accumulate arguments for
// packed codes describe valid shapes: m (dst or w) holds nq rows of stride
// ld with n used values each, v (q or acc) nq rows of stride ldv with cols
// used values each, and codes n rows of stride ldc bytes with cols codes of
// bits bits each. It reports whether there is anything to compute.
func checkCodeAttention(op, mName, ldName string, lenM, ld int, vName string, lenV, ldv, nq, cols, bits int, lenCodes, ldc, n int) bool {
	rowBytes := cols * bits / 8
	switch {
	case nq < 0 || cols < 0 || n < 0:
		panic(fmt.Sprintf("simd: %s: negative shape nq=%d cols=%d n=%d", op, nq, cols, n))
	case cols*bits%8 != 0:
		panic(fmt.Sprintf("simd: %s: %d codes of %d bits are not whole bytes", op, cols, bits))
	case nq == 0 || cols == 0:
		return false
	case nq > 1 && ld < n:
		panic(fmt.Sprintf("simd: %s: %s %d < n %d", op, ldName, ld, n))
	case nq > 1 && ldv < cols:
		panic(fmt.Sprintf("simd: %s: stride of %s %d < cols %d", op, vName, ldv, cols))
	case n > 1 && ldc < rowBytes:
		panic(fmt.Sprintf("simd: %s: ldc %d < row bytes %d", op, ldc, rowBytes))
	case n > 0 && lenM < (nq-1)*ld+n:
		panic(fmt.Sprintf("simd: %s: len(%s) %d < (nq-1)*%s+n %d", op, mName, lenM, ldName, (nq-1)*ld+n))
	case lenV < (nq-1)*ldv+cols:
		panic(fmt.Sprintf("simd: %s: len(%s) %d < (nq-1)*%d+cols %d", op, vName, lenV, ldv, (nq-1)*ldv+cols))
	case n > 0 && lenCodes < (n-1)*ldc+rowBytes:
		panic(fmt.Sprintf("simd: %s: len(codes) %d < (n-1)*ldc+%d %d", op, lenCodes, rowBytes, (n-1)*ldc+rowBytes))
	}
	return true
}

// ScoresU8 computes raw attention scores of nq query rows against n rows of
// 8-bit unsigned codes, read in place:
//
//	dst[i*ldd+j] = Σ_{c<cols} q[i*ldq+c] * float32(codes[j*ldc+c])   for i < nq, j < n
//
// It is ScoresF32 for integer-coded rows without their scale and zero:
// with x̂ = code·s + z per group, q·x̂ = s·(q·code) + z·Σq, which the caller
// applies per row and group. Strides let one call cover one group of
// columns of every row (q and codes offset to the group). No other dst
// entry is touched. Summation order is unspecified. It panics if a slice is
// too short for the shapes, if nq > 1 and ldd < n or ldq < cols, or if
// n > 1 and ldc < cols.
func ScoresU8(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	if !checkCodeAttention("ScoresU8", "dst", "ldd", len(dst), ldd, "q", len(q), ldq, nq, cols, 8, len(codes), ldc, n) || n == 0 {
		return
	}
	scoresU8(dst, ldd, q, ldq, nq, cols, codes, ldc, n)
}

// ScoresU4 is ScoresU8 for 4-bit codes: each row is a run of cols codes
// packed as for U4ToF32 (blocks of 32, byte k of a block holding codes k
// and k+16), so a call covers whole rows, or a leading run of whole blocks
// of each. cols must be even, and ldc at least cols/2 when n > 1.
func ScoresU4(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	if !checkCodeAttention("ScoresU4", "dst", "ldd", len(dst), ldd, "q", len(q), ldq, nq, cols, 4, len(codes), ldc, n) || n == 0 {
		return
	}
	scoresU4(dst, ldd, q, ldq, nq, cols, codes, ldc, n)
}

// AccumulateU8 adds a bias and the weighted sum of n rows of 8-bit unsigned
// codes, read in place, to each of nq accumulator rows:
//
//	acc[i*lda+c] += bias[i] + Σ_{j<n} w[i*ldw+j] * float32(codes[j*ldc+c])   for i < nq, c < cols
//
// It is AccumulateF32 for integer-coded rows of one group: with
// x̂ = code·s + z, Σ_j w_j x̂_j = Σ_j (w_j s_j)·code_j + Σ_j w_j z_j, so the
// caller passes the weights times the scales and the weighted sum of the
// zeros as bias. The bias is added even when n is 0. Summation order is
// unspecified. It panics if a slice is too short for the shapes (bias needs
// nq values), if nq > 1 and ldw < n or lda < cols, or if n > 1 and
// ldc < cols.
func AccumulateU8(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	if !checkCodeAttention("AccumulateU8", "w", "ldw", len(w), ldw, "acc", len(acc), lda, nq, cols, 8, len(codes), ldc, n) {
		return
	}
	checkBias("AccumulateU8", len(bias), nq)
	accumulateU8(acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
}

// AccumulateU4 is AccumulateU8 for 4-bit codes packed as for ScoresU4.
func AccumulateU4(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	if !checkCodeAttention("AccumulateU4", "w", "ldw", len(w), ldw, "acc", len(acc), lda, nq, cols, 4, len(codes), ldc, n) {
		return
	}
	checkBias("AccumulateU4", len(bias), nq)
	accumulateU4(acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
}

func checkBias(op string, lenBias, nq int) {
	if lenBias < nq {
		panic(fmt.Sprintf("simd: %s: len(bias) %d < nq %d", op, lenBias, nq))
	}
}
