package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKeyRoPE checks KeyRoPE.Rows against the rotation computed in float64
// with each position's own angles, for runs that start anywhere (inside a
// table span, across spans, past the table's last position), in both
// layouts, with partial rotary dimensions: a wrong span offset, base row or
// layout moves values by far more than the tolerance.
func TestKeyRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ dim, half int }{{128, 64}, {64, 32}, {64, 16}, {8, 4}, {256, 128}, {48, 20}} {
		for _, neox := range []bool{true, false} {
			inv := make([]float64, tc.half)
			for i := range inv {
				inv[i] = math.Pow(10000, -float64(2*i)/float64(2*tc.half))
			}
			const maxPos = 300
			k := NewKeyRoPE(tc.dim, inv, neox, maxPos)
			for _, run := range []struct{ pos0, n int }{{0, 1}, {0, 64}, {5, 200}, {63, 2}, {250, 100}, {400, 3}} {
				name := fmt.Sprintf("dim=%d half=%d neox=%v pos0=%d n=%d", tc.dim, tc.half, neox, run.pos0, run.n)
				rows := make([]float32, run.n*tc.dim)
				for i := range rows {
					rows[i] = float32(r.NormFloat64())
				}
				want := make([]float64, len(rows))
				for j := 0; j < run.n; j++ {
					x := rows[j*tc.dim : (j+1)*tc.dim]
					w := want[j*tc.dim : (j+1)*tc.dim]
					for i := range x {
						w[i] = float64(x[i])
					}
					for i, f := range inv {
						s, c := math.Sincos(float64(run.pos0+j) * f)
						ia, ib := 2*i, 2*i+1
						if neox {
							ia, ib = i, i+tc.half
						}
						a, b := float64(x[ia]), float64(x[ib])
						w[ia], w[ib] = a*c-b*s, a*s+b*c
					}
				}
				k.Rows(rows, run.pos0)
				for i, v := range rows {
					if d := math.Abs(float64(v) - want[i]); d > 2e-6*(1+math.Abs(want[i])) {
						t.Fatalf("%s: value %d (row %d) = %v, want %v", name, i, i/tc.dim, v, want[i])
					}
				}
			}
		}
	}
}
