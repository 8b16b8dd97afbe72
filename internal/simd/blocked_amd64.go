//go:build amd64 && gc && !purego

package simd

// The Zen 4 choice's blocked decode of long 16-bit rows.
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

// matVecBlocked sets dst[r] = dot(w[r*cols:(r+1)*cols], x) for r0 <= r <
// r1, with the bits of dotF16AVX2 (dotBF16AVX2 if bf16) on each row. cols
// is a multiple of 32; the last block may be shorter than blockCols.
func matVecBlocked(bf16 bool, dst, x []float32, cols int, w []uint16, r0, r1 int) {
	nb := (cols + blockCols - 1) / blockCols
	x = x[:cols]
	var acc [blockRows * 32]float32
	for g0 := r0; g0 < r1; g0 += blockRows {
		g1 := min(g0+blockRows, r1)
		clear(acc[:])
		for b := range nb {
			c := b * blockCols
			n := min(blockCols, cols-c)
			for r := g0; r < g1; r++ {
				// The piece blockAhead blocks on: this row's, past its
				// end the next group's, past r1 this one again.
				pr, pb := r, b+blockAhead
				if pb >= nb {
					pr, pb = r+blockRows, pb-nb
					if pr >= r1 {
						pr, pb = r, b
					}
				}
				wr := w[r*cols+c : r*cols+c+n]
				// The prefetch reads n*2 bytes from pf whatever the
				// piece's length (a prefetch past the end never faults).
				pf := &w[pr*cols+pb*blockCols]
				// Called directly, not through a func value: the
				// accumulators then stay on the stack (noescape).
				if bf16 {
					dotBF16AccAVX2(&acc[(r-g0)*32], &wr[0], &x[c], n, pf)
				} else {
					dotF16AccAVX2(&acc[(r-g0)*32], &wr[0], &x[c], n, pf)
				}
			}
		}
		for r := g0; r < g1; r++ {
			dst[r] = accSum((*[32]float32)(acc[(r-g0)*32:]))
		}
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
