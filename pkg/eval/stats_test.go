package eval

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestMcNemarExact(t *testing.T) {
	tests := []struct {
		name string
		b, c int
		want float64
	}{
		{"no discordant pairs", 0, 0, 1},
		{"one pair", 0, 1, 1},
		{"b equals c", 7, 7, 1},
		{"b equals c, large", 5000, 5000, 1},
		{"0 vs 5", 0, 5, 0.0625},               // 2·(1/32)
		{"5 vs 0", 5, 0, 0.0625},               // symmetric
		{"1 vs 9", 1, 9, 0.021484375},          // 2·(1+10)/1024
		{"2 vs 7", 2, 7, 0.1796875},            // 2·(1+9+36)/512
		{"0 vs 10", 0, 10, 0.001953125},        // 2/1024
		{"3 vs 4", 3, 4, 1},                    // 2·P[X≤3] = 1 for n = 7
		{"4 vs 6", 4, 6, 0.75390625},           // 2·(1+10+45+120+210)/1024 = 772/1024
		{"tiny", 0, 1000, math.Ldexp(1, -999)}, // 2/2^1000, exactly
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := McNemarExact(tt.b, tt.c); got != tt.want {
				t.Errorf("McNemarExact(%d, %d) = %v, want %v", tt.b, tt.c, got, tt.want)
			}
		})
	}
}

// binomialOracle is 2·Σ_{i≤k} C(n, i)/2^n from math/big's Binomial, an
// independent route to the exact value.
func binomialOracle(n, k int) float64 {
	sum := new(big.Int)
	for i := 0; i <= k; i++ {
		sum.Add(sum, new(big.Int).Binomial(int64(n), int64(i)))
	}
	r := new(big.Rat).SetFrac(sum, new(big.Int).Lsh(big.NewInt(1), uint(n-1)))
	f, _ := r.Float64()
	return math.Min(1, f)
}

func TestMcNemarExactOracle(t *testing.T) {
	for _, tt := range []struct{ b, c int }{{3, 17}, {40, 60}, {90, 110}, {1, 199}, {120, 140}} {
		t.Run(fmt.Sprintf("%d,%d", tt.b, tt.c), func(t *testing.T) {
			got, want := McNemarExact(tt.b, tt.c), binomialOracle(tt.b+tt.c, min(tt.b, tt.c))
			if got != want {
				t.Errorf("McNemarExact(%d, %d) = %v, want %v", tt.b, tt.c, got, want)
			}
		})
	}
}

// normalMcNemar is the continuity-corrected normal approximation of the
// exact test: 2·Φ((k + 1/2 − n/2)/(√n/2)).
func normalMcNemar(b, c int) float64 {
	n, k := float64(b+c), float64(min(b, c))
	z := (k + 0.5 - n/2) / (math.Sqrt(n) / 2)
	return math.Min(1, math.Erfc(-z/math.Sqrt2))
}

func TestMcNemarExactLarge(t *testing.T) {
	tests := []struct {
		name string
		b, c int
		tol  float64 // relative
	}{
		{"exact path 8200", 4000, 4200, 0.01},
		{"exact path 10000", 4900, 5100, 0.01},
		{"exact path 20000", 9800, 10200, 0.01},
		{"float path 40000", 19700, 20300, 0.01},
		{"float path 200000", 99500, 100500, 0.01},
		{"float path 10^7", 4_998_000, 5_002_000, 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := McNemarExact(tt.b, tt.c), normalMcNemar(tt.b, tt.c)
			if math.Abs(got-want) > tt.tol*want {
				t.Errorf("McNemarExact(%d, %d) = %v, want %v (normal approximation, ±%v relative)", tt.b, tt.c, got, want, tt.tol)
			}
		})
	}
}

// The floating-point tail agrees with the exact one where both apply.
func TestBinomialTailFloat(t *testing.T) {
	for _, tt := range []struct{ n, k int }{{1000, 430}, {10000, 4900}, {2000, 900}, {32768, 16000}, {32768, 16383}} {
		t.Run(fmt.Sprintf("%d,%d", tt.n, tt.k), func(t *testing.T) {
			exact, float := binomialTailExact(tt.n, tt.k), binomialTailFloat(tt.n, tt.k)
			if math.Abs(float-exact) > 1e-8*exact {
				t.Errorf("binomialTailFloat(%d, %d) = %v, want %v (binomialTailExact)", tt.n, tt.k, float, exact)
			}
		})
	}
}

func TestMcNemarExactNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("McNemarExact(-1, 3) did not panic")
		}
	}()
	McNemarExact(-1, 3)
}

func TestBootstrapPairedDiff(t *testing.T) {
	base := []float64{1, 0, 1, 1, 0, 0, 1, 0, 1, 1}
	cand := []float64{1, 0, 0, 1, 0, 1, 0, 0, 0, 1}
	m1, lo1, hi1 := BootstrapPairedDiff(base, cand, 2000, 7, 0.9)
	m2, lo2, hi2 := BootstrapPairedDiff(base, cand, 2000, 7, 0.9)
	t.Run("deterministic", func(t *testing.T) {
		if m1 != m2 || lo1 != lo2 || hi1 != hi2 {
			t.Errorf("BootstrapPairedDiff(seed 7) = %v %v %v, then %v %v %v, want equal", m1, lo1, hi1, m2, lo2, hi2)
		}
	})
	t.Run("mean", func(t *testing.T) {
		if m1 != -0.2 {
			t.Errorf("BootstrapPairedDiff mean = %v, want -0.2", m1)
		}
		if !(lo1 <= m1 && m1 <= hi1 && lo1 < hi1) {
			t.Errorf("BootstrapPairedDiff = %v [%v, %v], want lo < hi around the mean", m1, lo1, hi1)
		}
	})
	t.Run("seed matters", func(t *testing.T) {
		// Continuous scores (0/1 ones give the same few interval ends).
		b := []float64{0.1, 0.7, 0.3, 0.9, 0.5, 0.2, 0.8, 0.4}
		c := []float64{0.2, 0.5, 0.6, 0.9, 0.1, 0.3, 0.7, 0.8}
		_, lo7, hi7 := BootstrapPairedDiff(b, c, 500, 7, 0.9)
		_, lo8, hi8 := BootstrapPairedDiff(b, c, 500, 8, 0.9)
		if lo7 == lo8 && hi7 == hi8 {
			t.Errorf("BootstrapPairedDiff: seeds 7 and 8 give the same interval [%v, %v]", lo7, hi7)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		m, lo, hi := BootstrapPairedDiff(base, cand, 0, 7, 0)
		md, lod, hid := BootstrapPairedDiff(base, cand, DefaultBootstrapIters, 7, DefaultBootstrapLevel)
		if m != md || lo != lod || hi != hid {
			t.Errorf("BootstrapPairedDiff(iters 0, level 0) = %v %v %v, want %v %v %v", m, lo, hi, md, lod, hid)
		}
	})
	t.Run("constant difference", func(t *testing.T) {
		m, lo, hi := BootstrapPairedDiff([]float64{0, 1, 2}, []float64{0.25, 1.25, 2.25}, 100, 1, 0.95)
		if m != 0.25 || lo != 0.25 || hi != 0.25 {
			t.Errorf("BootstrapPairedDiff(constant 0.25) = %v [%v, %v], want 0.25 [0.25, 0.25]", m, lo, hi)
		}
	})
	t.Run("empty", func(t *testing.T) {
		m, lo, hi := BootstrapPairedDiff(nil, nil, 10, 1, 0.95)
		if !math.IsNaN(m) || !math.IsNaN(lo) || !math.IsNaN(hi) {
			t.Errorf("BootstrapPairedDiff(nil, nil) = %v %v %v, want NaN NaN NaN", m, lo, hi)
		}
	})
}

// The 95% interval covers the true mean difference in about 95% of
// simulated experiments (percentile intervals run a little narrow at
// n = 60).
func TestBootstrapPairedDiffCoverage(t *testing.T) {
	const (
		experiments = 200
		n           = 60
		trueDiff    = 0.3
	)
	rng := rand.New(rand.NewPCG(1, 2))
	covered := 0
	for e := range experiments {
		base := make([]float64, n)
		cand := make([]float64, n)
		for i := range base {
			base[i] = rng.NormFloat64()
			cand[i] = base[i] + trueDiff + 0.5*rng.NormFloat64()
		}
		_, lo, hi := BootstrapPairedDiff(base, cand, 500, uint64(e), 0.95)
		if lo <= trueDiff && trueDiff <= hi {
			covered++
		}
	}
	if rate := float64(covered) / experiments; rate < 0.88 || rate > 0.99 {
		t.Errorf("BootstrapPairedDiff coverage = %v over %d experiments, want about 0.95", rate, experiments)
	}
}

func TestBootstrapPairedDiffPanics(t *testing.T) {
	tests := []struct {
		name       string
		base, cand []float64
		iters      int
		level      float64
	}{
		{"lengths differ", []float64{1}, []float64{1, 2}, 10, 0.95},
		{"negative iters", []float64{1}, []float64{1}, -1, 0.95},
		{"level 1", []float64{1}, []float64{1}, 10, 1},
		{"level in percent", []float64{1}, []float64{1}, 10, 95},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("BootstrapPairedDiff(%v, %v, %d, 1, %v) did not panic", tt.base, tt.cand, tt.iters, tt.level)
				}
			}()
			BootstrapPairedDiff(tt.base, tt.cand, tt.iters, 1, tt.level)
		})
	}
}

func TestStdErrRate(t *testing.T) {
	tests := []struct {
		name string
		p    float64
		n    int
		want float64
	}{
		{"half of 101", 0.5, 101, 0.05},
		{"zero rate", 0, 50, 0},
		{"one item", 0.5, 1, 0},
		{"no items", 0.5, 0, 0},
		{"0.9 of 10", 0.9, 10, math.Sqrt(0.09 / 9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StdErrRate(tt.p, tt.n); math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("StdErrRate(%v, %d) = %v, want %v", tt.p, tt.n, got, tt.want)
			}
		})
	}
}

func TestMeanStdErr(t *testing.T) {
	seq := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i)
		}
		return x
	}
	tests := []struct {
		name     string
		x        []float64
		mean, se float64
	}{
		{"empty", nil, 0, 0},
		{"ten values: no error", seq(10), 4.5, 0},
		{"eleven values", seq(11), 5, 1}, // E[x²]−E[x]² = 10, /(n−1) = 1
		{"constant", []float64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 2, 0},
		// Large offset: the one-pass formula would lose the variance.
		{"offset", func() []float64 {
			x := seq(11)
			for i := range x {
				x[i] += 1e9
			}
			return x
		}(), 1e9 + 5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, se := MeanStdErr(tt.x)
			if math.Abs(mean-tt.mean) > 1e-12*math.Max(1, math.Abs(tt.mean)) || math.Abs(se-tt.se) > 1e-9 {
				t.Errorf("MeanStdErr(%v) = %v, %v, want %v, %v", tt.x, mean, se, tt.mean, tt.se)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	tests := []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{"median of four", x, 0.5, 2.5},
		{"quartile", x, 0.25, 1.75},
		{"p90 (numpy 3.7)", x, 0.9, 3.7},
		{"min", x, 0, 1},
		{"max", x, 1, 4},
		{"below 0 clamps", x, -1, 1},
		{"above 1 clamps", x, 2, 4},
		{"one value", []float64{7}, 0.3, 7},
		{"p99 of 0..100", func() []float64 {
			v := make([]float64, 101)
			for i := range v {
				v[i] = float64(i)
			}
			return v
		}(), 0.99, 99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.q); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.q, got, tt.want)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if got := Percentile(nil, 0.5); !math.IsNaN(got) {
			t.Errorf("Percentile(nil, 0.5) = %v, want NaN", got)
		}
	})
	t.Run("NaN q", func(t *testing.T) {
		if got := Percentile(x, math.NaN()); !math.IsNaN(got) {
			t.Errorf("Percentile(%v, NaN) = %v, want NaN", x, got)
		}
	})
}

func ExampleMcNemarExact() {
	// 10 items flipped between caches: 1 fixed by the candidate, 9 broken.
	fmt.Println(McNemarExact(1, 9))
	// Output: 0.021484375
}
