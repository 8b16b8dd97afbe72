//go:build amd64 && gc && !purego

package simd

// dotKernel names a family of one-row dot product kernels.
type dotKernel uint8

const (
	dotGo     dotKernel = iota // the pure-Go twins
	dotAVX2                    // the AVX2 set, the tail of 0 to 7 through the twin
	dotAVX512                  // the AVX-512 set, every element in the assembly
)

// dotKernelF16, dotKernelBF16 and dotKernelQ80 return the family that
// dotF16, dotBF16 and dotQ80 use now. They are the one selection point
// those and the multi-token products (matMulEachF16, ...) share, so that a
// token row in a group gets the bits the one-row kernel gives it: a change
// of which kernel decode takes on some CPU goes here.
//
// On Zen 4 (useZen4) F16 and BF16 take the AVX2 family under the avx512
// set (dispatch_amd64.go's zen4 choice; the AVX2 kernels with an L2
// prefetch from zen4PrefetchCols columns give the plain AVX2 kernels' bits).
func dotKernelF16() dotKernel  { return zen4U16(dotKernelNow()) }
func dotKernelBF16() dotKernel { return zen4U16(dotKernelNow()) }
func dotKernelQ80() dotKernel  { return dotKernelNow() }

// zen4U16 is the F16 and BF16 family on Zen 4: AVX2 where AVX-512 runs.
func zen4U16(k dotKernel) dotKernel {
	if k == dotAVX512 && useZen4 {
		return dotAVX2
	}
	return k
}

// zen4Prefetch reports whether dotF16 and dotBF16, in the AVX2 family
// (dotKernelF16, dotKernelBF16), take a row of cols columns through the
// prefetching kernels (dotF16AVX2T1, the same bits): only under the Zen 4
// choice (zen4U16), and only from zen4PrefetchCols columns. The plain AVX2
// set, ForceAVX2 included, never does.
func zen4Prefetch(cols int) bool { return zen4Enabled() && cols >= zen4PrefetchCols }

func dotKernelNow() dotKernel {
	switch {
	case useAVX512:
		return dotAVX512
	case useAsm:
		return dotAVX2
	}
	return dotGo
}

// eachMost is the largest group of token rows a multi-token kernel of the
// family takes (its accumulators fill the vector registers).
func eachMost(k dotKernel, q80 bool) int {
	if k == dotAVX512 && q80 {
		return 4
	}
	return 3
}

func matMulEachF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	k := dotKernelF16()
	if nt == 1 || !useAsm || cols < 8 || k == dotGo { // matMulF16's generic path, or one row
		matMulEachRows(matMulF16, dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMulEachU16(k, false, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulEachBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	k := dotKernelBF16()
	if nt == 1 || !useAsm || cols < 8 || k == dotGo {
		matMulEachRows(matMulBF16, dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMulEachU16(k, true, dst, ldd, x, nt, cols, w, r0, r1)
}

// eachChunkBytes is the weight bytes matMulEach* take at a time: every
// group of token rows passes over such a chunk, one weight row at a time,
// before the next group, so that the chunk is read from DRAM once and then
// from L2 while a group's token rows stay in L1. Taking each weight row
// against every group in turn (a chunk of one row) put the token rows of
// all groups in L1 at once, more than it holds for 5 rows of 2048
// columns: on the Zen 4 (BenchmarkMatMulEach, F16, 2048×2048) 5 token
// rows then cost 2.4× one row where 3 cost 1.04×.
const eachChunkBytes = 64 << 10

// matMulEachU16 takes the weight rows in chunks of eachChunkBytes, each
// against the token rows in groups (eachGroup): a group of one through dotF16 or
// dotBF16 (what matMul's one-row path calls), larger groups through the
// multi-token kernel of family k, plus, for the AVX2 family, each row's
// tail through the twin as dotF16 adds it. Under the Zen 5 choice rows of
// a multiple of 32 columns below 4096 go through matVecsRuns
// (zen5EachRuns), under the Zen 4 and Zen 5 choices other rows of 1024
// columns or more through matVecsBlocked (zen4EachBlocked), with the same
// bits.
func matMulEachU16(k dotKernel, bf16 bool, dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	if zen5EachRuns(cols) {
		matVecsRuns(bf16, dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	if zen4EachBlocked(cols) {
		matVecsBlocked(bf16, dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	most := eachMost(k, false)
	n8 := cols &^ 7
	chunk := max(1, eachChunkBytes/(2*cols))
	for rc := r0; rc < r1; rc += chunk {
		re := min(r1, rc+chunk)
		for t := 0; t < nt; {
			g := eachGroup(nt-t, most)
			for r := rc; r < re; r++ {
				wr := w[r*cols : (r+1)*cols]
				if g == 1 {
					if bf16 {
						dst[t*ldd+r] = dotBF16(wr, x[t*cols:(t+1)*cols])
					} else {
						dst[t*ldd+r] = dotF16(wr, x[t*cols:(t+1)*cols])
					}
					continue
				}
				_ = dst[(t+g-1)*ldd+r]
				_ = x[(t+g)*cols-1]
				dotsU16(k, bf16, g, &dst[t*ldd+r], ldd, &wr[0], &x[t*cols], cols, cols)
				if k == dotAVX2 && n8 < cols {
					for u := t; u < t+g; u++ {
						xu := x[u*cols : (u+1)*cols]
						if bf16 {
							dst[u*ldd+r] += dotBF16Generic(wr[n8:], xu[n8:])
						} else {
							dst[u*ldd+r] += dotF16Generic(wr[n8:], xu[n8:])
						}
					}
				}
			}
			t += g
		}
	}
}

// dotsU16 calls the multi-token kernel of family k for g token rows.
func dotsU16(k dotKernel, bf16 bool, g int, dst *float32, ldd int, w *uint16, x *float32, ldx, n int) {
	switch {
	case k == dotAVX512 && !bf16 && g == 2:
		dots2F16AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX512 && !bf16 && g == 3:
		dots3F16AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX512 && bf16 && g == 2:
		dots2BF16AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX512 && bf16 && g == 3:
		dots3BF16AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && !bf16 && g == 2:
		dots2F16AVX2(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && !bf16 && g == 3:
		dots3F16AVX2(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && bf16 && g == 2:
		dots2BF16AVX2(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && bf16 && g == 3:
		dots3BF16AVX2(dst, ldd, w, x, ldx, n)
	default:
		panic("simd: no multi-token kernel")
	}
}

func matMulEachQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	k := dotKernelQ80()
	if nt == 1 || !useAsm || cols == 0 || k == dotGo { // matMulQ80's generic path, or one row
		matMulEachRows(matMulQ80, dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	most := eachMost(k, true)
	rowLen := cols / q80BlockSize * q80BlockBytes
	chunk := max(1, eachChunkBytes/rowLen)
	for rc := r0; rc < r1; rc += chunk {
		re := min(r1, rc+chunk)
		for t := 0; t < nt; {
			g := eachGroup(nt-t, most)
			for r := rc; r < re; r++ {
				wr := w[r*rowLen : (r+1)*rowLen]
				if g == 1 {
					dst[t*ldd+r] = dotQ80(wr, x[t*cols:(t+1)*cols])
					continue
				}
				_ = dst[(t+g-1)*ldd+r]
				_ = x[(t+g)*cols-1]
				dotsQ80(k, g, &dst[t*ldd+r], ldd, &wr[0], &x[t*cols], cols, cols)
			}
			t += g
		}
	}
}

// dotsQ80 calls the multi-token Q8_0 kernel of family k for g token rows.
func dotsQ80(k dotKernel, g int, dst *float32, ldd int, w *byte, x *float32, ldx, n int) {
	switch {
	case k == dotAVX512 && g == 2:
		dots2Q80AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX512 && g == 3:
		dots3Q80AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX512 && g == 4:
		dots4Q80AVX512(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && g == 2:
		dots2Q80AVX2(dst, ldd, w, x, ldx, n)
	case k == dotAVX2 && g == 3:
		dots3Q80AVX2(dst, ldd, w, x, ldx, n)
	default:
		panic("simd: no multi-token kernel")
	}
}
