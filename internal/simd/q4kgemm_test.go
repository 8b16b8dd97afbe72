package simd

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// q4kgemmCase returns nb-super-block q4_K weights of rows rows and nt
// Q8_K token rows (QuantizeQ8K), with extremes: super-blocks of codes 15
// with scales and mins 63 against activation codes ±127 and 127, codes 0,
// zero d or dmin, large d, an all-zero activation block, and random
// blocks elsewhere.
func q4kgemmCase(r *rand.Rand, nt, rows, nb int) (q, w []byte) {
	w = randKBlocks(r, rows*nb, q4KBlockBytes, 0, 2)
	for i := 0; i < rows*nb; i++ {
		blk := w[i*q4KBlockBytes : (i+1)*q4KBlockBytes]
		switch i % 7 {
		case 1: // codes 15, scales and mins 63
			for j := 4; j < q4KBlockBytes; j++ {
				blk[j] = 0xff
			}
		case 2: // codes 0
			for j := 16; j < q4KBlockBytes; j++ {
				blk[j] = 0
			}
		case 3: // zero d
			binary.LittleEndian.PutUint16(blk, 0)
		case 4: // zero dmin
			binary.LittleEndian.PutUint16(blk[2:], 0)
		case 5: // large d and dmin
			binary.LittleEndian.PutUint16(blk, F32ToF16Scalar(30000))
			binary.LittleEndian.PutUint16(blk[2:], F32ToF16Scalar(-20000))
		}
	}
	x := randF32(r, nt*nb*kBlockSize)
	for b := 0; b < nt*nb; b++ {
		xb := x[kBlockSize*b : kBlockSize*(b+1)]
		switch b % 5 {
		case 1: // codes ±127
			for j := range xb {
				xb[j] = float32(1 - 2*(j&1))
			}
		case 2: // codes 127
			for j := range xb {
				xb[j] = 3
			}
		case 3: // codes −127
			for j := range xb {
				xb[j] = -0.5
			}
		case 4: // a zero block
			clear(xb)
		}
	}
	q = make([]byte, nt*nb*Q8KBlockBytes)
	QuantizeQ8K(q, x)
	return q, w
}

// TestMatMulQ4KQ8K checks MatMulQ4KQ8K against DotQ4KQ8K and its Go twin
// pair by pair, bit for bit, on every kernel set (and the avx512 set
// without VNNI), for token counts around the tiles of four, row ranges
// with odd ends around the panels of 16, and ldd past r1; and that no
// other dst entry is written.
func TestMatMulQ4KQ8K(t *testing.T) {
	// cols 8192: panels of 79872 bytes, six a chunk, so that 101 rows
	// take two chunks and a rest of 5.
	t.Run("chunks", func(t *testing.T) {
		forEachQ8KSet(t, func(t *testing.T) {
			r := newRand(t)
			const nt, rows, nb = 5, 101, 32
			q, w := q4kgemmCase(r, nt, rows, nb)
			dst := make([]float32, nt*rows)
			MatMulQ4KQ8K(dst, rows, q, nt, nb*kBlockSize, w, 0, rows)
			rb, qb := nb*q4KBlockBytes, nb*Q8KBlockBytes
			for i, got := range dst {
				row, qt := w[i%rows*rb:(i%rows+1)*rb], q[i/rows*qb:(i/rows+1)*qb]
				if twin := dotQ4KQ8KGeneric(row, qt, nb); math.Float32bits(got) != math.Float32bits(twin) {
					t.Errorf("MatMulQ4KQ8K(cols=8192): token %d row %d = %v, twin %v", i/rows, i%rows, got, twin)
				}
			}
		})
	})
	const rows = 53
	forEachQ8KSet(t, func(t *testing.T) {
		r := newRand(t)
		for _, cols := range []int{256, 512, 2048} {
			nb := cols / kBlockSize
			rb, qb := nb*q4KBlockBytes, nb*Q8KBlockBytes
			for ni, nt := range []int{1, 2, 3, 4, 5, 7, 8, 13, 33} {
				q, w := q4kgemmCase(r, nt, rows, nb)
				off := ni % len(offsets)
				q, w = offsetCopy(q, offsets[off]), offsetCopy(w, offsets[(off+2)%len(offsets)])
				for _, rr := range [][2]int{{0, rows}, {3, 37}, {1, 17}, {16, 32}, {5, 6}, {7, 52}} {
					r0, r1 := rr[0], rr[1]
					ldd := rows + 3
					dst, check := guardedF32(off, (nt-1)*ldd+r1, 16)
					for i := range dst {
						dst[i] = sentinel
					}
					MatMulQ4KQ8K(dst, ldd, q, nt, cols, w, r0, r1)
					check(t)
					shape := fmt.Sprintf("MatMulQ4KQ8K(nt=%d, cols=%d, [%d,%d))", nt, cols, r0, r1)
					for ti := 0; ti < nt; ti++ {
						qt := q[ti*qb : (ti+1)*qb]
						for i := 0; i < ldd && ti*ldd+i < len(dst); i++ {
							got := dst[ti*ldd+i]
							if i < r0 || i >= r1 {
								if math.Float32bits(got) != math.Float32bits(sentinel) {
									t.Fatalf("%s wrote dst[%d*ldd+%d] = %v outside its rows", shape, ti, i, got)
								}
								continue
							}
							row := w[i*rb : (i+1)*rb]
							one, twin := DotQ4KQ8K(row, qt), dotQ4KQ8KGeneric(row, qt, nb)
							if math.Float32bits(got) != math.Float32bits(one) || math.Float32bits(got) != math.Float32bits(twin) {
								t.Fatalf("%s: token %d row %d = %v (%#x), DotQ4KQ8K %v (%#x), twin %v", shape, ti, i, got, math.Float32bits(got), one, math.Float32bits(one), twin)
							}
						}
					}
				}
			}
		}
	})
}

// TestMatMulQ4KQ8KPanics checks that bad shapes panic with the function's
// name.
func TestMatMulQ4KQ8KPanics(t *testing.T) {
	rb, qb := 2*q4KBlockBytes, 2*Q8KBlockBytes
	for name, bad := range map[string]func(){
		"cols not blocks": func() { MatMulQ4KQ8K(make([]float32, 8), 4, make([]byte, qb), 1, 384, make([]byte, 4*rb), 0, 4) },
		"short q":         func() { MatMulQ4KQ8K(make([]float32, 8), 4, make([]byte, 2*qb-1), 2, 512, make([]byte, 4*rb), 0, 4) },
		"short w":         func() { MatMulQ4KQ8K(make([]float32, 8), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb-1), 0, 4) },
		"short dst":       func() { MatMulQ4KQ8K(make([]float32, 7), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 0, 4) },
		"ldd < r1":        func() { MatMulQ4KQ8K(make([]float32, 8), 3, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 0, 4) },
		"bad rows":        func() { MatMulQ4KQ8K(make([]float32, 8), 4, make([]byte, 2*qb), 2, 512, make([]byte, 4*rb), 3, 2) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "MatMulQ4KQ8K") {
					t.Errorf("%s: panic %q, want one naming MatMulQ4KQ8K", name, msg)
				}
			}()
			bad()
		}()
	}
}
