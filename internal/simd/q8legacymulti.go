package simd

import "fmt"

// DotQ40Q80Rows sets dst[i] to DotQ40Q80(w[i·rb:(i+1)·rb], q) for every
// row i, rb = len(w)/len(dst): the same bits, four rows a call where the
// kernel set has a four-row kernel (the avx512 set with AVX-512 VNNI, and
// the AVX2 ones on the avx2 set and the avx512 set without VNNI: the rows
// share each activation block's load and scale, and Q4_0 subtracts the
// activations' 8·Σ codes once a block for the four rows). It panics
// unless len(q) is whole Q8_0 blocks and w holds exactly len(dst) rows of
// as many Q4_0 blocks.
func DotQ40Q80Rows(dst []float32, w, q []byte) {
	nb := checkQ80Rows("DotQ40Q80Rows", len(dst), len(w), len(q), q40BlockBytes)
	dotQ80Rows(qdQ40, dst, w, q, nb)
}

// DotQ50Q80Rows is DotQ40Q80Rows for Q5_0 rows (DotQ50Q80).
func DotQ50Q80Rows(dst []float32, w, q []byte) {
	nb := checkQ80Rows("DotQ50Q80Rows", len(dst), len(w), len(q), q50BlockBytes)
	dotQ80Rows(qdQ50, dst, w, q, nb)
}

// DotIQ4NLQ80Rows is DotQ40Q80Rows for IQ4_NL rows (DotIQ4NLQ80).
func DotIQ4NLQ80Rows(dst []float32, w, q []byte) {
	nb := checkQ80Rows("DotIQ4NLQ80Rows", len(dst), len(w), len(q), iq4nlBlockBytes)
	dotQ80Rows(qdIQ4NL, dst, w, q, nb)
}

// DotQ80Q80Rows is DotQ40Q80Rows for Q8_0 rows (DotQ80Q80).
func DotQ80Q80Rows(dst []float32, w, q []byte) {
	nb := checkQ80Rows("DotQ80Q80Rows", len(dst), len(w), len(q), Q80BlockBytes)
	dotQ80Rows(qdQ80, dst, w, q, nb)
}

func checkQ80Rows(op string, rows, wlen, qlen, blockBytes int) int {
	nb := qlen / Q80BlockBytes
	if qlen%Q80BlockBytes != 0 || wlen != rows*nb*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d bytes of activations is not whole Q8_0 blocks of %d, or %d bytes of weights is not %d rows of %d blocks", op, qlen, Q80BlockBytes, wlen, rows, nb))
	}
	return nb
}

// dotQ80Rows sets dst from the rows of nb blocks of type t at w, four at a
// time with the set's four-row kernel where it has one: four adjacent
// rows a call, or under the Zen 5 choice (q80Runs) a row of each of four
// runs of rows, the rows past whole runs one at a time.
func dotQ80Rows(t qdotType, dst []float32, w, q []byte, nb int) {
	if q80Runs(t, dst, w, q, nb) {
		return
	}
	one := func(w, q []byte, nb int) float32 { return dotQ8Legacy(t, w, q, nb) }
	dotKQ8KRows(dst, w, q, nb, qdotBlockBytes[t], q80X4(t), one)
}
