package simd

// MatMulEachF16 is MatMulF16 with every token row computed as in a product
// over that row alone: for t < nt it sets rows [r0, r1) of dst[t*ldd:] to
// what
//
//	MatMulF16(dst[t*ldd:], ldd, x[t*cols:(t+1)*cols], 1, cols, w, r0, r1)
//
// sets there, bit for bit (the one-row decode kernel, whatever nt). Where
// that kernel is assembly, the token rows go in groups of 2 to 4 (as many
// as the registers hold) over chunks of weight rows that stay in L2, and
// each weight vector is loaded and converted once per group, each row of
// the group with the one-row kernel's own accumulators, order and
// reduction (internal/simd/_generate/multitok.go).
// Any range of rows reads each weight from memory once: the rows go in
// pieces that stay in cache, with or without a multi-token kernel.
// It is for several independent sequences that must each get the bits
// they get alone (kvq eval's side-by-side caches, one token row each in a
// decode step). It panics as MatMulF16 does.
func MatMulEachF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	checkMatMul("MatMulEachF16", len(dst), ldd, len(x), nt, cols, len(w), cols, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulEachF16(dst, ldd, x, nt, cols, w, r0, r1)
}

// MatMulEachBF16 is MatMulEachF16 for MatMulBF16.
func MatMulEachBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	checkMatMul("MatMulEachBF16", len(dst), ldd, len(x), nt, cols, len(w), cols, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulEachBF16(dst, ldd, x, nt, cols, w, r0, r1)
}

// MatMulEachQ80 is MatMulEachF16 for MatMulQ80.
func MatMulEachQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	checkQ80("MatMulEachQ80", cols)
	checkMatMul("MatMulEachQ80", len(dst), ldd, len(x), nt, cols, len(w), cols/q80BlockSize*q80BlockBytes, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulEachQ80(dst, ldd, x, nt, cols, w, r0, r1)
}

// eachGroup returns the size of the next group of token rows when rest
// remain and a group holds at most most: the rows split as evenly as the
// fewest groups allow (5 by 3: 3 and 2; 4 by 3: 2 and 2), so that no
// group of one (the one-row kernel, converting the weights again) is left
// where a larger group could take it.
func eachGroup(rest, most int) int {
	groups := (rest + most - 1) / most
	return (rest + groups - 1) / groups
}

// eachPieceRows is the weight rows matMulEachRows takes at a time, every
// token row over them before the next: few enough to stay in L2 (32 rows
// of 8192 F16 weights are 512 KiB), so that a call over many rows reads
// each weight from memory once.
const eachPieceRows = 32

// matMulEachRows is the loop of one-row products that MatMulEach* is
// bit-identical to, and what it runs where there is no multi-token kernel,
// over the rows in pieces of eachPieceRows. One token row takes the whole
// range in one call, as MatMulF16 would: it reads each weight once anyway,
// and pieces would cut the one-row decode's streams (streamDots).
func matMulEachRows[W any](mm func(dst []float32, ldd int, x []float32, nt, cols int, w []W, r0, r1 int),
	dst []float32, ldd int, x []float32, nt, cols int, w []W, r0, r1 int) {
	piece := eachPieceRows
	if nt == 1 {
		piece = max(1, r1-r0)
	}
	for p := r0; p < r1; p += piece {
		pe := min(r1, p+piece)
		for t := 0; t < nt; t++ {
			mm(dst[t*ldd:], ldd, x[t*cols:(t+1)*cols], 1, cols, w, p, pe)
		}
	}
}
