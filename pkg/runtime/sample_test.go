package runtime_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	kvrt "github.com/kvqlabs/kvq/pkg/runtime"
)

// logitsOf is a vocabulary's worth of logits: normal with standard
// deviation scale (a larger scale makes a sharper distribution), rounded
// to multiples of step when step > 0 (so that many are equal).
func logitsOf(n int, scale, step float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		v := rng.NormFloat64() * scale
		if step > 0 {
			v = math.Round(v/step) * step
		}
		out[i] = float32(v)
	}
	return out
}

// refSampler is Sample as it was before the nucleus was selected with a
// heap: a stable sort of the whole vocabulary by probability for every
// token. Sample must draw the same tokens.
type refSampler struct {
	temperature, topP float64
	rng               *rand.Rand
}

func newRefSampler(temperature, topP float64, seed uint64) *refSampler {
	return &refSampler{temperature, topP, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *refSampler) sample(logits []float32) int {
	n := len(logits)
	p, idx := make([]float64, n), make([]int, n)
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - m) / s.temperature)
		sum += p[i]
		idx[i] = i
	}
	for i := range p {
		p[i] /= sum
	}
	if s.topP < 1 {
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		var cum float64
		cut := n
		for k, i := range idx {
			cum += p[i]
			if cum >= s.topP {
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

// TestSampleMatchesStableSort: Sample draws the tokens of a stable sort
// of the whole vocabulary (refSampler), seed for seed, over vocabularies
// whose nucleus the first selection holds, one that takes several
// selections, and ones that end in the full sort; with many equal
// logits (ties, which the order breaks by id), a NaN logit and an
// infinite one (the stable sort's own order).
func TestSampleMatchesStableSort(t *testing.T) {
	type tc struct {
		n           int
		scale, step float64
		nan, inf    bool
	}
	cases := []tc{
		{n: 7, scale: 1},
		{n: 300, scale: 2, step: 0.5},
		{n: 3000, scale: 1},
		{n: 3000, scale: 6, step: 1},
		{n: 20000, scale: 5},
		{n: 20000, scale: 1.5},
		{n: 20000, scale: 0.3, step: 0.1},
		{n: 20000, scale: 3, step: 0.25},
		{n: 1000, scale: 1, nan: true},
		{n: 1000, scale: 1, inf: true},
	}
	for ci, c := range cases {
		logits := logitsOf(c.n, c.scale, c.step, uint64(ci))
		if c.nan {
			logits[17] = float32(math.NaN())
		}
		if c.inf {
			logits[17] = float32(math.Inf(1))
		}
		for _, temp := range []float64{0.7, 1.3} {
			for _, topP := range []float64{0.05, 0.5, 0.9, 0.999, 0.9999999} {
				seed := uint64(ci*100 + int(topP*10))
				s, err := kvrt.NewSampler(temp, topP, seed)
				if err != nil {
					t.Fatal(err)
				}
				ref := newRefSampler(temp, topP, seed)
				for d := range 2 {
					if got, want := s.Sample(logits), ref.sample(logits); got != want {
						t.Fatalf("case %d (n %d, scale %g, step %g, nan %v, inf %v), temperature %g, top-p %g, draw %d: token %d, the stable sort's %d",
							ci, c.n, c.scale, c.step, c.nan, c.inf, temp, topP, d, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkSampleTopP measures one token's sampling at temperature 0.8
// and top-p 0.9 over a Llama 3 vocabulary (128256), for logits of a
// sharp distribution (scale 4: the nucleus holds 48 tokens) and a flat
// one (scale 1: 65640 tokens), with Sample ("heap") and with the stable
// sort of the whole vocabulary it replaced ("sort").
func BenchmarkSampleTopP(b *testing.B) {
	for _, scale := range []float64{4, 1} {
		logits := logitsOf(128256, scale, 0, 1)
		b.Run(fmt.Sprintf("scale%g/heap", scale), func(b *testing.B) {
			s, err := kvrt.NewSampler(0.8, 0.9, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits)
			}
		})
		b.Run(fmt.Sprintf("scale%g/sort", scale), func(b *testing.B) {
			s := newRefSampler(0.8, 0.9, 1)
			for b.Loop() {
				s.sample(logits)
			}
		})
	}
}
