package simd

import (
	"fmt"
	"math"
	"testing"
)

// The checks the tile GEMM tests (MatMulQ80Q80, MatMulQ4KQ8K, …) share:
// every output the one-row dot's bits and its Go twin's.

// tileCall is a tile GEMM over token rows q and weight rows w (each
// row's bytes rb, each token row's qb): it sets dst[t*ldd+r], r in [r0,
// r1).
type tileCall struct {
	name      string // the function's, for messages
	dotName   string // the one-row dot's, for messages
	nt, cols  int
	rb, qb    int
	q, w      []byte
	run       func(dst []float32, ldd, r0, r1 int)
	dot, twin func(row, qt []byte) float32
}

// checkTileRows runs c over rows [r0, r1) into a dst of ldd a token row
// whose memory starts off floats into a guarded buffer (guardedF32) and is
// filled with sentinel: every output must be the one-row dot's and the
// twin's bits, every other dst entry (within the token rows' ldd, and the
// guards) untouched.
func checkTileRows(t *testing.T, c tileCall, off, ldd, r0, r1 int) {
	t.Helper()
	dst, check := guardedF32(off, (c.nt-1)*ldd+r1, 16)
	for i := range dst {
		dst[i] = sentinel
	}
	c.run(dst, ldd, r0, r1)
	check(t)
	shape := fmt.Sprintf("%s(nt=%d, cols=%d, [%d,%d))", c.name, c.nt, c.cols, r0, r1)
	for ti := 0; ti < c.nt; ti++ {
		qt := c.q[ti*c.qb : (ti+1)*c.qb]
		for i := 0; i < ldd && ti*ldd+i < len(dst); i++ {
			got := dst[ti*ldd+i]
			if i < r0 || i >= r1 {
				if math.Float32bits(got) != math.Float32bits(sentinel) {
					t.Fatalf("%s wrote dst[%d*ldd+%d] = %v outside its rows", shape, ti, i, got)
				}
				continue
			}
			row := c.w[i*c.rb : (i+1)*c.rb]
			one, twin := c.dot(row, qt), c.twin(row, qt)
			if math.Float32bits(got) != math.Float32bits(one) || math.Float32bits(got) != math.Float32bits(twin) {
				t.Fatalf("%s: token %d row %d = %v (%#x), %s %v (%#x), twin %v", shape, ti, i, got, math.Float32bits(got), c.dotName, one, math.Float32bits(one), twin)
			}
		}
	}
}

// checkTileTwin runs c over all its rows rows into a dst of rows a token
// row and checks every output against the twin's bits, naming the
// mismatches with prefix (all of them: t.Errorf).
func checkTileTwin(t *testing.T, c tileCall, rows int, prefix string) {
	t.Helper()
	dst := make([]float32, c.nt*rows)
	c.run(dst, rows, 0, rows)
	for i, got := range dst {
		row, qt := c.w[i%rows*c.rb:(i%rows+1)*c.rb], c.q[i/rows*c.qb:(i/rows+1)*c.qb]
		if twin := c.twin(row, qt); math.Float32bits(got) != math.Float32bits(twin) {
			t.Errorf("%s(cols=%d): token %d row %d = %v, twin %v", prefix, c.cols, i/rows, i%rows, got, twin)
		}
	}
}

// kgemmCall is the tileCall of k's tile GEMM over q and w.
func kgemmCall(k kgemmKind, nt, nb int, q, w []byte) tileCall {
	cols := nb * kBlockSize
	return tileCall{
		name: k.name, dotName: "one-row dot", nt: nt, cols: cols,
		rb: nb * k.blockBytes, qb: nb * Q8KBlockBytes, q: q, w: w,
		run:  func(dst []float32, ldd, r0, r1 int) { k.matMul(dst, ldd, q, nt, cols, w, r0, r1) },
		dot:  k.dot,
		twin: func(row, qt []byte) float32 { return k.twin(row, qt, nb) },
	}
}

// q8gemmCall is the tileCall of MatMulQ80Q80 over q and w.
func q8gemmCall(nt, nb int, q, w []byte) tileCall {
	return legacyTileCall("MatMulQ80Q80", "DotQ80Q80", qdQ80, MatMulQ80Q80, DotQ80Q80, nt, nb, q, w)
}

// legacyTileCall is the tileCall of mm, MatMulQ80Q80 or one of its
// widening kin for weights of type t, over q and w; dot is its one-row dot
// (named dotName), the twin dotQ8LegacyGeneric.
func legacyTileCall(name, dotName string, t qdotType, mm func(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int),
	dot func(w, q []byte) float32, nt, nb int, q, w []byte) tileCall {
	return tileCall{
		name: name, dotName: dotName, nt: nt, cols: nb * 32,
		rb: nb * qdotBlockBytes[t], qb: nb * Q80BlockBytes, q: q, w: w,
		run:  func(dst []float32, ldd, r0, r1 int) { mm(dst, ldd, q, nt, nb*32, w, r0, r1) },
		dot:  dot,
		twin: func(row, qt []byte) float32 { return dotQ8LegacyGeneric(t, row, qt, nb) },
	}
}
