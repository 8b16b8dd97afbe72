package kvcache

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 2, 7, 16, 33, 1000} {
		for _, scale := range []float32{0.088, 1, -0.5} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 20)
			}
			want := make([]float64, n)
			m := math.Inf(-1)
			for i, v := range x {
				want[i] = float64(v) * float64(scale)
				m = math.Max(m, want[i])
			}
			var sum float64
			for i := range want {
				want[i] = math.Exp(want[i] - m)
				sum += want[i]
			}
			softmax(x, scale)
			var total float64
			for i, v := range x {
				total += float64(v)
				if d := math.Abs(float64(v) - want[i]/sum); d > 1e-6 {
					t.Fatalf("n=%d scale=%v: softmax[%d] = %v, want %v", n, scale, i, v, want[i]/sum)
				}
			}
			if math.Abs(total-1) > 1e-5 {
				t.Errorf("n=%d scale=%v: probabilities sum to %v", n, scale, total)
			}
		}
	}
}

func BenchmarkSoftmax(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i % 97)
	}
	y := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for i := 0; i < b.N; i++ {
		copy(y, x)
		softmax(y, 0.1)
	}
}
