//go:build !amd64 || !gc || purego

package simd

func matMulQ4KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulQ4KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ6KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulQ6KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ5KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulQ5KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulKQ8KPacked() bool { return false }
