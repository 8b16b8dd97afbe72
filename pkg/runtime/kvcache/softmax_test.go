package kvcache

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	check := func(x float32) {
		got := expNeg(x)
		want := math.Exp(float64(x))
		if want < 0x1p-125 { // near or below float32's smallest normal: flushed
			if got < 0 || float64(got) > 2*want+1e-45 {
				t.Fatalf("expNeg(%v) = %v, want %v", x, got, want)
			}
			return
		}
		if rel := math.Abs(float64(got)-want) / want; rel > 2.5e-7 {
			t.Fatalf("expNeg(%v) = %v, want %v (relative error %.3g)", x, got, want, rel)
		}
	}
	for _, x := range []float32{0, -0, -1e-30, -0.5, -0.6931472, -1, -10, -50, -87, -87.3, -100, float32(math.Inf(-1))} {
		check(x)
	}
	for i := 0; i < 1_000_000; i++ {
		check(-float32(rng.Float64() * 90))
	}
	if v := expNeg(float32(math.NaN())); v == v {
		t.Errorf("expNeg(NaN) = %v", v)
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
