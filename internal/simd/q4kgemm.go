package simd

import "fmt"

// MatMulQ4KQ8K multiplies nt token rows of Q8_K activations by the
// transpose of a q4_K weight matrix, for weight rows r0 to r1-1 only: q
// holds the token rows back to back, each cols/256 blocks (QuantizeQ8K),
// and w the weight rows of as many q4_K super-blocks. It sets
//
//	dst[t*ldd+r] = DotQ4KQ8K(w[r*rb:(r+1)*rb], q[t*qb:(t+1)*qb])   for t < nt, r0 <= r < r1
//
// (rb = cols/256·144, qb = cols/256·Q8KBlockBytes) bit for bit, on every
// kernel set, however the tokens and rows are split between calls:
// prefill over quantized activations gives decode's bits. No other dst
// entry is written. The Q8_K blocks must be as QuantizeQ8K writes them
// (the tile GEMM adds their sums of 16 codes in pairs as int16). On the
// avx512 set with AVX-512 VNNI whole panels of 16 rows go through an int8
// tile GEMM (q4kgemm_amd64.go) from q4kgMinTokens token rows
// (MatMulQ6KQ8K: q6kgMinTokens); on the avx2 set and the avx512 set
// without VNNI whole panels of 8 rows go through AVX2 tiles
// (_generate/kq8avx2.go) from q4kaMinTokens (q5kaMinTokens,
// q6kaMinTokens); other rows, and the pure-Go set, take DotQ4KQ8KRows per
// token row. It panics unless cols%256 == 0 and the
// shapes are as MatMulQ80 wants them.
func MatMulQ4KQ8K(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	if nb := checkMatMulKQ8K("MatMulQ4KQ8K", q4KBlockBytes, dst, ldd, q, nt, cols, w, r0, r1); nt > 0 && r0 < r1 {
		matMulQ4KQ8K(dst, ldd, q, nt, nb, w, r0, r1)
	}
}

// MatMulQ6KQ8K is MatMulQ4KQ8K for q6_K weights (210-byte super-blocks):
// dst[t*ldd+r] = DotQ6KQ8K(w_r, q_t), bit for bit, on every kernel set.
func MatMulQ6KQ8K(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	if nb := checkMatMulKQ8K("MatMulQ6KQ8K", q6KBlockBytes, dst, ldd, q, nt, cols, w, r0, r1); nt > 0 && r0 < r1 {
		matMulQ6KQ8K(dst, ldd, q, nt, nb, w, r0, r1)
	}
}

// MatMulQ5KQ8K is MatMulQ4KQ8K for q5_K weights (176-byte super-blocks):
// dst[t*ldd+r] = DotQ5KQ8K(w_r, q_t), bit for bit, on every kernel set
// (the tile GEMM from q5kgMinTokens token rows; otherwise DotQ5KQ8K per
// pair).
func MatMulQ5KQ8K(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	if nb := checkMatMulKQ8K("MatMulQ5KQ8K", q5KBlockBytes, dst, ldd, q, nt, cols, w, r0, r1); nt > 0 && r0 < r1 {
		matMulQ5KQ8K(dst, ldd, q, nt, nb, w, r0, r1)
	}
}

// checkMatMulKQ8K returns the super-blocks of a row of cols columns and panics
// (naming op) unless cols is whole super-blocks and the shapes are as
// MatMulQ80 wants them, weight rows being super-blocks of blockBytes.
func checkMatMulKQ8K(op string, blockBytes int, dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) int {
	if cols%kBlockSize != 0 {
		panic(fmt.Sprintf("simd: %s: cols %d is not a multiple of %d", op, cols, kBlockSize))
	}
	nb := cols / kBlockSize
	checkMatMul(op, len(dst), ldd, len(q), nt, nb*Q8KBlockBytes, len(w), nb*blockBytes, r0, r1)
	return nb
}

// kq8Pairs sets dst[t*ldd+r] to dot(weight row r, token row t) for every
// token row and r in [r0, r1), weight rows being nb super-blocks of
// blockBytes: the twins' loop.
func kq8Pairs(dot func(w, q []byte, nb int) float32, blockBytes int, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	rb, qb := nb*blockBytes, nb*Q8KBlockBytes
	for t := 0; t < nt; t++ {
		qt := q[t*qb : (t+1)*qb]
		for r := r0; r < r1; r++ {
			dst[t*ldd+r] = dot(w[r*rb:(r+1)*rb], qt, nb)
		}
	}
}

// kq8RowDots sets rows [r0, r1) of every token row with a multi-row dot.
func kq8RowDots(rows func(dst []float32, w, q []byte, nb int), blockBytes int, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	rb, qb := nb*blockBytes, nb*Q8KBlockBytes
	for t := 0; t < nt; t++ {
		rows(dst[t*ldd+r0:t*ldd+r1], w[r0*rb:r1*rb], q[t*qb:(t+1)*qb], nb)
	}
}

// matMulQ4KQ8KGeneric, matMulQ6KQ8KGeneric and matMulQ5KQ8KGeneric are
// the twins: one twin dot per pair.
func matMulQ4KQ8KGeneric(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8Pairs(dotQ4KQ8KGeneric, q4KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ6KQ8KGeneric(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8Pairs(dotQ6KQ8KGeneric, q6KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ5KQ8KGeneric(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8Pairs(dotQ5KQ8KGeneric, q5KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

// matMulQ4KQ8KRows, matMulQ6KQ8KRows and matMulQ5KQ8KRows set rows [r0,
// r1) of every token row with the set's row dots (DotQ4KQ8KRows,
// DotQ6KQ8KRows; q5_K, without one, its one-row dot DotQ5KQ8K per pair).
func matMulQ4KQ8KRows(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8RowDots(dotQ4KQ8KRows, q4KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ6KQ8KRows(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8RowDots(dotQ6KQ8KRows, q6KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

func matMulQ5KQ8KRows(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	kq8Pairs(dotQ5KQ8K, q5KBlockBytes, dst, ldd, q, nt, nb, w, r0, r1)
}

// MatMulKQ8KPacked reports whether MatMulQ4KQ8K, MatMulQ5KQ8K and
// MatMulQ6KQ8K multiply several token rows in their AVX-512 VNNI int8 tile
// GEMMs with the kernels selected now (the avx512 set with AVX-512 VNNI;
// elsewhere the AVX2 tiles run, on the Zen 4 under ForceAVX2 1.7–2.0×
// (q4_K), 1.6–1.8× (q5_K) and 1.3–1.5× (q6_K) MatMulDecoded's fp32 GEMM
// at 32–512 token rows). It only says which kernels run: the results are
// the one-row dots' bits (DotQ4KQ8K, DotQ5KQ8K, DotQ6KQ8K) on every set.
func MatMulKQ8KPacked() bool { return matMulKQ8KPacked() }
