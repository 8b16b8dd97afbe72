//go:build amd64 && gc && !purego

package simd

import (
	"slices"
	"testing"
)

// TestQ8GActs compares q8gemmActsAVX2 with its twin q8gActs on blocks of
// random bytes (every scale and code, −128 included) and on codes all
// −128, all 127 and all 0.
func TestQ8GActs(t *testing.T) {
	r := newRand(t)
	const n = 300
	q := make([]byte, n*Q80BlockBytes)
	for i := range q {
		q[i] = byte(r.IntN(256))
	}
	for b, v := range []byte{0x80, 0x7f, 0} {
		for j := 2; j < Q80BlockBytes; j++ {
			q[b*Q80BlockBytes+j] = v
		}
	}
	for _, k := range []int{0, 1, 5, n} {
		got, want := make([]int32, 2*n+2), make([]int32, 2*n+2)
		q8gemmActsAVX2(got, offsetCopy(q[:k*Q80BlockBytes], 3), k)
		q8gActs(want, q, k, 1)
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("q8gemmActsAVX2(%d blocks): ac[%d] = %#x, twin %#x", k, i, got[i], want[i])
				}
			}
		}
	}
}
