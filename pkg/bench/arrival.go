package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Schedule returns the arrival offsets of n requests from the start of a
// run, as vLLM bench serve's get_request computes them:
//
//   - rate 0 or +Inf: every request at 0 (vLLM's --request-rate inf);
//   - burstiness +Inf: equal gaps of 1/rate (a constant rate), the i-th
//     request (from 0) at (i+1)/rate;
//   - otherwise gaps drawn from Gamma(shape k = burstiness, scale
//     1/(rate·k)) — mean 1/rate, coefficient of variation 1/√k, so k = 1 is
//     a Poisson process, k < 1 burstier and k > 1 more regular —, summed,
//     and the sums rescaled so that the last request arrives at exactly
//     n/rate (vLLM rescales to remove the 1–2 % spread of the raw sum
//     between seeds, so that request throughput depends on the rate only).
//
// The first request comes one gap after the start, as in vLLM. Burstiness
// 0 means 1. The gaps are a PCG stream seeded by seed, so the same
// arguments give the same schedule (with one Go release's math/rand/v2).
// It panics on a negative n, a negative or NaN rate or a negative or NaN
// burstiness (programmer errors: Load.Validate rejects them).
func Schedule(n int, rate, burstiness float64, seed uint64) []time.Duration {
	if n < 0 || !(rate >= 0) || !(burstiness >= 0) {
		panic(fmt.Sprintf("bench: Schedule(%d, %v, %v): negative or NaN argument", n, rate, burstiness))
	}
	out := make([]time.Duration, n)
	if n == 0 || rate == 0 || math.IsInf(rate, 1) {
		return out
	}
	if burstiness == 0 {
		burstiness = 1
	}
	total := float64(n) / rate
	if math.IsInf(burstiness, 1) {
		for i := range out {
			out[i] = seconds(float64(i+1) / rate)
		}
		out[n-1] = seconds(total)
		return out
	}
	rng := rand.New(rand.NewPCG(seed, streamArrival))
	theta := 1 / (rate * burstiness)
	cum := make([]float64, n)
	s := 0.0
	for i := range cum {
		s += gamma(rng, burstiness) * theta
		cum[i] = s
	}
	if s == 0 { // every gap underflowed (tiny shapes): vLLM skips the rescale
		return out
	}
	f := total / s
	for i, c := range cum {
		out[i] = seconds(c * f)
	}
	out[n-1] = seconds(total) // exact, whatever the rounding of c·f
	return out
}

// seconds converts seconds to a Duration, rounding to the nanosecond.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// gamma draws from Gamma(shape k, scale 1) by Marsaglia and Tsang's method
// ("A simple method for generating gamma variables", 2000): for k ≥ 1,
// with d = k − 1/3 and c = 1/√(9d), repeat x ~ N(0,1), v = (1+cx)³ until
// v > 0 and u < 1 − 0.0331x⁴ or ln u < x²/2 + d(1 − v + ln v), and return
// d·v; for k < 1, Gamma(k) = Gamma(k+1)·u^(1/k).
func gamma(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		u := 1 - rng.Float64() // (0, 1]
		return gamma(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
