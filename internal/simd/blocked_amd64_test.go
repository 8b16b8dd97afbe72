//go:build amd64 && gc && !purego

package simd

import (
	"math"
	"testing"
)

// TestMatVecBlocked checks the Zen 4 and Zen 5 choices' blocked decode of long
// 16-bit rows: through MatMulF16 and MatMulBF16 with one token row, every
// output of a row range (partial groups of blockRows at both ends, ranges
// shorter than a group) must have the bits of the avx2 set's dot product on
// that row, and the outputs outside the range must be left alone. Rows
// whose length is no multiple of 32, or below zen4PrefetchCols, take the
// unblocked kernels and are checked the same way. Under the Zen 5 choice
// the same products (rows of a multiple of 32 columns) go as four runs of
// rows side by side (zen5Streams, streamDots), the ranges' rows past whole
// runs one at a time; they are checked the same way.
func TestMatVecBlocked(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	if !forceZen4Blocked() {
		t.Fatal("the Zen 4 choice does not block rows of zen4PrefetchCols columns")
	}
	r := newRand(t)
	const sentinel = -12345
	// 18944 (Qwen2.5-7B's FFN) ends in a block of 512 columns, 4096+32 in one
	// of 32; 4096+8 is no multiple of 32 and 1024 is below
	// zen4PrefetchCols: both take the unblocked kernels.
	for _, cols := range []int{zen4PrefetchCols, 5 * blockCols, 8192, 18944, zen4PrefetchCols + 32, zen4PrefetchCols + 8, blockCols} {
		for _, rg := range [][2]int{{0, 1}, {0, 8}, {3, 11}, {5, 6}, {1, 26}, {0, 41}} {
			rows := rg[1] + 2
			x := offsetCopy(randF32(r, cols), 1)
			for _, bf := range []bool{false, true} {
				w, mm, dot := randF16(r, rows*cols), MatMulF16, dotF16AVX2
				if bf {
					w, mm, dot = randBF16(r, rows*cols), MatMulBF16, dotBF16AVX2
				}
				// The Zen 4 choice's YMM kernels and the Zen 5 one's
				// ZMM encoding of them.
				for _, c := range []kernelSet{{"avx512-zen4", ForceZen4}, {"avx512-zen5", ForceZen5}} {
					got := make([]float32, rows)
					for i := range got {
						got[i] = sentinel
					}
					restore := c.force()
					mm(got, rows, x, 1, cols, w, rg[0], rg[1])
					restore()
					for row := range rows {
						want := float32(sentinel)
						if row >= rg[0] && row < rg[1] {
							want = dot(w[row*cols:(row+1)*cols], x)
						}
						if math.Float32bits(got[row]) != math.Float32bits(want) {
							t.Errorf("%s, bf16 %v, cols %d, rows [%d,%d): row %d = %v, want %v (dot%sAVX2's bits)",
								c.name, bf, cols, rg[0], rg[1], row, got[row], want, map[bool]string{false: "F16", true: "BF16"}[bf])
						}
					}
				}
			}
		}
	}
}

// forceZen4Blocked reports whether the Zen 4 choice, forced on, takes rows
// of zen4PrefetchCols columns through matVecBlocked.
func forceZen4Blocked() bool {
	restore := forceZen4(true)
	defer restore()
	return zen4Blocked(zen4PrefetchCols)
}

// TestAccSum checks accSum against dotF16AVX2's own reduction: a row of 32
// columns of ones against x is the sum of x's lanes in the kernel's order,
// for values whose sums round differently in other orders.
func TestAccSum(t *testing.T) {
	if !useAsm {
		t.Skip("skipping: no AVX2 kernels")
	}
	r := newRand(t)
	one := make([]uint16, 32)
	for i := range one {
		one[i] = 0x3c00 // binary16 1.0
	}
	for range 200 {
		x := randF32(r, 32)
		for i := range x {
			x[i] *= float32(math.Ldexp(1, r.IntN(40)-20))
		}
		var acc [32]float32
		copy(acc[:], x)
		if got, want := accSum(&acc), dotF16AVX2(one, x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("accSum(%v) = %v, dotF16AVX2 %v", x, got, want)
		}
	}
}

// TestMatVecsBlockedWhole checks matVecsBlocked over every row of a matrix
// (the prefetch of the last rows' pieces stays inside it) for row lengths
// of one to three blocks and 1 to 7 token rows: each output has
// dotF16AVX2's (dotBF16AVX2's) bits on its token row alone.
func TestMatVecsBlockedWhole(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for _, cols := range []int{blockCols, blockCols + 64, 3 * blockCols} {
		const rows = 19
		for nt := 1; nt <= 7; nt++ {
			x := randF32(r, nt*cols)
			for _, bf := range []bool{false, true} {
				w, dot := randF16(r, rows*cols), dotF16AVX2
				if bf {
					w, dot = randBF16(r, rows*cols), dotBF16AVX2
				}
				got := make([]float32, nt*rows)
				matVecsBlocked(bf, got, rows, x, nt, cols, w, 0, rows)
				for u := range nt {
					for row := range rows {
						want := dot(w[row*cols:(row+1)*cols], x[u*cols:(u+1)*cols])
						if g := got[u*rows+row]; math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("bf16 %v, cols %d, %d token rows: token %d, row %d = %v, want %v", bf, cols, nt, u, row, g, want)
						}
					}
				}
			}
		}
	}
}

// TestDotSeq checks dotF16SeqAVX2 and dotBF16SeqAVX2, the one-row dot over
// a run of consecutive rows in one call, and streamDots (2 to 4 such runs
// side by side, dot<T>Seq<s>AVX2, and the rows past whole runs): every row
// must have the bits of dotF16AVX2 (dotBF16AVX2) on that row, and nothing
// past the rows is written.
func TestDotSeq(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	const sentinel = -12345
	for _, n := range []int{32, 64, 96, 2048, 4096 + 32} {
		for _, rows := range []int{1, 2, 7, 9, 16, 23} {
			x := offsetCopy(randF32(r, n), 1)
			for _, bf := range []bool{false, true} {
				w, seq, dot := randF16(r, rows*n), dotF16SeqAVX2, dotF16AVX2
				if bf {
					w, seq, dot = randBF16(r, rows*n), dotBF16SeqAVX2, dotBF16AVX2
				}
				got := make([]float32, rows+1)
				got[rows] = sentinel
				seq(&got[0], &w[0], &x[0], n, rows)
				for row := range rows {
					want := dot(w[row*n:(row+1)*n], x)
					if math.Float32bits(got[row]) != math.Float32bits(want) {
						t.Errorf("bf16 %v, n %d, rows %d: row %d = %v, want %v", bf, n, rows, row, got[row], want)
					}
				}
				if got[rows] != sentinel {
					t.Errorf("bf16 %v, n %d, rows %d: wrote past the run", bf, n, rows)
				}
				for s := 2; s <= 4; s++ {
					got := make([]float32, rows+1)
					got[rows] = sentinel
					streamDots(bf, s, got, w, x, n, rows)
					for row := range rows {
						want := dot(w[row*n:(row+1)*n], x)
						if math.Float32bits(got[row]) != math.Float32bits(want) {
							t.Errorf("streamDots(%d), bf16 %v, n %d, rows %d: row %d = %v, want %v", s, bf, n, rows, row, got[row], want)
						}
					}
					if got[rows] != sentinel {
						t.Errorf("streamDots(%d), bf16 %v, n %d, rows %d: wrote past the rows", s, bf, n, rows)
					}
				}
			}
		}
	}
}
