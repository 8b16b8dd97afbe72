package simd

import "fmt"

// DotQ4KQ8KRows sets dst[i] to DotQ4KQ8K(w[i·rb:(i+1)·rb], q) for every
// row i, rb = len(w)/len(dst): the same bits, several rows at a time where
// the kernel set has a multi-row kernel (the avx512 set: four rows a call,
// sharing each activation load, the scales and mins of the four rows
// unpacked together and their sums reduced together). It panics unless
// len(q) is a multiple of Q8KBlockBytes and w holds exactly len(dst) rows
// of len(q)/Q8KBlockBytes super-blocks.
func DotQ4KQ8KRows(dst []float32, w, q []byte) {
	nb := checkKQ8KRows("DotQ4KQ8KRows", len(dst), len(w), len(q), q4KBlockBytes)
	dotQ4KQ8KRows(dst, w, q, nb)
}

// DotQ6KQ8KRows is DotQ4KQ8KRows for q6_K rows (DotQ6KQ8K).
func DotQ6KQ8KRows(dst []float32, w, q []byte) {
	nb := checkKQ8KRows("DotQ6KQ8KRows", len(dst), len(w), len(q), q6KBlockBytes)
	dotQ6KQ8KRows(dst, w, q, nb)
}

func checkKQ8KRows(op string, rows, wlen, qlen, blockBytes int) int {
	nb := qlen / Q8KBlockBytes
	if qlen%Q8KBlockBytes != 0 || wlen != rows*nb*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d bytes of activations is not whole Q8_K blocks of %d, or %d bytes of weights is not %d rows of %d super-blocks", op, qlen, Q8KBlockBytes, wlen, rows, nb))
	}
	return nb
}

// dotKQ8KRows sets dst from the rows of nb super-blocks of blockBytes at w:
// four at a time with x4 where it is not nil, the rest with one.
func dotKQ8KRows(dst []float32, w, q []byte, nb, blockBytes int, x4 func(w []byte, stride int, q []byte, nb int, dst *[4]float32), one func(w, q []byte, nb int) float32) {
	rb := nb * blockBytes
	i := 0
	for ; x4 != nil && nb > 0 && i+4 <= len(dst); i += 4 {
		x4(w[i*rb:(i+4)*rb], rb, q, nb, (*[4]float32)(dst[i:i+4]))
	}
	for ; i < len(dst); i++ {
		dst[i] = one(w[i*rb:(i+1)*rb], q, nb)
	}
}
