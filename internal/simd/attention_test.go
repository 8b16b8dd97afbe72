package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attnShape is one ScoresF32/AccumulateF32 call shape.
type attnShape struct {
	nq, dim, n, ld, off int
}

func (s attnShape) String() string {
	return fmt.Sprintf("nq=%d, dim=%d, n=%d, ld=%d, off=%d", s.nq, s.dim, s.n, s.ld, s.off)
}

// attnShapes returns the shapes the attention tests try: the model shapes
// (dim 64, 128, 256 with nq 1, 2, 4, 8 and n 16 or 64), every nq from 1 to 9
// (the blocks of 4 and each leftover) with small odd dims and row counts,
// and random shapes with odd tails.
func attnShapes(r *rand.Rand) []attnShape {
	var s []attnShape
	for _, dim := range []int{64, 128, 256} {
		for _, nq := range []int{1, 2, 4, 8} {
			for _, n := range []int{16, 64} {
				s = append(s, attnShape{nq, dim, n, n, 0})
			}
		}
	}
	for nq := 1; nq <= 9; nq++ {
		for _, dim := range []int{0, 1, 7, 8, 9, 15, 16, 17, 24, 32, 40, 48, 72, 80, 96, 130} {
			n := 1 + r.IntN(20)
			s = append(s, attnShape{nq, dim, n, n + r.IntN(4), r.IntN(8)})
		}
	}
	for i := 0; i < 60; i++ {
		n := r.IntN(70)
		s = append(s, attnShape{1 + r.IntN(9), r.IntN(300), n, n + r.IntN(5), r.IntN(8)})
	}
	return append(s, attnShape{4, 128, 0, 0, 0}, attnShape{0, 128, 16, 16, 0})
}

// nanPadded returns a copy of s at index off of a backing array whose other
// values are the NaN sentinel, so a kernel that reads past either end
// poisons its result.
func nanPadded(s []float32, off int) []float32 {
	b := make([]float32, off+len(s)+16)
	for i := range b {
		b[i] = sentinel
	}
	copy(b[off:], s)
	return b[off : off+len(s)]
}

// attnInputs returns random q (or acc) and rows for s, NaN-padded and
// misaligned, and an nq×n matrix of stride s.ld (dst or w) whose values
// past n in each row are the sentinel.
func attnInputs(r *rand.Rand, s attnShape) (v, rows, m []float32, check func(t *testing.T)) {
	v = nanPadded(randF32(r, s.nq*s.dim), (s.off+1)%8)
	rows = nanPadded(randF32(r, s.n*s.dim), (s.off+2)%8)
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
	return v, rows, m, check
}

// TestScoresF32 compares ScoresF32 and its generic twin with a float64 sum
// per score, within dotTol of Σ|q*row|; dst entries past n in each row and
// the guard regions must keep their sentinel.
func TestScoresF32(t *testing.T) {
	impls := []struct {
		name string
		f    func(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int)
	}{
		{"ScoresF32", ScoresF32},
		{"scoresF32Generic", scoresF32Generic},
	}
	if hasAVX512 { // the default set is avx512: the avx2 kernels too
		impls = append(impls, struct {
			name string
			f    func(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int)
		}{"ScoresF32/avx2", func(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
			defer ForceAVX2()()
			ScoresF32(dst, ldd, q, nq, dim, rows, n)
		}})
	}
	r := newRand(t)
	for _, s := range attnShapes(r) {
		q, rows, dst0, _ := attnInputs(r, s)
		for _, im := range impls {
			dst, check := guardedF32(s.off, len(dst0), 16)
			copy(dst, dst0)
			im.f(dst, s.ld, q, s.nq, s.dim, rows, s.n)
			check(t)
			for i := 0; i < s.nq; i++ {
				for j := 0; j < s.ld && i*s.ld+j < len(dst); j++ {
					got := dst[i*s.ld+j]
					if j >= s.n {
						if math.Float32bits(got) != math.Float32bits(sentinel) {
							t.Fatalf("%s(%v) wrote dst[%d*ldd+%d] = %v past n", im.name, s, i, j, got)
						}
						continue
					}
					var want, mag float64
					for d := 0; d < s.dim; d++ {
						p := float64(q[i*s.dim+d]) * float64(rows[j*s.dim+d])
						want, mag = want+p, mag+math.Abs(p)
					}
					if !within(float64(got), want, mag) {
						t.Fatalf("%s(%v): dst[%d*ldd+%d] = %v, want %v (Σ|q·row| %v)", im.name, s, i, j, got, want, mag)
					}
				}
			}
		}
	}
}

// TestAccumulateF32 compares AccumulateF32 and its generic twin with a
// float64 sum per output, within dotTol of |acc| + Σ|w*row|; the weights
// past n in each row of w are NaN, so reading one fails the test.
func TestAccumulateF32(t *testing.T) {
	impls := []struct {
		name string
		f    func(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int)
	}{
		{"AccumulateF32", AccumulateF32},
		{"accumulateF32Generic", accumulateF32Generic},
	}
	if hasAVX512 {
		impls = append(impls, struct {
			name string
			f    func(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int)
		}{"AccumulateF32/avx2", func(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
			defer ForceAVX2()()
			AccumulateF32(acc, w, ldw, nq, dim, rows, n)
		}})
	}
	r := newRand(t)
	for _, s := range attnShapes(r) {
		acc0, rows, w, _ := attnInputs(r, s)
		for _, im := range impls {
			acc, check := guardedF32(s.off, len(acc0), 16)
			copy(acc, acc0)
			im.f(acc, w, s.ld, s.nq, s.dim, rows, s.n)
			check(t)
			for i := 0; i < s.nq; i++ {
				for d := 0; d < s.dim; d++ {
					want := float64(acc0[i*s.dim+d])
					mag := math.Abs(want)
					for j := 0; j < s.n; j++ {
						p := float64(w[i*s.ld+j]) * float64(rows[j*s.dim+d])
						want, mag = want+p, mag+math.Abs(p)
					}
					if got := acc[i*s.dim+d]; !within(float64(got), want, mag) {
						t.Fatalf("%s(%v): acc[%d*dim+%d] = %v, want %v (|acc|+Σ|w·row| %v)", im.name, s, i, d, got, want, mag)
					}
				}
			}
		}
	}
}

// TestAccumulateF32SetsBitExact checks that the AVX-512 accumulate kernels
// (head sizes a multiple of 16) give the AVX2 kernels' results bit for
// bit: every output column takes the same fused multiply-adds in the same
// order.
func TestAccumulateF32SetsBitExact(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for _, s := range attnShapes(r) {
		if s.nq == 0 || s.n == 0 || s.dim == 0 {
			continue
		}
		acc0, rows, w, _ := attnInputs(r, s)
		got, want := append([]float32(nil), acc0...), append([]float32(nil), acc0...)
		AccumulateF32(got, w, s.ld, s.nq, s.dim, rows, s.n)
		restore := ForceAVX2()
		AccumulateF32(want, w, s.ld, s.nq, s.dim, rows, s.n)
		restore()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: acc[%d] = %v with avx512, %v with avx2", s, i, got[i], want[i])
			}
		}
	}
}

// TestAttentionGeneric runs the exported attention functions with the
// generic kernels selected, on one model shape, against the assembly.
func TestAttentionGeneric(t *testing.T) {
	r := newRand(t)
	s := attnShape{nq: 5, dim: 136, n: 19, ld: 21, off: 3}
	q, rows, w, _ := attnInputs(r, s)
	dst := make([]float32, len(w))
	dstG := make([]float32, len(w))
	acc := randF32(r, s.nq*s.dim)
	accG := append([]float32(nil), acc...)
	ScoresF32(dst, s.ld, q, s.nq, s.dim, rows, s.n)
	AccumulateF32(acc, w, s.ld, s.nq, s.dim, rows, s.n)
	generic(func() {
		ScoresF32(dstG, s.ld, q, s.nq, s.dim, rows, s.n)
		AccumulateF32(accG, w, s.ld, s.nq, s.dim, rows, s.n)
	})
	for i := 0; i < s.nq; i++ {
		for j := 0; j < s.n; j++ {
			if a, b := dst[i*s.ld+j], dstG[i*s.ld+j]; math.Abs(float64(a-b)) > 1e-4*(1+math.Abs(float64(b))) {
				t.Errorf("ScoresF32(%v): dst[%d*ldd+%d] = %v, generic %v", s, i, j, a, b)
			}
		}
	}
	for i := range acc {
		if math.Abs(float64(acc[i]-accG[i])) > 1e-4*(1+math.Abs(float64(accG[i]))) {
			t.Errorf("AccumulateF32(%v): acc[%d] = %v, generic %v", s, i, acc[i], accG[i])
		}
	}
}

func TestAttentionShapePanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	tests := []panicCase{
		{"ScoresF32/negative", func() { ScoresF32(f(16), 16, f(64), 1, -8, f(128), 16) }},
		{"ScoresF32/ldd", func() { ScoresF32(f(64), 15, f(64), 2, 32, f(512), 16) }},
		{"ScoresF32/dst", func() { ScoresF32(f(31), 16, f(64), 2, 32, f(512), 16) }},
		{"ScoresF32/q", func() { ScoresF32(f(32), 16, f(63), 2, 32, f(512), 16) }},
		{"ScoresF32/rows", func() { ScoresF32(f(32), 16, f(64), 2, 32, f(511), 16) }},
		{"AccumulateF32/ldw", func() { AccumulateF32(f(64), f(64), 15, 2, 32, f(512), 16) }},
		{"AccumulateF32/w", func() { AccumulateF32(f(64), f(31), 16, 2, 32, f(512), 16) }},
		{"AccumulateF32/acc", func() { AccumulateF32(f(63), f(32), 16, 2, 32, f(512), 16) }},
		{"AccumulateF32/rows", func() { AccumulateF32(f(64), f(32), 16, 2, 32, f(500), 16) }},
		{"U8ToF32", func() { U8ToF32(f(8), make([]byte, 7), 1, 0) }},
		{"U4ToF32", func() { U4ToF32(f(8), make([]byte, 8), 1, 0) }},
		{"U2ToF32", func() { U2ToF32(f(8), make([]byte, 3), 1, 0) }},
		{"U8ToF32Vec/s", func() { U8ToF32Vec(f(8), make([]byte, 8), f(7), f(8)) }},
		{"U4ToF32Vec/z", func() { U4ToF32Vec(f(8), make([]byte, 4), f(8), f(9)) }},
		{"Q80ToF32/dst", func() { Q80ToF32(f(31), make([]byte, 34)) }},
		{"Q40ToF32/src", func() { Q40ToF32(f(32), make([]byte, 17)) }},
		{"Q41ToF32/src", func() { Q41ToF32(f(64), make([]byte, 41)) }},
	}
	checkPanics(t, "shapes", tests)
}

// TestAttentionNoAlloc checks that the chunk kernels keep their arguments
// on the caller's stack: a codec decodes into stack buffers, and a slice
// that escaped would cost an allocation per call.
func TestAttentionNoAlloc(t *testing.T) {
	allocs := testing.AllocsPerRun(20, func() {
		var codes [16 * 64]byte
		var rows [16 * 128]float32
		var q, acc [4 * 128]float32
		var w, dst [4 * 16]float32
		for j := 0; j < 16; j++ {
			U4ToF32(rows[j*128:(j+1)*128], codes[j*64:(j+1)*64], 0.5, -1)
		}
		Q80ToF32(rows[:128], codes[:4*q80BlockBytes])
		ScoresF32(dst[:], 16, q[:], 4, 128, rows[:], 16)
		AccumulateF32(acc[:], w[:], 16, 4, 128, rows[:], 16)
	})
	if allocs != 0 {
		t.Errorf("decoding a chunk and running ScoresF32 and AccumulateF32 on stack buffers: %v allocations, want 0", allocs)
	}
}
