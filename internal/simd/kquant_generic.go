//go:build !amd64 || !gc || purego

package simd

func dotQ4K(w []byte, x []float32) float32 { return dotQ4KGeneric(w, x) }

func dotQ6K(w []byte, x []float32) float32 { return dotQ6KGeneric(w, x) }

func q4KToF32(dst []float32, w []byte) { q4KToF32Generic(dst, w) }

func q6KToF32(dst []float32, w []byte) { q6KToF32Generic(dst, w) }

func dotQ5K(w []byte, x []float32) float32 { return dotQ5KGeneric(w, x) }

func q5KToF32(dst []float32, w []byte) { q5KToF32Generic(dst, w) }

func dotQ4KSums(w []byte, x, xs []float32) float32 { return dotQ4KSumsGeneric(w, x, xs) }

func dotQ5KSums(w []byte, x, xs []float32) float32 { return dotQ5KSumsGeneric(w, x, xs) }

func groupSums32(xs, x []float32) { groupSums32Generic(xs, x) }

func lutBlocks(dst []float32, codes []byte, stride int, sc []float32, table *[16]int8) {
	lutBlocksGeneric(dst, codes, stride, sc, table)
}

func q23KToF32(dst []float32, w []byte, _ int, _ func([]float32, []byte), generic func([]float32, []byte)) {
	generic(dst, w)
}

// kquant512 is kquant_amd64.go's switch; there are no AVX-512 kernels here.
var kquant512 = false
