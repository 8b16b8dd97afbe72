package simd

import "fmt"

// DotQ4KQ8KRows sets dst[i] to DotQ4KQ8K(w[i·rb:(i+1)·rb], q) for every
// row i, rb = len(w)/len(dst): the same bits, several rows at a time where
// the kernel set has a multi-row kernel (the avx512 set: four rows a call,
// sharing each activation load). It panics unless len(q) is a multiple of
// Q8KBlockBytes and w holds exactly len(dst) rows of len(q)/Q8KBlockBytes
// super-blocks.
func DotQ4KQ8KRows(dst []float32, w, q []byte) {
	nb := len(q) / Q8KBlockBytes
	if len(q)%Q8KBlockBytes != 0 || len(w) != len(dst)*nb*q4KBlockBytes {
		panic(fmt.Sprintf("simd: DotQ4KQ8KRows: %d bytes of activations is not whole Q8_K blocks of %d, or %d bytes of weights is not %d rows of %d super-blocks", len(q), Q8KBlockBytes, len(w), len(dst), nb))
	}
	dotQ4KQ8KRows(dst, w, q, nb)
}

// dotQ4KQ8KRowsGeneric is DotQ4KQ8KRows one row at a time.
func dotQ4KQ8KRowsGeneric(dst []float32, w, q []byte, nb int) {
	rb := nb * q4KBlockBytes
	for i := range dst {
		dst[i] = dotQ4KQ8K(w[i*rb:(i+1)*rb], q, nb)
	}
}
