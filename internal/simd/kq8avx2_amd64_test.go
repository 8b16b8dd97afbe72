//go:build amd64 && gc && !purego

package simd

import "testing"

// TestMatMulKQ8KAVX2Chunks checks MatMulQ4KQ8K, MatMulQ5KQ8K and
// MatMulQ6KQ8K against their Go twins bit for bit, on every kernel set,
// with enough token rows for the AVX2 tiles (q4kaMinTokens …) and 8192
// columns, so that 101 rows take several chunks of AVX2 panels and a rest
// of 5 (q4_K: 11 panels a chunk, q5_K 6, q6_K 5).
func TestMatMulKQ8KAVX2Chunks(t *testing.T) {
	const nt, rows, nb = 23, 101, 32
	if nt < max(q4kaMinTokens, q5kaMinTokens, q6kaMinTokens) {
		t.Fatalf("nt %d is below the AVX2 tiles' thresholds", nt)
	}
	for _, k := range kgemmKinds {
		t.Run(k.name, func(t *testing.T) {
			forEachQ8KSet(t, func(t *testing.T) {
				r := newRand(t)
				q, w := kgemmCase(r, k, nt, rows, nb)
				checkTileTwin(t, kgemmCall(k, nt, nb, q, w), rows, k.name)
			})
		})
	}
}

// TestKaCodesAVX2 checks q5kaCodesAVX2 and q6kaCodesAVX2 against their Go
// twins byte for byte on random super-blocks (every byte of the 34-byte
// groups' code bytes; the 2 bytes before each group are left alone).
func TestKaCodesAVX2(t *testing.T) {
	if !useAsm {
		t.Skip("no AVX2")
	}
	r := newRand(t)
	for _, k := range []struct {
		name      string
		bb        int
		asm, twin func(row, blk []byte)
	}{
		{"q5_K", q5KBlockBytes, q5kaCodesAVX2, q5kaCodesGeneric},
		{"q6_K", q6KBlockBytes, q6kaCodesAVX2, q6kaCodesGeneric},
	} {
		for i := 0; i < 50; i++ {
			blk := make([]byte, k.bb)
			for j := range blk {
				blk[j] = byte(r.IntN(256))
			}
			got, want := make([]byte, kaRowBytes), make([]byte, kaRowBytes)
			for j := range got {
				got[j], want[j] = 0xa5, 0xa5
			}
			k.asm(got, blk)
			k.twin(want, blk)
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("%s block %d: byte %d = %#x, twin %#x", k.name, i, j, got[j], want[j])
				}
			}
		}
	}
}
