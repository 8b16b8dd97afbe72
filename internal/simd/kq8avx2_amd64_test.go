//go:build amd64 && gc && !purego

package simd

import (
	"math"
	"testing"
)

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
				dst := make([]float32, nt*rows)
				k.matMul(dst, rows, q, nt, nb*kBlockSize, w, 0, rows)
				rb, qb := nb*k.blockBytes, nb*Q8KBlockBytes
				for i, got := range dst {
					row, qt := w[i%rows*rb:(i%rows+1)*rb], q[i/rows*qb:(i/rows+1)*qb]
					if twin := k.twin(row, qt, nb); math.Float32bits(got) != math.Float32bits(twin) {
						t.Fatalf("%s(cols=8192): token %d row %d = %v, twin %v", k.name, i/rows, i%rows, got, twin)
					}
				}
			})
		})
	}
}
