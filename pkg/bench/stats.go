package bench

import (
	"math"
	"slices"
)

// percentile is numpy's default np.percentile (method "linear") of sorted
// at p percent: with h = (p/100)·(n−1), x[⌊h⌋] + (h−⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]).
// It is 0 for no values (vLLM's np.percentile(xs or 0, p)); p is clamped
// to [0, 100].
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := max(0, min(100, p)) / 100 * float64(n-1)
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

// mean is the arithmetic mean, 0 for no values.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// stdPop is the population standard deviation (numpy's np.std, ddof 0),
// 0 for no values.
func stdPop(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m, s := mean(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

// stdSample is the sample standard deviation (n−1 in the denominator, as
// llama-bench reports), 0 for fewer than two values.
func stdSample(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m, s := mean(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)-1))
}

// sortedCopy returns xs sorted, leaving xs alone.
func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}
