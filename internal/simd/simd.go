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
	old := useAsm
	useAsm = false
	return func() { useAsm = old }
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

// Kernels names the kernel set in use: "avx2" when the assembly kernels run,
// "generic" for the pure-Go twins.
func Kernels() string {
	if asmEnabled() {
		return "avx2"
	}
	return "generic"
}
