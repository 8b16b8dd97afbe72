package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// eachCase is one weight type of the MatMulEach products: each is the
// multi-token product and one its one-row reference (MatMul* with nt = 1),
// over a weight matrix of rows × cols that make returns.
type eachCase struct {
	name string
	cols []int
	make func(r *rand.Rand, rows, cols int) (each, one func(dst []float32, ldd int, x []float32, nt, cols, r0, r1 int))
}

var eachCases = []eachCase{
	{"F16", []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 127, 128, 129, 255, 256, 300, 1024, 1056, 2048, 2061, 4100, 4128, 5120},
		func(r *rand.Rand, rows, cols int) (each, one func([]float32, int, []float32, int, int, int, int)) {
			w := randF16(r, rows*cols)
			return func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulEachF16(d, ldd, x, nt, cols, w, r0, r1)
				}, func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulF16(d, ldd, x, nt, cols, w, r0, r1)
				}
		}},
	{"BF16", []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 127, 128, 129, 255, 256, 300, 1024, 1056, 2048, 2061, 4100, 4128, 5120},
		func(r *rand.Rand, rows, cols int) (each, one func([]float32, int, []float32, int, int, int, int)) {
			w := randBF16(r, rows*cols)
			return func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulEachBF16(d, ldd, x, nt, cols, w, r0, r1)
				}, func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulBF16(d, ldd, x, nt, cols, w, r0, r1)
				}
		}},
	{"Q8_0", []int{32, 64, 96, 128, 160, 224, 288, 2048 + 96},
		func(r *rand.Rand, rows, cols int) (each, one func([]float32, int, []float32, int, int, int, int)) {
			w := randQ80(r, rows*cols/q80BlockSize)
			return func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulEachQ80(d, ldd, x, nt, cols, w, r0, r1)
				}, func(d []float32, ldd int, x []float32, nt, cols, r0, r1 int) {
					MatMulQ80(d, ldd, x, nt, cols, w, r0, r1)
				}
		}},
}

// TestMatMulEachMatchesOneRow checks, on every kernel set, that each token
// row of MatMulEach* has the bits of MatMul* over that row alone, for 1 to
// 9 token rows (groups of every size the kernels take, and groups of one),
// columns with and without tails, a row range inside the matrix and, for
// the longest rows, over several chunks (eachChunkBytes); and that nothing
// outside that range is written. Rows of 1024 (one block), 1056, 2048,
// 4128 and 5120 columns take the Zen 4 choice's blocked kernels
// (zen4EachBlocked; 1056 and 4128 end in a block of 32), 2061 and 4100 the
// unblocked ones; under the Zen 5 choice 1024, 1056 and 2048 take
// matVecsRuns (zen5EachRuns; 2048 over three of its chunks).
func TestMatMulEachMatchesOneRow(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		for _, tc := range eachCases {
			t.Run(tc.name, func(t *testing.T) {
				r := newRand(t)
				for _, cols := range tc.cols {
					rows, r0, r1, ldd := 7, 1, 6, 9
					if cols >= 2048 { // several of matMulEach's (and matVecsRuns') chunks of weight rows
						rows, r0, r1, ldd = 140, 3, 137, 141
					}
					each, one := tc.make(r, rows, cols)
					for nt := 1; nt <= 9; nt++ {
						x := randF32(r, nt*cols)
						got := make([]float32, nt*ldd)
						want := make([]float32, nt*ldd)
						for i := range got {
							got[i], want[i] = sentinel, sentinel
						}
						each(got, ldd, x, nt, cols, r0, r1)
						for u := 0; u < nt; u++ {
							one(want[u*ldd:], ldd, x[u*cols:(u+1)*cols], 1, cols, r0, r1)
						}
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("cols %d, %d token rows: dst[%d] (token %d, row %d) = %v, one row alone %v",
									cols, nt, i, i/ldd, i%ldd, got[i], want[i])
							}
						}
					}
				}
			})
		}
	})
}

func TestEachGroup(t *testing.T) {
	for _, tt := range []struct{ rest, most, want int }{
		{1, 3, 1}, {2, 3, 2}, {3, 3, 3}, {4, 3, 2}, {5, 3, 3}, {6, 3, 3}, {7, 3, 3}, {5, 4, 3}, {8, 4, 4}, {9, 4, 3},
	} {
		if got := eachGroup(tt.rest, tt.most); got != tt.want {
			t.Errorf("eachGroup(%d, %d) = %d, want %d", tt.rest, tt.most, got, tt.want)
		}
	}
}
