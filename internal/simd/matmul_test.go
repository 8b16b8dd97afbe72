package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// matMulCase is one weight type's MatMul under test.
type matMulCase struct {
	name string
	q80  bool // cols must be a multiple of 32
	// make returns random weights for rows×cols, a function giving weight
	// (r, c) as float64, and the MatMul to call.
	make func(r *rand.Rand, rows, cols, off int) (wv func(r, c int) float64, mm func(dst []float32, ldd int, x []float32, nt, cols int, r0, r1 int))
}

var matMulCases = []matMulCase{
	{"F32", false, func(r *rand.Rand, rows, cols, off int) (func(int, int) float64, func([]float32, int, []float32, int, int, int, int)) {
		w := offsetCopy(randF32(r, rows*cols), off)
		return func(i, c int) float64 { return float64(w[i*cols+c]) },
			func(dst []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
				MatMulF32(dst, ldd, x, nt, cols, w, r0, r1)
			}
	}},
	{"F16", false, func(r *rand.Rand, rows, cols, off int) (func(int, int) float64, func([]float32, int, []float32, int, int, int, int)) {
		w := offsetCopy(randF16(r, rows*cols), off)
		return func(i, c int) float64 { return float64(F16ToF32Scalar(w[i*cols+c])) },
			func(dst []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
				MatMulF16(dst, ldd, x, nt, cols, w, r0, r1)
			}
	}},
	{"BF16", false, func(r *rand.Rand, rows, cols, off int) (func(int, int) float64, func([]float32, int, []float32, int, int, int, int)) {
		w := offsetCopy(randBF16(r, rows*cols), off)
		return func(i, c int) float64 { return float64(BF16ToF32Scalar(w[i*cols+c])) },
			func(dst []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
				MatMulBF16(dst, ldd, x, nt, cols, w, r0, r1)
			}
	}},
	{"Q80", true, func(r *rand.Rand, rows, cols, off int) (func(int, int) float64, func([]float32, int, []float32, int, int, int, int)) {
		rowBytes := cols / q80BlockSize * q80BlockBytes
		w := offsetCopy(randQ80(r, rows*cols/q80BlockSize), off)
		return func(i, c int) float64 { return q80Value(w[i*rowBytes:], c) },
			func(dst []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
				MatMulQ80(dst, ldd, x, nt, cols, w, r0, r1)
			}
	}},
}

// TestMatMul compares each MatMul with a naive float64 triple loop on random
// shapes: nt 1..9 (covering the 4-token blocks and the leftovers), rows up to
// 40 with a random [r0, r1), arbitrary cols (multiples of 32 for Q8_0), a
// misaligned weight slice and ldd > rows. Every dst entry outside the
// computed block must keep its sentinel. It runs with every kernel set the
// CPU supports.
func TestMatMul(t *testing.T) {
	for _, set := range kernelSets(t) {
		for _, tc := range matMulCases {
			t.Run(set.name+"/"+tc.name, func(t *testing.T) {
				defer set.force()()
				r := newRand(t)
				for iter := 0; iter < 60; iter++ {
					nt := 1 + iter%9
					rows := 1 + r.IntN(40)
					cols := r.IntN(300)
					if tc.q80 {
						cols = q80BlockSize * r.IntN(10)
					}
					if iter < 9 {
						cols = 64 + iter // small tails with every nt
						if tc.q80 {
							cols = 64
						}
					}
					r0 := r.IntN(rows + 1)
					r1 := r0 + r.IntN(rows-r0+1)
					if iter%5 == 0 {
						r0, r1 = 0, rows
					}
					ldd := rows + r.IntN(5)
					checkMatMulCase(t, r, tc, nt, rows, cols, r0, r1, ldd, iter%8)
				}
			})
		}
	}
}

func checkMatMulCase(t *testing.T, r *rand.Rand, tc matMulCase, nt, rows, cols, r0, r1, ldd, off int) {
	t.Helper()
	wv, mm := tc.make(r, rows, cols, off)
	x := offsetCopy(randF32(r, nt*cols), (off+3)%8)
	dst, check := guardedF32(off, (nt-1)*ldd+rows, 16)
	for i := range dst {
		dst[i] = sentinel
	}
	mm(dst, ldd, x, nt, cols, r0, r1)
	check(t)
	shape := fmt.Sprintf("MatMul%s(nt=%d, rows=%d, cols=%d, [%d,%d), ldd=%d)", tc.name, nt, rows, cols, r0, r1, ldd)
	for ti := 0; ti < nt; ti++ {
		for i := 0; i < ldd && ti*ldd+i < len(dst); i++ {
			got := dst[ti*ldd+i]
			if i < r0 || i >= r1 {
				if math.Float32bits(got) != math.Float32bits(sentinel) {
					t.Fatalf("%s wrote dst[%d*ldd+%d] = %v outside its rows", shape, ti, i, got)
				}
				continue
			}
			var want, mag float64
			for c := 0; c < cols; c++ {
				p := float64(x[ti*cols+c]) * wv(i, c)
				want, mag = want+p, mag+math.Abs(p)
			}
			if !within(float64(got), want, mag) {
				t.Fatalf("%s: dst[%d*ldd+%d] = %v, want %v (Σ|xw| %v)", shape, ti, i, got, want, mag)
			}
		}
	}
}

// TestMatMulLarge covers shapes big enough for the cache blocking of the
// token-block path: weights of several hundred KiB (row chunks) and rows
// longer than one column block (the accumulating micro-kernels).
func TestMatMulLarge(t *testing.T) {
	const mmColumnBlock = 2048 // mmKC in dispatch_amd64.go
	for _, set := range kernelSets(t) {
		r := newRand(t)
		for _, tc := range matMulCases {
			t.Run(set.name+"/"+tc.name, func(t *testing.T) {
				defer set.force()()
				checkMatMulCase(t, r, tc, 6, 200, 640, 5, 197, 203, 1)
				checkMatMulCase(t, r, tc, 1, 9, 640, 0, 9, 9, 2) // decode: one token row
				cols := 2*mmColumnBlock + 101
				if tc.q80 {
					cols = 2*mmColumnBlock + 3*q80BlockSize
				}
				checkMatMulCase(t, r, tc, 9, 11, cols, 1, 11, 12, 3)
				checkMatMulCase(t, r, tc, 1, 7, cols, 0, 7, 7, 5)
				// The packed path (MatMulPackTokensF16() or Q80() token rows or more:
				// 32 with the AVX-512 kernels, 64 or 256 with the AVX2 ones):
				// whole and partial 6-token blocks, 16-row panels with a
				// row tail, panels of several column blocks (packKC) and
				// a column tail.
				for _, sh := range []struct{ nt, rows, cols, r0, r1 int }{
					{33, 48, 256, 0, 48}, {44, 37, 600, 3, 37}, {64, 32, 256, 0, 32}, {65, 37, 600, 3, 37}, {259, 50, 72, 0, 50}, {262, 19, 1030, 2, 19}, {256, 16, 8, 0, 16}, {515, 21, 40, 1, 21},
				} {
					c := sh.cols
					if tc.q80 {
						c = max(q80BlockSize, c/q80BlockSize*q80BlockSize)
					}
					checkMatMulCase(t, r, tc, sh.nt, sh.rows, c, sh.r0, sh.r1, sh.rows+1, sh.nt%8)
				}
			})
		}
	}
}

// TestMatMulBatchInvariant checks the property the packed path gives: a
// token row's outputs do not depend on the other token rows of the call
// (as long as every call takes the same path, MatMulPackTokens*() rows
// or more), nor on how the weight rows are split at multiples of
// MatMulPackRows: bit for bit.
func TestMatMulBatchInvariant(t *testing.T) {
	for _, set := range kernelSets(t) {
		for _, tc := range matMulCases {
			if tc.name == "F32" || set.name == "generic" {
				continue // not the packed path: no such promise
			}
			t.Run(set.name+"/"+tc.name, func(t *testing.T) {
				defer set.force()()
				r := newRand(t)
				pt := matMulPackTokens(tc.name)
				const rows, cols = 48, 544
				nt := 3 * pt
				_, mm := tc.make(r, rows, cols, 0)
				x := randF32(r, nt*cols)
				want := make([]float32, nt*rows)
				mm(want, rows, x, nt, cols, 0, rows)
				got := make([]float32, nt*rows)
				// The same tokens in two calls, the rows in three.
				for _, tr := range [][2]int{{0, pt + 5}, {pt + 5, nt}} {
					for _, rr := range [][2]int{{0, MatMulPackRows}, {MatMulPackRows, 3 * MatMulPackRows}} {
						mm(got[tr[0]*rows:], rows, x[tr[0]*cols:], tr[1]-tr[0], cols, rr[0], rr[1])
					}
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("dst[%d] = %v in pieces, %v in one call", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestMatMulSmallBatchInvariant: below the packed path, binary16 and
// bfloat16 weights give a token row the same bits whatever the number of
// token rows in the call (two or more) and its place among them (matMul's
// evenGroups), bit for bit; the row counts cross the 3-row gemm's groups
// and the 2048-column cache blocks.
func TestMatMulSmallBatchInvariant(t *testing.T) {
	for _, set := range kernelSets(t) {
		for _, tc := range matMulCases {
			if tc.name != "F16" && tc.name != "BF16" || set.name == "generic" {
				continue // not the gemm path: no such promise
			}
			t.Run(set.name+"/"+tc.name, func(t *testing.T) {
				defer set.force()()
				r := newRand(t)
				const rows, cols, nt = 50, 2056, 11
				if pt := matMulPackTokens(tc.name); nt >= pt {
					t.Skipf("the packed path from %d token rows", pt)
				}
				_, mm := tc.make(r, rows, cols, 0)
				x := randF32(r, nt*cols)
				want := make([]float32, nt*rows)
				mm(want, rows, x, nt, cols, 0, rows)
				for _, split := range [][]int{{0, 2, 5, 9, 11}, {0, 3, 7, 11}, {0, 5, 11}, {0, 4, 6, 8, 11}} {
					got := make([]float32, nt*rows)
					for i := 0; i+1 < len(split); i++ {
						a, b := split[i], split[i+1]
						mm(got[a*rows:], rows, x[a*cols:], b-a, cols, 0, rows)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("calls %v: dst[%d] (token row %d) = %v, %v in one call of %d", split, i, i/rows, got[i], want[i], nt)
						}
					}
				}
			})
		}
	}
}

// matMulPackTokens returns the packed path's threshold for a case of
// matMulCases by its name.
func matMulPackTokens(name string) int {
	switch name {
	case "BF16":
		return MatMulPackTokensBF16()
	case "Q80":
		return MatMulPackTokensQ80()
	}
	return MatMulPackTokensF16()
}
