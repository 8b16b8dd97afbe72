//go:build amd64 && gc && !purego

package simd

// The Zen 4 choice's blocked decode of long 16-bit rows, and the Zen 5
// choice's decode as runs of rows read side by side (decodeStreams,
// streamDots, matVecsRuns).
//
// A decode product streams each weight row once against one token vector x
// in float32. Where a row has 4096 columns or more, x (16 KiB or more) no
// longer stays in the 32 KiB L1 beside the streamed weights, and on the
// Zen 4 the avx2 kernel, even with its L2 prefetch (dotF16AVX2T1), read a
// 2048×8192 F16 matrix at 0.66–0.72 of a plain streaming sum on one core,
// where rows of 2048 columns read at 0.95 (docs/performance.md, "Zen 4
// decode: long rows in blocks"). matVecBlocked takes such rows in groups of
// blockRows, and each group a block of blockCols columns at a time (x's
// block, 4 KiB, stays in L1 while the group's rows use it), carrying every
// row's four accumulators from block to block (dotF16AccAVX2), so that a
// row's result has the bits of dotF16AVX2 on the whole row. The weights of
// a group are then read in 2 KiB pieces 16 KiB apart, a pattern the
// hardware prefetchers miss; every piece prefetches the one it takes two
// blocks later.
const (
	blockCols = 1024
	blockRows = 8
	// blockAhead is how many blocks ahead a piece prefetches.
	blockAhead = 2
)

// zen4Blocked reports whether the Zen 4 choice decodes rows of cols
// columns of 16-bit weights with matVecBlocked: from zen4PrefetchCols
// columns, in whole steps of the kernel's main loop (32 columns).
func zen4Blocked(cols int) bool {
	return zen4Prefetch(cols) && cols%32 == 0
}

// zen4EachBlocked reports whether the Zen 4 choice takes MatMulEachF16
// and MatMulEachBF16 (eval's side-by-side caches) over rows of cols columns
// through matVecsBlocked: from 1024 columns, in whole steps of 32. Against
// the unblocked multi-token kernels (groups of up to 3 token rows, whole
// rows) it ran 1.14× as fast on rows of 1024 columns, 1.3–1.8× on 2048 and
// 1.5–2.0× on 8192 (BenchmarkMatMulEach, 3 and 5 token rows).
func zen4EachBlocked(cols int) bool {
	return zen4Enabled() && cols >= 1024 && cols%32 == 0
}

// decodeStreams is how many runs of rows the Zen 5 choice's one-row decode
// reads side by side (streamDots). On one core of the Zen 5 a single
// sequential stream of F16 rows (dotF16SeqAVX2) read matrices of 8192×2048
// and 2048×8192 (rows×columns) from DRAM at 0.85 and 0.64 of a plain sum of
// the same bytes; 2 streams at 1.1 and 0.83, 3 at 1.0 and 0.96, 4 at 1.16
// and 1.10 (on two cores 1.08 and 1.06), 5 and 6 within a few percent of 4
// (BenchmarkMatVecVariants, "seq<s>" against "seq", "blocked" and "sum");
// the 1B F16 model decoded 1.32–1.41× as fast on one thread as with a
// single stream, 1.27–1.61× on two (BenchmarkDecodeGGUF,
// docs/performance.md, "Zen 5: four streams").
const decodeStreams = 4

// zen5Streams reports whether the Zen 5 choice decodes rows of cols
// columns of 16-bit weights as decodeStreams runs of rows side by side
// (streamDots): rows of any length that is a multiple of 32 (the kernels'
// step). It takes the place of matVecBlocked's blocks for long rows too
// (x's blocks then stay in L1 no longer, but four streams read 8192-column
// rows at 1.5× the blocks' rate).
func zen5Streams(cols int) bool {
	return zen5Enabled() && cols%32 == 0
}

// seqDots is dotF16SeqAVX2, or dotBF16SeqAVX2 if bf16.
func seqDots(bf16 bool, dst *float32, w *uint16, x *float32, n, rows int) {
	if bf16 {
		dotBF16SeqAVX2(dst, w, x, n, rows)
		return
	}
	dotF16SeqAVX2(dst, w, x, n, rows)
}

// streamDots sets dst[r] = dot(w[r*n:(r+1)*n], x[:n]) for r < rows as s
// runs of rows read side by side (dot<T>Seq<s>AVX2, 2 <= s <= 4; the rows
// past s whole runs through seqDots), with the bits of dotF16AVX2
// (dotBF16AVX2 if bf16) on every row.
func streamDots(bf16 bool, s int, dst []float32, w []uint16, x []float32, n, rows int) {
	per := rows / s
	if per > 0 {
		d, wp, xp := &dst[0], &w[0], &x[0]
		switch {
		case s == 2 && bf16:
			dotBF16Seq2AVX2(d, wp, xp, n, per, per)
		case s == 2:
			dotF16Seq2AVX2(d, wp, xp, n, per, per)
		case s == 3 && bf16:
			dotBF16Seq3AVX2(d, wp, xp, n, per, per)
		case s == 3:
			dotF16Seq3AVX2(d, wp, xp, n, per, per)
		case s == 4 && bf16:
			dotBF16Seq4AVX2(d, wp, xp, n, per, per)
		case s == 4:
			dotF16Seq4AVX2(d, wp, xp, n, per, per)
		default:
			panic("simd: streamDots: s must be 2, 3 or 4")
		}
	}
	if r := s * per; r < rows {
		seqDots(bf16, &dst[r], &w[r*n], &x[0], n, rows-r)
	}
}

// matVecBlocked sets dst[r] = dot(w[r*cols:(r+1)*cols], x) for r0 <= r <
// r1, with the bits of dotF16AVX2 (dotBF16AVX2 if bf16) on each row. cols
// is a multiple of 32; the last block may be shorter than blockCols.
func matVecBlocked(bf16 bool, dst, x []float32, cols int, w []uint16, r0, r1 int) {
	matVecsBlocked(bf16, dst, 0, x, 1, cols, w, r0, r1)
}

// runsChunkBytes is the weights matVecsRuns takes at a time: a chunk
// read from DRAM for the first token row stays in the 1 MiB L2 for the
// others (128 and 256 KiB ran alike, 512 slower).
const runsChunkBytes = 256 << 10

// zen5EachRuns reports whether the Zen 5 choice takes MatMulEachF16 and
// MatMulEachBF16 (eval's side-by-side caches) over rows of cols columns
// through matVecsRuns: rows the one-row decode reads as runs
// (zen5Streams) below zen4PrefetchCols columns. Longer rows keep
// matVecsBlocked, whose blocks of x stay in L1: on 2048×8192 F16 weights
// it took 5 token rows in 2.37–2.40 ms against matVecsRuns' 3.55–3.62,
// where on 2048×2048 matVecsRuns took 0.54–0.59 ms against 0.68
// (BenchmarkMatMulEach; one token row 0.20–0.23 ms).
func zen5EachRuns(cols int) bool {
	return zen5Streams(cols) && cols < zen4PrefetchCols
}

// matVecsRuns is matVecsBlocked for the Zen 5 choice (zen5EachRuns), the
// same bits: the weight rows go in chunks of runsChunkBytes, the first
// token row over a chunk as the one-row decode reads it (streamDots, from
// DRAM), the others after it in groups of up to blockTokens over whole
// rows from L2, two rows a call (acc2Rows: each token vector loaded once
// for both; an odd last row through accPieces' ZMM kernels), each row's
// accumulators from zero, reduced by accSum as matVecsBlocked reduces
// them. Two rows a call took 5 token rows over 2048×2048 F16 in 0.49–0.51
// ms against 0.52 with one (3 token rows 0.39–0.41 against 0.44–0.45;
// BenchmarkMatMulEach, alternating binaries); groups of at most 2 or 3
// token rows were slower for 5 (0.55–0.56 ms).
func matVecsRuns(bf16 bool, dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	chunk := max(4, runsChunkBytes/(2*cols))
	const lda = 64 // a token row's accumulators: two weight rows' 32
	var acc [blockTokens * lda]float32
	for c0 := r0; c0 < r1; c0 += chunk {
		c1 := min(c0+chunk, r1)
		streamDots(bf16, decodeStreams, dst[c0:c1], w[c0*cols:c1*cols], x[:cols], cols, c1-c0)
		for t0 := 1; t0 < nt; {
			g := eachGroup(nt-t0, blockTokens)
			xt := &x[t0*cols]
			r := c0
			for ; r+1 < c1; r += 2 {
				clear(acc[:g*lda])
				acc2Rows(bf16, g, &acc[0], lda, &w[r*cols], cols, xt, cols, cols)
				for t := range g {
					dst[(t0+t)*ldd+r] = accSum((*[32]float32)(acc[t*lda:]))
					dst[(t0+t)*ldd+r+1] = accSum((*[32]float32)(acc[t*lda+32:]))
				}
			}
			if r < c1 {
				clear(acc[:g*lda])
				wr := &w[r*cols] // in L2: the prefetch is the row itself
				accPieces(bf16, true, g, &acc[0], lda, wr, xt, cols, cols, wr)
				for t := range g {
					dst[(t0+t)*ldd+r] = accSum((*[32]float32)(acc[t*lda:]))
				}
			}
			t0 += g
		}
	}
}

// acc2Rows is dots<g>F16Acc2ZMM (dots<g>BF16Acc2ZMM if bf16) for g of 1
// to blockTokens, called directly so that acc stays on the caller's stack.
func acc2Rows(bf16 bool, g int, acc *float32, lda int, w *uint16, ldw int, x *float32, ldx, n int) {
	if bf16 {
		switch g {
		case 1:
			dots1BF16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
		case 2:
			dots2BF16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
		case 3:
			dots3BF16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
		case 4:
			dots4BF16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
		case 5:
			dots5BF16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
		default:
			panic("simd: acc2Rows: token rows out of range")
		}
		return
	}
	switch g {
	case 1:
		dots1F16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
	case 2:
		dots2F16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
	case 3:
		dots3F16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
	case 4:
		dots4F16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
	case 5:
		dots5F16Acc2ZMM(acc, lda, w, ldw, x, ldx, n)
	default:
		panic("simd: acc2Rows: token rows out of range")
	}
}

// blockTokens is the most token rows matVecsBlocked takes a pass: the
// multi-token kernels' (dots5F16AccAVX2: 20 accumulators of the 32 YMM).
const blockTokens = 5

// matVecsBlocked is matVecBlocked for nt token rows (x's row t at t*cols,
// its outputs at dst[t*ldd+r]), for kvq eval's side-by-side caches
// (MatMulEachF16): every output has the bits matVecBlocked gives that token
// row alone. The token rows go in groups of up to blockTokens (eachGroup),
// each group through a kernel that converts each weight vector once for
// all its rows (accPieces); the groups after the first read a group of
// rows' weights from L2.
func matVecsBlocked(bf16 bool, dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	nb := (cols + blockCols - 1) / blockCols
	x = x[:nt*cols]
	const lda = blockRows * 32 // a token row's accumulators
	var acc [blockTokens * lda]float32
	zmm := !useHalf512 // full-width 512-bit units: the ZMM encoding
	for g0 := r0; g0 < r1; g0 += blockRows {
		g1 := min(g0+blockRows, r1)
		for t0 := 0; t0 < nt; {
			g := eachGroup(nt-t0, blockTokens)
			clear(acc[:])
			for b := range nb {
				c := b * blockCols
				n := min(blockCols, cols-c)
				xt := x[t0*cols+c : (t0+g-1)*cols+c+n]
				for r := g0; r < g1; r++ {
					// The piece blockAhead blocks on: this row's, past its
					// end a later group's, past r1 this one again.
					pr := r + (b+blockAhead)/nb*blockRows
					pb := (b + blockAhead) % nb
					if pr >= r1 {
						pr, pb = r, b
					}
					wr := w[r*cols+c : r*cols+c+n]
					// The prefetch reads n*2 bytes from pf whatever the
					// piece's length (a prefetch past the end never
					// faults).
					pf := &w[pr*cols+pb*blockCols]
					accPieces(bf16, zmm, g, &acc[(r-g0)*32], lda, &wr[0], &xt[0], cols, n, pf)
				}
			}
			for t := t0; t < t0+g; t++ {
				for r := g0; r < g1; r++ {
					dst[t*ldd+r] = accSum((*[32]float32)(acc[(t-t0)*lda+(r-g0)*32:]))
				}
			}
			t0 += g
		}
	}
}

// accPieces runs the accumulating kernel for g token rows (1 to
// blockTokens): acc[t*lda:][:32] continues over w[:n] against x[t*ldx:][:n],
// prefetching n*2 bytes at pf; with zmm, 2 to 5 token rows through the
// ZMM encoding of the same kernels (dots<g><T>AccZMM, the same bits),
// which the Zen 5 takes: there the side-by-side product of 5 token rows
// over 2048×2048 F16 weights ran 0.79–0.83 ms with the YMM kernels,
// 0.62–0.68 with the ZMM ones (BenchmarkMatMulEach; the avx512 choice's
// multi-token kernels 0.48–0.53). One token row (decode) keeps the YMM
// kernel, the one measured in the model. It calls the assembly
// directly, never through a func value, so that the accumulators stay on
// the caller's stack (noescape).
func accPieces(bf16, zmm bool, g int, acc *float32, lda int, w *uint16, x *float32, ldx, n int, pf *uint16) {
	switch {
	case zmm && g > 1:
		accPiecesZMM(bf16, g, acc, lda, w, x, ldx, n, pf)
	case bf16:
		switch g {
		case 1:
			dotBF16AccAVX2(acc, w, x, n, pf)
		case 2:
			dots2BF16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 3:
			dots3BF16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 4:
			dots4BF16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 5:
			dots5BF16AccAVX2(acc, lda, w, x, ldx, n, pf)
		default:
			panic("simd: accPieces: token rows out of range")
		}
	default:
		switch g {
		case 1:
			dotF16AccAVX2(acc, w, x, n, pf)
		case 2:
			dots2F16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 3:
			dots3F16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 4:
			dots4F16AccAVX2(acc, lda, w, x, ldx, n, pf)
		case 5:
			dots5F16AccAVX2(acc, lda, w, x, ldx, n, pf)
		default:
			panic("simd: accPieces: token rows out of range")
		}
	}
}

// accPiecesZMM is accPieces through the ZMM encoding, for 2 to 5 token
// rows.
func accPiecesZMM(bf16 bool, g int, acc *float32, lda int, w *uint16, x *float32, ldx, n int, pf *uint16) {
	if bf16 {
		switch g {
		case 2:
			dots2BF16AccZMM(acc, lda, w, x, ldx, n, pf)
		case 3:
			dots3BF16AccZMM(acc, lda, w, x, ldx, n, pf)
		case 4:
			dots4BF16AccZMM(acc, lda, w, x, ldx, n, pf)
		case 5:
			dots5BF16AccZMM(acc, lda, w, x, ldx, n, pf)
		default:
			panic("simd: accPieces: token rows out of range")
		}
		return
	}
	switch g {
	case 2:
		dots2F16AccZMM(acc, lda, w, x, ldx, n, pf)
	case 3:
		dots3F16AccZMM(acc, lda, w, x, ldx, n, pf)
	case 4:
		dots4F16AccZMM(acc, lda, w, x, ldx, n, pf)
	case 5:
		dots5F16AccZMM(acc, lda, w, x, ldx, n, pf)
	default:
		panic("simd: accPieces: token rows out of range")
	}
}

// accSum reduces the four accumulators of 8 lanes that dotF16AccAVX2 keeps
// as dotF16AVX2 reduces its registers: lane-wise (a0+a2)+(a1+a3) (addTree),
// then the 128-bit halves added and the four lanes as (l0+l1)+(l2+l3)
// (hsum).
func accSum(a *[32]float32) float32 {
	var l [4]float32
	for j := range l {
		lo := (a[j] + a[16+j]) + (a[8+j] + a[24+j])
		hi := (a[4+j] + a[20+j]) + (a[12+j] + a[28+j])
		l[j] = lo + hi
	}
	return (l[0] + l[1]) + (l[2] + l[3])
}
