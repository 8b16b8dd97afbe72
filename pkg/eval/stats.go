package eval

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
)

// Statistics for paired comparisons: every item is scored under the
// baseline cache and under a candidate cache, so differences are tested
// item by item.
//
//	McNemar (exact)   b = items the baseline passes and the candidate fails, c = the reverse;
//	                  under H0 each of the n = b+c discordant items goes either way with
//	                  probability 1/2, so with X ~ Binomial(n, 1/2)
//	                  p = min(1, 2·P[X ≤ min(b, c)]) = min(1, Σ_{i=0..min(b,c)} C(n, i) / 2^(n−1)),
//	                  and p = 1 when n = 0
//	bootstrap         d_i = cand_i − base_i; mean = (1/n)·Σ d_i; the interval is the
//	                  (1−level)/2 and (1+level)/2 percentiles (Percentile) of the means of
//	                  iters resamples of the d_i with replacement (percentile bootstrap)
//	StdErrRate        sqrt(p(1−p)/(n−1)), 0 for n ≤ 1 (lm-eval-harness's stderr of a rate)
//	MeanStdErr        mean = E[x], se = sqrt((E[x²] − E[x]²)/(n−1)), 0 for n ≤ 10
//	                  (llama-perplexity's uncertainty)
//	Percentile        linear interpolation between closest ranks: with h = q·(n−1),
//	                  x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]) (numpy's default, llama-perplexity's)

// mcnemarExactMax is the largest discordant count summed in exact integer
// arithmetic (tens of milliseconds at the limit); above it McNemarExact
// sums the binomial terms in floating point around a log-gamma anchor,
// whose rounding gives a relative error of about 1e-10 at the switch
// (measured against the exact sum), growing roughly like n·log n.
const mcnemarExactMax = 1 << 15

// McNemarExact is the two-sided exact McNemar test of b against c, the
// two discordant counts of a paired pass/fail comparison: the binomial
// test of b+c trials with p = 1/2, p = min(1, 2·P[X ≤ min(b, c)]), and 1
// when b+c = 0. Up to b+c = 32768 the tail is summed in exact integers and
// rounded once, so the result is the correctly rounded float64 of the
// exact p-value. It panics on a negative count (a programmer error).
func McNemarExact(b, c int) float64 {
	if b < 0 || c < 0 {
		panic(fmt.Sprintf("eval: McNemarExact(%d, %d): negative count", b, c))
	}
	n, k := b+c, min(b, c)
	if n == 0 || 2*k >= n {
		return 1 // P[X ≤ n/2] ≥ 1/2
	}
	if n <= mcnemarExactMax {
		return math.Min(1, binomialTailExact(n, k))
	}
	return math.Min(1, binomialTailFloat(n, k))
}

// binomialTailExact is 2·P[X ≤ k] for X ~ Binomial(n, 1/2): the integer
// Σ_{i≤k} C(n, i), built with C(n, i) = C(n, i−1)·(n−i+1)/i (exact
// division), over 2^(n−1).
func binomialTailExact(n, k int) float64 {
	term, sum := big.NewInt(1), big.NewInt(1)
	var num, den big.Int
	for i := 1; i <= k; i++ {
		term.Mul(term, num.SetInt64(int64(n-i+1)))
		term.Quo(term, den.SetInt64(int64(i)))
		sum.Add(sum, term)
	}
	f := new(big.Float).SetInt(sum) // exact: the precision is the bit length
	f.SetMantExp(f, -(n - 1))
	p, _ := f.Float64()
	return p
}

// binomialTailFloat is binomialTailExact in floating point: the terms
// C(n, i)/C(n, k) for i = k, k−1, … (each the last times i/(n−i+1)) are
// summed until they stop mattering, then scaled by C(n, k)/2^(n−1) from
// log-gamma.
func binomialTailFloat(n, k int) float64 {
	sum, r := 1.0, 1.0
	for i := k; i > 0; i-- {
		r *= float64(i) / float64(n-i+1)
		sum += r
		if r < 1e-17*sum {
			break
		}
	}
	lgN, _ := math.Lgamma(float64(n) + 1)
	lgK, _ := math.Lgamma(float64(k) + 1)
	lgNK, _ := math.Lgamma(float64(n-k) + 1)
	logC := lgN - lgK - lgNK
	return math.Exp(logC - float64(n-1)*math.Ln2 + math.Log(sum))
}

// Bootstrap defaults.
const (
	DefaultBootstrapIters = 1000
	DefaultBootstrapLevel = 0.95
)

// BootstrapPairedDiff is the mean of cand−base over paired items and its
// percentile-bootstrap confidence interval at level (e.g. 0.95): iters
// resamples of the n differences with replacement, the interval being the
// (1−level)/2 and (1+level)/2 percentiles of the resampled means. The
// resampling is a PCG stream seeded by seed, so the result is the same
// for the same inputs and seed (with one Go release's math/rand/v2).
// iters 0 means 1000 and level 0 means 0.95. With no items all three are
// NaN. It panics when the slices differ in length, iters is negative or
// level is outside [0, 1) (programmer errors).
func BootstrapPairedDiff(base, cand []float64, iters int, seed uint64, level float64) (mean, lo, hi float64) {
	if len(base) != len(cand) {
		panic(fmt.Sprintf("eval: BootstrapPairedDiff: %d baseline items, %d candidate items", len(base), len(cand)))
	}
	if iters < 0 || !(level >= 0 && level < 1) {
		panic(fmt.Sprintf("eval: BootstrapPairedDiff: iters %d, level %v", iters, level))
	}
	if iters == 0 {
		iters = DefaultBootstrapIters
	}
	if level == 0 {
		level = DefaultBootstrapLevel
	}
	n := len(base)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = cand[i] - base[i]
		mean += d[i]
	}
	mean /= float64(n)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	means := make([]float64, iters)
	for it := range means {
		var s float64
		for range n {
			s += d[rng.IntN(n)]
		}
		means[it] = s / float64(n)
	}
	slices.Sort(means)
	alpha := (1 - level) / 2
	return mean, Percentile(means, alpha), Percentile(means, 1-alpha)
}

// StdErrRate is the standard error of a rate p over n items as
// lm-eval-harness reports it, sqrt(p(1−p)/(n−1)); 0 when n ≤ 1.
func StdErrRate(p float64, n int) float64 {
	if n <= 1 {
		return 0
	}
	return math.Sqrt(p * (1 - p) / float64(n-1))
}

// MeanStdErr is the mean of x and its standard error as llama-perplexity
// computes it, sqrt((E[x²] − E[x]²)/(n−1)); the error is 0 when n ≤ 10
// (llama-perplexity reports no uncertainty for so few values), and both
// are 0 for no values. The variance is computed in two passes, as
// E[(x − E[x])²], which is the same quantity without the cancellation of
// subtracting E[x]² from E[x²].
func MeanStdErr(x []float64) (mean, se float64) {
	n := len(x)
	if n == 0 {
		return 0, 0
	}
	for _, v := range x {
		mean += v
	}
	mean /= float64(n)
	if n <= 10 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(n) / float64(n-1))
}

// Percentile is the q-quantile (q in [0, 1], not percent) of sorted
// values by linear interpolation between closest ranks, numpy's default
// method and llama-perplexity's: with h = q·(n−1), x[⌊h⌋] + (h−⌊h⌋)·
// (x[⌊h⌋+1] − x[⌊h⌋]). q ≤ 0 gives the minimum and q ≥ 1 the maximum;
// no values or a NaN q give NaN. sorted must be in increasing order.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0 || math.IsNaN(q):
		return math.NaN()
	case q <= 0:
		return sorted[0]
	case q >= 1:
		return sorted[n-1]
	}
	h := q * float64(n-1)
	i := int(h)
	if i >= n-1 {
		return sorted[n-1]
	}
	t := h - float64(i)
	a, b := sorted[i], sorted[i+1]
	// numpy's lerp: exact at both ends and monotone in t.
	if t < 0.5 {
		return a + (b-a)*t
	}
	return b - (b-a)*(1-t)
}
