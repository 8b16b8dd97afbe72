//go:build amd64 && gc && !purego

package simd

// quantizeQ80 runs the AVX2 kernel where the set has one (avx2 and
// avx512), the twin otherwise.
func quantizeQ80(dst []byte, x []float32) {
	if !useAsm {
		quantizeQ80Generic(dst, x)
		return
	}
	quantizeQ80AVX2(dst, x, len(x)/32)
}
