package kvcache

import (
	"math"
)

// softmax replaces x with softmax(scale·x) in place. Sums run in float64.
func softmax(x []float32, scale float32) {
	m := float32(math.Inf(-1))
	for i := range x {
		x[i] *= scale
		if x[i] > m {
			m = x[i]
		}
	}
	var sum float64
	for i, v := range x {
		e := expNeg(v - m)
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// expNeg returns e^x for x ≤ 0 in float32, within 2 ulp of math.Exp: range
// reduction x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two parts for an
// exact product), a degree-6 polynomial for e^r, and 2^n built from the
// exponent bits. Results below the smallest normal float32 (x < −87.3)
// flush to 0; NaN gives NaN.
func expNeg(x float32) float32 {
	if x < -87.33654 {
		return 0
	}
	if x != x {
		return x
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	n := float32(int32(x*log2e - 0.5)) // round to nearest (x ≤ 0)
	r := x - n*ln2hi
	r -= n * ln2lo
	// Cephes expf polynomial.
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	y := p*r*r + r + 1
	e := int32(n) + 127
	if e <= 0 { // e^x is below the smallest normal float32: flush to 0
		return 0
	}
	return y * math.Float32frombits(uint32(e)<<23)
}
