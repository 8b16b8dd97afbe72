package simd

import (
	"math"
	"testing"
)

// TestDotKQ8KRows compares DotQ4KQ8KRows and DotQ6KQ8KRows row by row
// with the one-row twins on every kernel set, bit for bit, over 0..9 rows (whole groups of
// four and the rest) of 0..9 super-blocks at misaligned offsets, with
// extreme activation codes and random scales (randKBlocks), and checks
// that it writes exactly dst.
func TestDotKQ8KRows(t *testing.T) {
	tests := []struct {
		name       string
		blockBytes int
		scaleAt    []int
		rows       func(dst []float32, w, q []byte)
		twin       func(w, q []byte, nb int) float32
	}{
		{"DotQ4KQ8KRows", q4KBlockBytes, []int{0, 2}, DotQ4KQ8KRows, dotQ4KQ8KGeneric},
		{"DotQ6KQ8KRows", q6KBlockBytes, []int{208}, DotQ6KQ8KRows, dotQ6KQ8KGeneric},
	}
	forEachQ8KSet(t, func(t *testing.T) {
		for _, tt := range tests {
			r := newRand(t)
			for nb := 0; nb <= 9; nb++ {
				for rows := 0; rows <= 9; rows++ {
					off := (nb + rows) % len(offsets)
					w := offsetCopy(randKBlocks(r, rows*nb, tt.blockBytes, tt.scaleAt...), offsets[off])
					x := randF32(r, nb*kBlockSize)
					if nb > 1 {
						for i := 0; i < kBlockSize; i++ {
							x[kBlockSize+i] = float32(1 - 2*(i&1))
						}
					}
					q := make([]byte, nb*Q8KBlockBytes)
					QuantizeQ8K(q, x)
					q = offsetCopy(q, offsets[off]+1)
					dst := guardedRows(t, tt.name, nb, rows, tt.rows, w, q)
					rb := nb * tt.blockBytes
					for i, got := range dst {
						want := tt.twin(w[i*rb:(i+1)*rb], q, nb)
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Errorf("%s(nb=%d rows=%d): row %d = %v, twin %v", tt.name, nb, rows, i, got, want)
						}
					}
				}
			}
		}
	})
	for _, bad := range []func(){
		func() { DotQ4KQ8KRows(make([]float32, 2), make([]byte, 144), make([]byte, Q8KBlockBytes)) },
		func() { DotQ4KQ8KRows(make([]float32, 1), make([]byte, 144), make([]byte, Q8KBlockBytes+1)) },
		func() { DotQ6KQ8KRows(make([]float32, 1), make([]byte, 211), make([]byte, Q8KBlockBytes)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a bad length did not panic")
				}
			}()
			bad()
		}()
	}
}

// guardedRows returns rowsDot's rows values for weights w and codes q,
// written into a dst between two sentinels, and reports (as name, with nb
// blocks a row) a write outside it.
func guardedRows(t *testing.T, name string, nb, rows int, rowsDot func(dst []float32, w, q []byte), w, q []byte) []float32 {
	t.Helper()
	buf := make([]float32, rows+2)
	buf[0], buf[rows+1] = 7, 7
	dst := buf[1 : rows+1]
	rowsDot(dst, w, q)
	if buf[0] != 7 || buf[rows+1] != 7 {
		t.Errorf("%s(nb=%d rows=%d) wrote outside dst", name, nb, rows)
	}
	return dst
}
