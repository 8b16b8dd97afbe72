//go:build !amd64 || !gc || purego

package simd

import "math"

// Without assembly every kernel is its pure-Go twin. useAsm and useAVX512
// exist so that ForceGeneric and ForceAVX2 have one definition for all
// builds; hasAVX2 and hasAVX512 are false for the tests.
var (
	hasAVX2    = false
	hasAVX512  = false
	useAsm     = false
	useAVX512  = false
	isZen4     = false
	useZen4    = false
	isHalf512  = false
	useHalf512 = false
)

func zen4Enabled() bool    { return false }
func half512Enabled() bool { return false }

func dotF32(a, b []float32) float32                   { return dotF32Generic(a, b) }
func axpyF32(y []float32, alpha float32, x []float32) { axpyF32Generic(y, alpha, x) }
func scaleF32(x []float32, alpha float32)             { scaleF32Generic(x, alpha) }
func mulF32(dst, x, y []float32)                      { mulF32Generic(dst, x, y) }
func mulAddF32(acc, x, y []float32)                   { mulAddF32Generic(acc, x, y) }
func rotateNeoX(v, c, s []float32)                    { rotateNeoXGeneric(v, c, s) }
func rotatePairs(v, c, s []float32)                   { rotatePairsGeneric(v, c, s) }
func sumF32(x []float32) float32                      { return sumF32Generic(x) }
func dotF16(w []uint16, x []float32) float32          { return dotF16Generic(w, x) }
func dotBF16(w []uint16, x []float32) float32         { return dotBF16Generic(w, x) }
func axpyF16(y []float32, alpha float32, x []uint16)  { axpyF16Generic(y, alpha, x) }
func axpyBF16(y []float32, alpha float32, x []uint16) { axpyBF16Generic(y, alpha, x) }
func dotQ80(w []byte, x []float32) float32            { return dotQ80Generic(w, x) }
func f16ToF32(dst []float32, src []uint16)            { f16ToF32Generic(dst, src) }
func bf16ToF32(dst []float32, src []uint16)           { bf16ToF32Generic(dst, src) }
func f32ToF16(dst []uint16, src []float32)            { f32ToF16Generic(dst, src) }
func f32ToBF16(dst []uint16, src []float32)           { f32ToBF16Generic(dst, src) }

func u8ToF32(dst []float32, src []byte, scale, bias float32) {
	u8ToF32Generic(dst, src, scale, bias)
}
func i8ToF32(dst []float32, src []byte, scale float32) { i8ToF32Generic(dst, src, scale) }
func u4ToF32(dst []float32, src []byte, scale, bias float32) {
	u4ToF32Generic(dst, src, scale, bias)
}
func u2ToF32(dst []float32, src []byte, scale, bias float32) {
	u2ToF32Generic(dst, src, scale, bias)
}
func u8ToF32Vec(dst []float32, src []byte, s, z []float32) { u8ToF32VecGeneric(dst, src, s, z) }
func u4ToF32Vec(dst []float32, src []byte, s, z []float32) { u4ToF32VecGeneric(dst, src, s, z) }
func u2ToF32Vec(dst []float32, src []byte, s, z []float32) { u2ToF32VecGeneric(dst, src, s, z) }
func q80ToF32(dst []float32, src []byte)                   { q80ToF32Generic(dst, src) }
func q40ToF32(dst []float32, src []byte)                   { q40ToF32Generic(dst, src) }
func q41ToF32(dst []float32, src []byte)                   { q41ToF32Generic(dst, src) }
func q50ToF32(dst []float32, src []byte)                   { q50ToF32Generic(dst, src) }
func q51ToF32(dst []float32, src []byte)                   { q51ToF32Generic(dst, src) }
func iq4nlToF32(dst []float32, src []byte)                 { iq4nlToF32Generic(dst, src) }

func lut4ToF32(dst []float32, src []byte, table *[16]float32) {
	lut4ToF32Generic(dst, src, table)
}
func lut3ToF32(dst []float32, src []byte, table *[8]float32) { lut3ToF32Generic(dst, src, table) }
func lut2ToF32(dst []float32, src []byte, table *[4]float32) { lut2ToF32Generic(dst, src, table) }

func e5m2ToF32(dst []float32, src []byte, scale float32) { e5m2ToF32Generic(dst, src, scale) }
func e4m3ToF32(dst []float32, src []byte, scale float32) { e4m3ToF32Generic(dst, src, scale) }

func u8ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	u8ToF32GroupsGeneric(dst, src, group, scale, bias)
}
func u4ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	u4ToF32GroupsGeneric(dst, src, group, scale, bias)
}
func u2ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	u2ToF32GroupsGeneric(dst, src, group, scale, bias)
}

func scoresF32(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
	scoresF32Generic(dst, ldd, q, nq, dim, rows, n)
}

func accumulateF32(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
	accumulateF32Generic(acc, w, ldw, nq, dim, rows, n)
}

func matMulF32(dst []float32, ldd int, x []float32, nt, cols int, w []float32, r0, r1 int) {
	matMulF32Generic(dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	matMulF16Generic(dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	matMulBF16Generic(dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	matMulQ80Generic(dst, ldd, x, nt, cols, w, r0, r1)
}

func maxF32(x []float32) float32 { return maxF32Generic(x) }

func expShiftSum(x []float32, scale, shift float32) float64 {
	return expShiftSumGeneric(x, scale, shift)
}

func expShiftTaylor(dst, x []float32, scale, shift float32) {
	expShiftTaylorGeneric(dst, x, scale, shift)
}

func transposeF32(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	transposeF32Generic(dst, ldd, src, lds, rows, cols)
}

func asmEnabled() bool { return false }

func avx512Enabled() bool { return false }

func scoresU8(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	scoresCodesGeneric(8, false, dst, ldd, q, ldq, nq, 0, cols, codes, ldc, n)
}

func scoresU4(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	scoresCodesGeneric(4, false, dst, ldd, q, ldq, nq, 0, cols, codes, ldc, n)
}

func accumulateU8(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	accumulateCodesGeneric(8, acc, lda, bias, w, ldw, nq, 0, cols, codes, ldc, n)
}

func accumulateU4(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	accumulateCodesGeneric(4, acc, lda, bias, w, ldw, nq, 0, cols, codes, ldc, n)
}

// packTokens: the pure-Go twins have no packed path.
func packTokens(bool, bool) int { return math.MaxInt }
