package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
	top         []int    // nucleus' selection heap
	pairs       []idProb // nucleus' full sort
}

// idProb is a token and its probability, sorted side by side: a sort of
// ids that looked their probabilities up would read them at random.
type idProb struct {
	p  float64
	id int
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

// nucleus returns the smallest run of the likeliest tokens whose
// probabilities p sum to TopP or more (all of them when rounding keeps
// the sum below), likeliest first and the lower id first among equals,
// and that sum, added in that order. idx holds 0..n-1 on entry, and is
// reordered.
//
// The order is that of a stable sort of idx by descending probability,
// which is what Sample did over the whole vocabulary for every token
// (about 150 ms for Llama 3's 128256 ids). Most distributions reach TopP
// within a few hundred tokens, so nucleus first selects the k likeliest
// with a heap, in one pass, sorts those, and only when they fall short of
// TopP tries four times as many, sorting everything once k reaches half
// the vocabulary; as ids break ties, every sort gives the one order, so
// the tokens and the sum are those of the full stable sort, bit for bit.
// With NaN probabilities (NaN or infinite logits) the order is not total,
// and the stable sort runs as before.
func (s *Sampler) nucleus(p []float64, idx []int, nan bool) ([]int, float64) {
	n := len(p)
	// before reports whether token a comes before token b.
	before := func(a, b int) bool { return p[a] > p[b] || p[a] == p[b] && a < b }
	cmp := func(a, b int) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	}
	cut := func(order []int) (int, float64, bool) {
		var cum float64
		for k, i := range order {
			cum += p[i]
			if cum >= s.TopP {
				return k + 1, cum, true
			}
		}
		return len(order), cum, false
	}
	if nan {
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		k, cum, _ := cut(idx)
		return idx[:k], cum
	}
	for k := 256; 2*k < n; k *= 4 {
		// h is a heap of the k likeliest so far, the last in order at
		// its root.
		h := s.top[:0]
		for i := range n {
			if len(h) < k {
				h = append(h, i)
				for c := len(h) - 1; c > 0; { // up
					parent := (c - 1) / 2
					if !before(h[parent], h[c]) {
						break
					}
					h[parent], h[c] = h[c], h[parent]
					c = parent
				}
				continue
			}
			if !before(i, h[0]) {
				continue
			}
			h[0] = i
			for c := 0; ; { // down
				l, r, last := 2*c+1, 2*c+2, c
				if l < k && before(h[last], h[l]) {
					last = l
				}
				if r < k && before(h[last], h[r]) {
					last = r
				}
				if last == c {
					break
				}
				h[c], h[last] = h[last], h[c]
				c = last
			}
		}
		s.top = h
		slices.SortFunc(h, cmp)
		if c, cum, ok := cut(h); ok {
			return append(idx[:0], h[:c]...), cum
		}
	}
	pairs := s.pairs[:0]
	for i, v := range p {
		pairs = append(pairs, idProb{v, i})
	}
	s.pairs = pairs
	slices.SortFunc(pairs, func(a, b idProb) int {
		switch {
		case a.p > b.p:
			return -1
		case a.p < b.p:
			return 1
		}
		return a.id - b.id
	})
	for k, x := range pairs {
		idx[k] = x.id
	}
	c, cum, _ := cut(idx)
	return idx[:c], cum
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
		idx, sum = s.nucleus(p, idx, math.IsNaN(sum))
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
