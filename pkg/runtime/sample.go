package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Sampler picks the next token from logits. Temperature 0 is greedy (ties
// go to the lowest id). Otherwise logits are divided by the temperature,
// softmaxed, restricted to the smallest set of most likely tokens whose
// probability reaches TopP (1 keeps all), and sampled with a PCG generator
// seeded by Seed, so a run is reproducible.
type Sampler struct {
	Temperature float64
	TopP        float64
	Seed        uint64
	rng         *rand.Rand
	probs       []float64
	idx         []int
}

// NewSampler validates the parameters.
func NewSampler(temperature, topP float64, seed uint64) (*Sampler, error) {
	if temperature < 0 || math.IsNaN(temperature) || math.IsInf(temperature, 0) {
		return nil, fmt.Errorf("runtime: temperature %v must be a finite number ≥ 0", temperature)
	}
	if !(topP > 0 && topP <= 1) {
		return nil, fmt.Errorf("runtime: top-p %v must be in (0, 1]", topP)
	}
	return &Sampler{Temperature: temperature, TopP: topP, Seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, nil
}

// Argmax returns the index of the largest value (the first on ties).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// Sample picks a token.
func (s *Sampler) Sample(logits []float32) int {
	if s.Temperature == 0 {
		return Argmax(logits)
	}
	n := len(logits)
	if cap(s.probs) < n {
		s.probs = make([]float64, n)
		s.idx = make([]int, n)
	}
	p, idx := s.probs[:n], s.idx[:n]
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - m) / s.Temperature)
		sum += p[i]
		idx[i] = i
	}
	for i := range p {
		p[i] /= sum
	}
	if s.TopP < 1 {
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		var cum float64
		cut := n
		for k, i := range idx {
			cum += p[i]
			if cum >= s.TopP {
				cut = k + 1
				break
			}
		}
		idx = idx[:cut]
		sum = cum
	} else {
		sum = 1
	}
	r := s.rng.Float64() * sum
	var acc float64
	for _, i := range idx {
		acc += p[i]
		if r < acc {
			return i
		}
	}
	return idx[len(idx)-1]
}
