package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// codeAttnShape is one ScoresU8/U4, AccumulateU8/U4 call shape: nq query
// (or accumulator) rows of stride ldv, cols columns, n code rows of stride
// ldc bytes, dst or w of stride ld.
type codeAttnShape struct {
	bits, nq, cols, n, ld, ldv, ldc, off int
}

func (s codeAttnShape) String() string {
	return fmt.Sprintf("bits=%d, nq=%d, cols=%d, n=%d, ld=%d, ldv=%d, ldc=%d, off=%d", s.bits, s.nq, s.cols, s.n, s.ld, s.ldv, s.ldc, s.off)
}

// codeAttnShapes returns the model shapes (one group of 32, 64 or 128
// columns of a row of dim 64 or 128, nq 1 to 5, n 16), small and odd
// shapes (tails of 1 to 7 columns, and of up to 31 for 4-bit codes; rows
// shorter than a step) and random ones.
func codeAttnShapes(r *rand.Rand) []codeAttnShape {
	var s []codeAttnShape
	for _, bits := range []int{8, 4} {
		for _, dim := range []int{64, 128} {
			for _, group := range []int{32, 64, 128} {
				if group > dim {
					continue
				}
				for nq := 1; nq <= 5; nq++ {
					for _, n := range []int{1, 3, 16, 17} {
						s = append(s, codeAttnShape{bits, nq, group, n, n + r.IntN(3), dim, dim * bits / 8, r.IntN(8)})
					}
				}
			}
		}
		for nq := 1; nq <= 9; nq++ {
			for _, cols := range []int{0, 2, 6, 8, 10, 16, 18, 24, 32, 40, 48, 72, 96, 130} {
				n := r.IntN(20)
				rb := cols * bits / 8
				s = append(s, codeAttnShape{bits, nq, cols, n, n + r.IntN(4), cols + r.IntN(9), rb + r.IntN(5), r.IntN(8)})
			}
		}
		for i := 0; i < 40; i++ {
			cols := 2 * r.IntN(150)
			n := r.IntN(40)
			s = append(s, codeAttnShape{bits, 1 + r.IntN(9), cols, n, n + r.IntN(5), cols + r.IntN(9), cols*bits/8 + r.IntN(9), r.IntN(8)})
		}
	}
	return s
}

// codeAttnInputs returns NaN-padded, misaligned q (or acc) rows, the code
// rows (random bytes: every code value, with the bytes between rows random
// too) and an nq×n matrix of stride ld (dst or w) whose values past n in
// each row are the sentinel.
func codeAttnInputs(r *rand.Rand, s codeAttnShape) (v []float32, codes []byte, m []float32, check func(t *testing.T)) {
	lenV := 0
	if s.nq > 0 {
		lenV = (s.nq-1)*s.ldv + s.cols
	}
	v = nanPadded(randF32(r, lenV), (s.off+1)%8)
	lenC := 0
	if s.n > 0 {
		lenC = (s.n-1)*s.ldc + s.cols*s.bits/8
	}
	codes = make([]byte, lenC+(s.off+3)%8)[(s.off+3)%8:]
	for i := range codes {
		codes[i] = byte(r.Uint32())
	}
	size := 0
	if s.nq > 0 {
		size = (s.nq-1)*s.ld + s.n
	}
	m, check = guardedF32(s.off, size, 16)
	for i := range m {
		m[i] = sentinel
		if i%max(s.ld, 1) < s.n {
			m[i] = float32(r.NormFloat64())
		}
	}
	return v, codes, m, check
}

// codeValue returns code c of row j, as float64, from the layouts'
// definition rather than the package's helpers: 8-bit codes are bytes; a
// 4-bit row is a run of cols codes in blocks of 32, byte k of a block of t
// codes holding code k in its low nibble and code k+t/2 in its high one.
func codeValue(codes []byte, s codeAttnShape, j, c int) float64 {
	row := codes[j*s.ldc:]
	if s.bits == 8 {
		return float64(row[c])
	}
	b := c / 32 * 32
	h := min(32, s.cols-b) / 2
	if k := c - b; k < h {
		return float64(row[b/2+k] & 15)
	}
	return float64(row[b/2+c-b-h] >> 4)
}

type scoresCodesFunc func(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int)

type accumulateCodesFunc func(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int)

// TestScoresCodes compares ScoresU8, ScoresU4 and the generic twin with a
// float64 sum per score, within dotTol of Σ|q*code|; dst entries past n in
// each row and the guard regions must keep their sentinel.
func TestScoresCodes(t *testing.T) { forEachSet(t, testScoresCodes) }

func testScoresCodes(t *testing.T) {
	twin := func(bits int) scoresCodesFunc {
		return func(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
			scoresCodesGeneric(bits, false, dst, ldd, q, ldq, nq, 0, cols, codes, ldc, n)
		}
	}
	impls := map[int][]struct {
		name string
		f    scoresCodesFunc
	}{
		8: {{"ScoresU8", ScoresU8}, {"scoresCodesGeneric(8)", twin(8)}},
		4: {{"ScoresU4", ScoresU4}, {"scoresCodesGeneric(4)", twin(4)}},
	}
	r := newRand(t)
	for _, s := range codeAttnShapes(r) {
		q, codes, dst0, _ := codeAttnInputs(r, s)
		for _, im := range impls[s.bits] {
			if (s.n == 0 || s.cols == 0) && im.name[0] == 's' {
				continue // the twin assumes n > 0 and cols > 0
			}
			dst, check := guardedF32(s.off, len(dst0), 16)
			copy(dst, dst0)
			im.f(dst, s.ld, q, s.ldv, s.nq, s.cols, codes, s.ldc, s.n)
			check(t)
			for i := 0; i < s.nq; i++ {
				for j := 0; j < s.ld && i*s.ld+j < len(dst); j++ {
					got := dst[i*s.ld+j]
					if j >= s.n || s.cols == 0 {
						if math.Float32bits(got) != math.Float32bits(dst0[i*s.ld+j]) {
							t.Fatalf("%s(%v) wrote dst[%d*ldd+%d] = %v", im.name, s, i, j, got)
						}
						continue
					}
					var want, mag float64
					for c := 0; c < s.cols; c++ {
						p := float64(q[i*s.ldv+c]) * codeValue(codes, s, j, c)
						want, mag = want+p, mag+math.Abs(p)
					}
					if !within(float64(got), want, mag) {
						t.Fatalf("%s(%v): dst[%d*ldd+%d] = %v, want %v (Σ|q·code| %v)", im.name, s, i, j, got, want, mag)
					}
				}
			}
		}
	}
}

// TestAccumulateCodes compares AccumulateU8, AccumulateU4 and the generic
// twin with a float64 sum per output, within dotTol of
// |acc| + |bias| + Σ|w*code|; the weights past n in each row of w are NaN,
// so reading one fails the test, and accumulator columns past cols must
// keep their values.
func TestAccumulateCodes(t *testing.T) { forEachSet(t, testAccumulateCodes) }

func testAccumulateCodes(t *testing.T) {
	twin := func(bits int) accumulateCodesFunc {
		return func(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
			accumulateCodesGeneric(bits, acc, lda, bias, w, ldw, nq, 0, cols, codes, ldc, n)
		}
	}
	impls := map[int][]struct {
		name string
		f    accumulateCodesFunc
	}{
		8: {{"AccumulateU8", AccumulateU8}, {"accumulateCodesGeneric(8)", twin(8)}},
		4: {{"AccumulateU4", AccumulateU4}, {"accumulateCodesGeneric(4)", twin(4)}},
	}
	r := newRand(t)
	for _, s := range codeAttnShapes(r) {
		acc0, codes, w, _ := codeAttnInputs(r, s)
		bias := randF32(r, s.nq)
		for _, im := range impls[s.bits] {
			acc, check := guardedF32(s.off, len(acc0), 16)
			copy(acc, acc0)
			im.f(acc, s.ldv, bias, w, s.ld, s.nq, s.cols, codes, s.ldc, s.n)
			check(t)
			for i := range acc {
				row, c := i/s.ldv, i%s.ldv
				if c >= s.cols {
					if math.Float32bits(acc[i]) != math.Float32bits(acc0[i]) {
						t.Fatalf("%s(%v) changed acc[%d*lda+%d] past cols: %v, was %v", im.name, s, row, c, acc[i], acc0[i])
					}
					continue
				}
				want := float64(acc0[i]) + float64(bias[row])
				mag := math.Abs(float64(acc0[i])) + math.Abs(float64(bias[row]))
				for j := 0; j < s.n; j++ {
					p := float64(w[row*s.ld+j]) * codeValue(codes, s, j, c)
					want, mag = want+p, mag+math.Abs(p)
				}
				if got := acc[i]; !within(float64(got), want, mag) {
					t.Fatalf("%s(%v): acc[%d*lda+%d] = %v, want %v (|acc|+|bias|+Σ|w·code| %v)", im.name, s, row, c, got, want, mag)
				}
			}
		}
	}
}

// TestAccumulateCodesSetsBitExact checks that the AVX-512 code accumulate
// kernels give the AVX2 kernels' results bit for bit where both cover the
// same columns (8-bit rows of a multiple of 16 columns, 4-bit rows of any
// length: both take blocks of 32): each output takes the same fused
// multiply-adds in the same order.
func TestAccumulateCodesSetsBitExact(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for _, s := range codeAttnShapes(r) {
		if s.nq == 0 || s.n == 0 || s.cols == 0 || s.bits == 8 && s.cols%16 != 0 {
			continue
		}
		acc0, codes, w, _ := codeAttnInputs(r, s)
		bias := randF32(r, s.nq)
		f := AccumulateU8
		if s.bits == 4 {
			f = AccumulateU4
		}
		got, want := append([]float32(nil), acc0...), append([]float32(nil), acc0...)
		f(got, s.ldv, bias, w, s.ld, s.nq, s.cols, codes, s.ldc, s.n)
		restore := ForceAVX2()
		f(want, s.ldv, bias, w, s.ld, s.nq, s.cols, codes, s.ldc, s.n)
		restore()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: acc[%d] = %v with avx512, %v with avx2", s, i, got[i], want[i])
			}
		}
	}
}

// TestCodeAttentionGeneric runs the exported packed-code functions with
// the generic kernels selected, on one model-like shape with a column
// tail, against the assembly.
func TestCodeAttentionGeneric(t *testing.T) {
	r := newRand(t)
	for _, bits := range []int{8, 4} {
		s := codeAttnShape{bits: bits, nq: 5, cols: 70, n: 19, ld: 21, ldv: 136, ldc: 136 * bits / 8, off: 3}
		q, codes, w, _ := codeAttnInputs(r, s)
		scores, accumulate := ScoresU8, AccumulateU8
		if bits == 4 {
			scores, accumulate = ScoresU4, AccumulateU4
		}
		dst := make([]float32, len(w))
		dstG := make([]float32, len(w))
		acc := randF32(r, len(q))
		accG := append([]float32(nil), acc...)
		bias := randF32(r, s.nq)
		scores(dst, s.ld, q, s.ldv, s.nq, s.cols, codes, s.ldc, s.n)
		accumulate(acc, s.ldv, bias, w, s.ld, s.nq, s.cols, codes, s.ldc, s.n)
		generic(func() {
			scores(dstG, s.ld, q, s.ldv, s.nq, s.cols, codes, s.ldc, s.n)
			accumulate(accG, s.ldv, bias, w, s.ld, s.nq, s.cols, codes, s.ldc, s.n)
		})
		for i := range dst {
			if a, b := dst[i], dstG[i]; math.Abs(float64(a-b)) > 1e-4*(1+math.Abs(float64(b))) {
				t.Errorf("Scores(%v): dst[%d] = %v, generic %v", s, i, a, b)
			}
		}
		for i := range acc {
			if a, b := acc[i], accG[i]; math.Abs(float64(a-b)) > 1e-4*(1+math.Abs(float64(b))) {
				t.Errorf("Accumulate(%v): acc[%d] = %v, generic %v", s, i, a, b)
			}
		}
	}
}

func TestCodeAttentionShapePanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	b := func(n int) []byte { return make([]byte, n) }
	tests := []panicCase{
		{"ScoresU8/negative", func() { ScoresU8(f(16), 16, f(64), 32, 1, -8, b(512), 32, 16) }},
		{"ScoresU8/ldd", func() { ScoresU8(f(64), 15, f(64), 32, 2, 32, b(512), 32, 16) }},
		{"ScoresU8/ldq", func() { ScoresU8(f(64), 16, f(64), 31, 2, 32, b(512), 32, 16) }},
		{"ScoresU8/dst", func() { ScoresU8(f(31), 16, f(64), 32, 2, 32, b(512), 32, 16) }},
		{"ScoresU8/q", func() { ScoresU8(f(32), 16, f(63), 32, 2, 32, b(512), 32, 16) }},
		{"ScoresU8/codes", func() { ScoresU8(f(32), 16, f(64), 32, 2, 32, b(511), 32, 16) }},
		{"ScoresU8/ldc", func() { ScoresU8(f(32), 16, f(64), 32, 2, 32, b(512), 31, 16) }},
		{"ScoresU4/odd", func() { ScoresU4(f(32), 16, f(64), 32, 2, 31, b(512), 32, 16) }},
		{"ScoresU4/codes", func() { ScoresU4(f(32), 16, f(64), 32, 2, 32, b(255), 16, 16) }},
		{"AccumulateU8/ldw", func() { AccumulateU8(f(64), 32, f(2), f(64), 15, 2, 32, b(512), 32, 16) }},
		{"AccumulateU8/lda", func() { AccumulateU8(f(64), 31, f(2), f(32), 16, 2, 32, b(512), 32, 16) }},
		{"AccumulateU8/acc", func() { AccumulateU8(f(63), 32, f(2), f(32), 16, 2, 32, b(512), 32, 16) }},
		{"AccumulateU8/bias", func() { AccumulateU8(f(64), 32, f(1), f(32), 16, 2, 32, b(512), 32, 16) }},
		{"AccumulateU4/codes", func() { AccumulateU4(f(64), 32, f(2), f(32), 16, 2, 32, b(255), 16, 16) }},
	}
	checkPanics(t, "shapes", tests)
}

// TestCodeAttentionNoAlloc checks that the packed-code kernels keep their
// arguments on the caller's stack.
func TestCodeAttentionNoAlloc(t *testing.T) {
	allocs := testing.AllocsPerRun(20, func() {
		var codes [16 * 128]byte
		var q, acc [4 * 128]float32
		var w, dst [4 * 16]float32
		var bias [4]float32
		ScoresU8(dst[:], 16, q[:], 128, 4, 128, codes[:], 128, 16)
		AccumulateU8(acc[:], 128, bias[:], w[:], 16, 4, 128, codes[:], 128, 16)
		ScoresU4(dst[:], 16, q[:], 128, 4, 64, codes[:], 64, 16)
		AccumulateU4(acc[:], 128, bias[:], w[:], 16, 4, 64, codes[:], 64, 16)
	})
	if allocs != 0 {
		t.Errorf("ScoresU8/U4 and AccumulateU8/U4 on stack buffers: %v allocations, want 0", allocs)
	}
}
