//go:build !amd64 || !gc || purego

package simd

// Without assembly there is no multi-token kernel: every token row takes
// the one-row product on its own.

func matMulEachF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	matMulEachRows(matMulF16, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulEachBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	matMulEachRows(matMulBF16, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulEachQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	matMulEachRows(matMulQ80, dst, ldd, x, nt, cols, w, r0, r1)
}
