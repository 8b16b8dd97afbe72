//go:build !amd64 || !gc || purego

package simd

func matMulQ80Q80(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulQ80Q80Generic(dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ40Q80(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulQ40Q80Generic(dst, ldd, q, nt, nb, w, r0, r1)
}
