//go:build !amd64 || !gc || purego

package simd

func matMulWidenedQ80(t qdotType, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	matMulWidenedGeneric(t, dst, ldd, q, nt, nb, w, r0, r1)
}
