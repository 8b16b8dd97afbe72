package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGammaMoments(t *testing.T) {
	// Gamma(k, 1) has mean k and variance k.
	const n = 50000
	for _, k := range []float64{0.3, 1, 2.5, 9} {
		rng := rand.New(rand.NewPCG(1, 2))
		s, s2 := 0.0, 0.0
		for range n {
			x := gamma(rng, k)
			if !(x >= 0) {
				t.Fatalf("gamma(%v) = %v", k, x)
			}
			s += x
			s2 += x * x
		}
		mean := s / n
		v := s2/n - mean*mean
		if math.Abs(mean-k) > 0.03*k {
			t.Errorf("gamma(%v): mean %.4f, want %v ± 3%%", k, mean, k)
		}
		if math.Abs(v-k) > 0.06*k {
			t.Errorf("gamma(%v): variance %.4f, want %v ± 6%%", k, v, k)
		}
	}
}
