package eval

import (
	"sort"
	"unicode/utf8"
)

// Directions of a flip (Flip.Direction, Sample.Flipped).
const (
	// FlipRegressed: the item passed with the baseline and fails with the
	// candidate (counted in SuiteScore.PassToFail).
	FlipRegressed = "regressed"
	// FlipImproved: the item failed with the baseline and passes with the
	// candidate (SuiteScore.FailToPass).
	FlipImproved = "improved"
)

// ExcerptRunes is how many characters Excerpt keeps at each end of a
// prompt.
const ExcerptRunes = 300

// Flip is one item whose verdict differs between the baseline and a
// candidate cache: what a person reviews before signing off a rollout.
type Flip struct {
	// Suite is the suite row's label, Index the item's index in its suite
	// and Metric the metric that flipped.
	Suite  string
	Index  int
	Metric string
	// Cache is the candidate; Baseline the cache it is compared with.
	Cache    string
	Baseline string
	// Direction is FlipRegressed or FlipImproved.
	Direction string
	// Prompt is Excerpt of the item's prompt; Reference is the expected
	// answer as the task states it.
	Prompt    string
	Reference string
	// BaselineOutput and Output are the two caches' outputs, with their
	// metric values and verdicts.
	BaselineOutput string
	Output         string
	BaselineValue  float64
	Value          float64
	BaselinePass   bool
	Pass           bool
}

// SampleBaseline is the baseline's side of a flipped item, carried by the
// candidate's Sample so that a --log-samples line is reviewable alone.
type SampleBaseline struct {
	Cache  string  `json:"cache"`
	Output string  `json:"output"`
	Value  float64 `json:"value"`
	Pass   bool    `json:"pass"`
}

// Excerpt returns s whole when it is at most 2n+1 characters long, and
// otherwise its first and last n characters joined by " … " (n ≤ 0: n is
// ExcerptRunes). It never cuts a UTF-8 character.
func Excerpt(s string, n int) string {
	if n <= 0 {
		n = ExcerptRunes
	}
	if utf8.RuneCountInString(s) <= 2*n+1 {
		return s
	}
	head, i := 0, 0
	for ; head < n; head++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	j := len(s)
	for tail := 0; tail < n; tail++ {
		_, w := utf8.DecodeLastRuneInString(s[:j])
		j -= w
	}
	return s[:i] + " … " + s[j:]
}

// flipPair is a flipped item: the indices in a sample list of the
// baseline's sample and the candidate's.
type flipPair struct{ base, cand int }

// flipPairs finds, for every candidate sample, the baseline's sample of
// the same suite row, metric and item, and keeps the pairs whose verdicts
// differ, in the order of the candidates' samples.
func flipPairs(samples []Sample, baseline string) []flipPair {
	type key struct {
		suite, metric string
		index         int
	}
	base := map[key]int{}
	for i, s := range samples {
		if s.Cache == baseline {
			k := key{s.Suite, s.Metric, s.Index}
			if _, ok := base[k]; !ok {
				base[k] = i
			}
		}
	}
	var out []flipPair
	for i, s := range samples {
		if s.Cache == baseline {
			continue
		}
		b, ok := base[key{s.Suite, s.Metric, s.Index}]
		if ok && samples[b].Pass != s.Pass {
			out = append(out, flipPair{b, i})
		}
	}
	return out
}

// Flips returns the items of samples (one per item, metric and cache, as
// Run keeps them) whose verdict under a candidate differs from the
// baseline's: regressions first, then improvements, each in the samples'
// order. The prompt is cut with Excerpt.
func Flips(samples []Sample, baseline string) []Flip {
	pairs := flipPairs(samples, baseline)
	out := make([]Flip, 0, len(pairs))
	for _, p := range pairs {
		b, c := &samples[p.base], &samples[p.cand]
		dir := FlipImproved
		if b.Pass {
			dir = FlipRegressed
		}
		out = append(out, Flip{Suite: c.Suite, Index: c.Index, Metric: c.Metric, Cache: c.Cache, Baseline: baseline, Direction: dir,
			Prompt: Excerpt(c.Prompt, 0), Reference: c.Reference, BaselineOutput: b.Output, Output: c.Output,
			BaselineValue: b.Value, Value: c.Value, BaselinePass: b.Pass, Pass: c.Pass})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Direction == FlipRegressed && out[j].Direction != FlipRegressed
	})
	return out
}

// markFlips sets Flipped and Baseline on every candidate sample whose
// verdict differs from the baseline's.
func markFlips(samples []Sample, baseline string) {
	for _, p := range flipPairs(samples, baseline) {
		b, c := &samples[p.base], &samples[p.cand]
		c.Flipped = FlipImproved
		if b.Pass {
			c.Flipped = FlipRegressed
		}
		c.Baseline = SampleBaseline{Cache: b.Cache, Output: b.Output, Value: b.Value, Pass: b.Pass}
	}
}
