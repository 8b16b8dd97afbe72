package simd

import (
	"math"
	"testing"
)

// TestDotQ80Rows compares DotQ40Q80Rows, DotQ50Q80Rows, DotIQ4NLQ80Rows and
// DotQ80Q80Rows row by row with the one-row dots and with their Go twin on
// every kernel set (and the avx512 set without VNNI, which takes the AVX2
// four-row kernels), bit for bit, over 0..9 rows (whole groups of four and
// the rest) of 0..9 blocks (groups of four blocks and the rest) at
// misaligned offsets, with random and ±127 activation codes and codes 127
// against Q8_0 values −128, Q4_0 codes 15 and Q5_0 codes 31 (the largest
// VPMADDUBSW pairs), and checks that it writes exactly dst. Under the Zen 5
// choice DotQ80Q80Rows reads a row of each of four runs a call
// (q80Runs): 4 to 9 rows take one or two rows a run and the rest alone.
func TestDotQ80Rows(t *testing.T) {
	tests := []struct {
		name string
		t    qdotType
		rows func(dst []float32, w, q []byte)
		one  func(w, q []byte) float32
	}{
		{"DotQ40Q80Rows", qdQ40, DotQ40Q80Rows, DotQ40Q80},
		{"DotQ50Q80Rows", qdQ50, DotQ50Q80Rows, DotQ50Q80},
		{"DotIQ4NLQ80Rows", qdIQ4NL, DotIQ4NLQ80Rows, DotIQ4NLQ80},
		{"DotQ80Q80Rows", qdQ80, DotQ80Q80Rows, DotQ80Q80},
	}
	for _, set := range q8lSets(t) {
		t.Run(set.name, func(t *testing.T) {
			defer set.force()()
			for _, tt := range tests {
				r := newRand(t)
				bb := qdotBlockBytes[tt.t]
				for nb := 0; nb <= 9; nb++ {
					for rows := 0; rows <= 9; rows++ {
						off := (nb + rows) % len(offsets)
						w := offsetCopy(randKBlocks(r, rows*nb, bb, 0), offsets[off])
						x := randF32(r, nb*32)
						if nb > 1 {
							for i := 0; i < 32; i++ {
								x[32+i] = float32(1 - 2*(i&1))
							}
						}
						if nb > 2 { // the extremes: codes 127 against −128 (Q8_0) or 15 (Q4_0)
							for i := 64; i < 96; i++ {
								x[i] = 1
							}
							for i := 0; i < rows; i++ {
								blk := w[(i*nb+2)*bb : (i*nb+3)*bb]
								switch tt.t {
								case qdQ80:
									for j := 2; j < bb; j++ {
										blk[j] = 0x80
									}
								case qdQ40, qdQ50:
									for j := 2; j < bb; j++ {
										blk[j] = 0xff
									}
								}
							}
						}
						q := make([]byte, nb*Q80BlockBytes)
						QuantizeQ80(q, x)
						q = offsetCopy(q, offsets[off]+1)
						dst := guardedRows(t, tt.name, nb, rows, tt.rows, w, q)
						rb := nb * bb
						for i, got := range dst {
							row := w[i*rb : (i+1)*rb]
							one, twin := tt.one(row, q), dotQ8LegacyGeneric(tt.t, row, q, nb)
							if math.Float32bits(got) != math.Float32bits(one) || math.Float32bits(got) != math.Float32bits(twin) {
								t.Errorf("%s(nb=%d rows=%d): row %d = %v, one-row dot %v, twin %v", tt.name, nb, rows, i, got, one, twin)
							}
						}
					}
				}
			}
		})
	}
	for _, bad := range []func(){
		func() { DotQ40Q80Rows(make([]float32, 2), make([]byte, 18), make([]byte, Q80BlockBytes)) },
		func() { DotQ40Q80Rows(make([]float32, 1), make([]byte, 18), make([]byte, Q80BlockBytes+1)) },
		func() { DotQ50Q80Rows(make([]float32, 1), make([]byte, 23), make([]byte, Q80BlockBytes)) },
		func() { DotIQ4NLQ80Rows(make([]float32, 1), make([]byte, 17), make([]byte, Q80BlockBytes)) },
		func() { DotQ80Q80Rows(make([]float32, 1), make([]byte, 35), make([]byte, Q80BlockBytes)) },
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
