package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
)

// Gates turn the report into a CI check. A gate bounds one metric of the
// candidate caches (never the baseline) whose spec matches Cache (a
// path.Match pattern; empty or "*" is every candidate):
//
//	metric     value                                         bound
//	kld        mean KL divergence to the baseline, nats      max
//	kld-p99    99th percentile of the per-token KLD          max
//	ppl-ratio  PPL / PPL(baseline)                           max
//	same-top   share of positions with the baseline's top-1  min
//	drop       points lost on a suite row against the        max
//	           baseline (baseline − cache where higher is
//	           better, cache − baseline for rates that
//	           should be low)
//	score      a suite row's score, percent                  min (max
//	                                                         for rates
//	                                                         that should
//	                                                         be low)
//	flips      items that passed with the baseline and fail  max
//	slowdown   decode time per token / the baseline's        max
//
// drop, score and flips name a suite row (Suite, a path.Match pattern; "*"
// is every row). With Significant, a drop or flips gate fails only when
// the flips are significant (exact McNemar p < Alpha, default 0.05): a
// difference that is noise passes.

// Gate metrics.
const (
	GateKLD       = "kld"
	GateKLDP99    = "kld-p99"
	GatePPLRatio  = "ppl-ratio"
	GateSameTop   = "same-top"
	GateDrop      = "drop"
	GateScore     = "score"
	GateFlips     = "flips"
	GateSlowdown  = "slowdown"
	defaultAlpha  = 0.05
	notMeasuredID = "not measured"
)

// GateMetrics lists the gate metrics.
func GateMetrics() []string {
	return []string{GateKLD, GateKLDP99, GatePPLRatio, GateSameTop, GateDrop, GateScore, GateFlips, GateSlowdown}
}

// Gate is one threshold.
type Gate struct {
	Metric      string   `json:"metric"`
	Suite       string   `json:"suite,omitempty"`
	Cache       string   `json:"cache,omitempty"`
	Max         *float64 `json:"max,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Significant bool     `json:"significant,omitempty"`
	Alpha       float64  `json:"alpha,omitempty"`
}

// String is the gate as flags would spell it.
func (g Gate) String() string {
	var b strings.Builder
	b.WriteString(g.Metric)
	if g.Suite != "" {
		b.WriteString("[" + g.Suite + "]")
	}
	if g.Max != nil {
		fmt.Fprintf(&b, " <= %g", *g.Max)
	}
	if g.Min != nil {
		fmt.Fprintf(&b, " >= %g", *g.Min)
	}
	if g.Cache != "" && g.Cache != "*" {
		b.WriteString(" for " + g.Cache)
	}
	if g.Significant {
		b.WriteString(" (if significant)")
	}
	return b.String()
}

// Check validates the gate.
func (g Gate) Check() error {
	known := false
	for _, m := range GateMetrics() {
		known = known || m == g.Metric
	}
	switch {
	case !known:
		return fmt.Errorf("%w: gate metric %q (valid: %s)", ErrOptions, g.Metric, strings.Join(GateMetrics(), ", "))
	case g.Max == nil && g.Min == nil:
		return fmt.Errorf("%w: gate %s has neither max nor min", ErrOptions, g.Metric)
	case g.Max != nil && (math.IsNaN(*g.Max) || math.IsInf(*g.Max, 0)) || g.Min != nil && (math.IsNaN(*g.Min) || math.IsInf(*g.Min, 0)):
		return fmt.Errorf("%w: gate %s: bound is not a finite number", ErrOptions, g.Metric)
	case g.Alpha < 0 || g.Alpha >= 1:
		return fmt.Errorf("%w: gate %s: alpha %g outside [0, 1)", ErrOptions, g.Metric, g.Alpha)
	case g.Metric == GateFlips && (g.Max != nil && *g.Max < 0 || g.Min != nil && *g.Min < 0):
		return fmt.Errorf("%w: gate %s: a bound of %g flips (a count of items: at least 0)", ErrOptions, g.Metric, bound(g))
	}
	needsSuite := g.Metric == GateDrop || g.Metric == GateScore || g.Metric == GateFlips
	if needsSuite && g.Suite == "" {
		return fmt.Errorf("%w: gate %s needs a suite (a row name or \"*\")", ErrOptions, g.Metric)
	}
	if !needsSuite && g.Suite != "" {
		return fmt.Errorf("%w: gate %s takes no suite", ErrOptions, g.Metric)
	}
	for _, p := range []string{g.Suite, g.Cache} {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w: gate %s: pattern %q: %w", ErrOptions, g.Metric, p, err)
		}
	}
	return nil
}

// bound is g's max, else its min.
func bound(g Gate) float64 {
	if g.Max != nil {
		return *g.Max
	}
	return *g.Min
}

// DefaultGates are the gates kvq eval applies when none are given: the
// four layers of a rollout check — distribution (mean KLD ≤ 0.05 nats,
// top-1 agreement ≥ 90%), tasks and safety (no significant drop of more
// than 5 points on any row), and memory comes from the verdict's saving.
func DefaultGates() []Gate {
	f := func(x float64) *float64 { return &x }
	return []Gate{
		{Metric: GateKLD, Max: f(0.05)},
		{Metric: GateSameTop, Min: f(0.90)},
		{Metric: GateDrop, Suite: "*", Max: f(5), Significant: true},
	}
}

// ParseGates reads a gates file: JSON or YAML, either a list of gates or
// an object with a "gates" list. Keys: metric, suite, cache, max, min,
// significant, alpha. name names the file in errors.
func ParseGates(data []byte, name string) ([]Gate, error) {
	data = bytes.TrimSpace(data)
	var raw any
	if len(data) > 0 && (data[0] == '[' || data[0] == '{') {
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("%w: gates file %s: %w", ErrOptions, name, err)
		}
	} else {
		v, err := parseYAML(data)
		if err != nil {
			return nil, fmt.Errorf("%w: gates file %s: %w", ErrOptions, name, err)
		}
		raw = v
	}
	if obj, ok := raw.(map[string]any); ok {
		raw = obj["gates"]
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: gates file %s: want a list of gates (or {\"gates\": [...]})", ErrOptions, name)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: gates file %s has no gates (an empty list would pass every run)", ErrOptions, name)
	}
	var gates []Gate
	for i, item := range list {
		b, err := json.Marshal(item)
		if err != nil { // YAML's .nan and .inf
			return nil, fmt.Errorf("%w: gates file %s, gate %d: a value is not a finite number (%w)", ErrOptions, name, i+1, err)
		}
		var g Gate
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return nil, fmt.Errorf("%w: gates file %s, gate %d: %w", ErrOptions, name, i+1, err)
		}
		if err := g.Check(); err != nil {
			return nil, fmt.Errorf("gates file %s, gate %d: %w", name, i+1, err)
		}
		gates = append(gates, g)
	}
	return gates, nil
}

// GateResult is one gate applied to one cache (and suite row).
type GateResult struct {
	Gate  Gate    `json:"gate"`
	Cache string  `json:"cache"`
	Suite string  `json:"suite,omitempty"`
	Value float64 `json:"value"`
	Pass  bool    `json:"pass"`
	// PValue is the McNemar p-value of drop and flips gates.
	PValue *float64 `json:"p_value,omitempty"`
	// Message says why it failed (or that the metric was not measured).
	Message string `json:"message,omitempty"`
}

// MarshalJSON writes a metric that was not measured (NaN, which JSON
// cannot hold) as "value": null.
func (r GateResult) MarshalJSON() ([]byte, error) {
	type plain GateResult
	v := struct {
		plain
		Value *float64 `json:"value"`
	}{plain: plain(r)}
	if !math.IsNaN(r.Value) && !math.IsInf(r.Value, 0) {
		v.Value = &r.Value
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads "value": null back as NaN.
func (r *GateResult) UnmarshalJSON(b []byte) error {
	type plain GateResult
	var v struct {
		plain
		Value *float64 `json:"value"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = GateResult(v.plain)
	r.Value = math.NaN()
	if v.Value != nil {
		r.Value = *v.Value
	}
	return nil
}

// Label is the gate as applied: "drop[copy] <= 5".
func (r GateResult) Label() string {
	n := r.Gate.Metric
	if r.Suite != "" {
		n += "[" + r.Suite + "]"
	}
	if r.Gate.Max != nil {
		n += fmt.Sprintf(" <= %g", *r.Gate.Max)
	}
	if r.Gate.Min != nil {
		n += fmt.Sprintf(" >= %g", *r.Gate.Min)
	}
	return n
}

// Name is Label and the cache: "kld <= 0.01 @ int4".
func (r GateResult) Name() string { return r.Label() + " @ " + r.Cache }

func matches(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

// applyGates evaluates the gates on rep and fills in the verdicts and the
// recommendation.
func applyGates(rep *Report, gates []Gate) {
	rep.Gates = rep.Gates[:0]
	for _, g := range gates {
		for ci, c := range rep.Caches {
			if ci == 0 || !matches(g.Cache, c.Spec) {
				continue
			}
			rep.Gates = append(rep.Gates, evalGate(rep, g, ci)...)
		}
	}
	rep.Verdicts = rep.Verdicts[:0]
	for ci, c := range rep.Caches {
		if ci == 0 {
			continue
		}
		v := Verdict{Cache: c.Spec, Pass: true}
		for _, r := range rep.Gates {
			if r.Cache == c.Spec && !r.Pass {
				v.Pass = false
				v.Failed = append(v.Failed, r.Name())
			}
		}
		rep.Verdicts = append(rep.Verdicts, v)
	}
	rep.Recommendation = recommend(rep)
}

// evalGate applies g to cache ci (one result, or one per matching suite
// row).
func evalGate(rep *Report, g Gate, ci int) []GateResult {
	spec := rep.Caches[ci].Spec
	res := func(v float64, suite string) GateResult {
		r := GateResult{Gate: g, Cache: spec, Suite: suite, Value: v, Pass: true}
		if g.Max != nil && !(v <= *g.Max) {
			r.Pass, r.Message = false, fmt.Sprintf("%.4g > %g", v, *g.Max)
		}
		if g.Min != nil && !(v >= *g.Min) {
			r.Pass, r.Message = false, fmt.Sprintf("%.4g < %g", v, *g.Min)
		}
		return r
	}
	missing := func(suite string) []GateResult {
		return []GateResult{{Gate: g, Cache: spec, Suite: suite, Value: math.NaN(), Pass: false, Message: notMeasuredID + " in this run"}}
	}
	switch g.Metric {
	case GateKLD, GateKLDP99, GatePPLRatio, GateSameTop:
		if rep.Text == nil || ci >= len(rep.Text.Caches) {
			return missing("")
		}
		tm := rep.Text.Caches[ci]
		v := map[string]float64{GateKLD: tm.KLD.Mean, GateKLDP99: tm.KLD.P99, GatePPLRatio: math.Exp(tm.LnPPLRatio), GateSameTop: tm.SameTop}[g.Metric]
		return []GateResult{res(v, "")}
	case GateSlowdown:
		for _, s := range rep.Speed {
			if s.Cache == spec {
				return []GateResult{res(s.Relative, "")}
			}
		}
		return missing("")
	}
	var out []GateResult
	for _, s := range rep.Suites {
		label := s.Name
		if !matches(g.Suite, label) {
			continue
		}
		if ci >= len(s.Caches) {
			continue
		}
		sc := s.Caches[ci]
		var v float64
		switch g.Metric {
		case GateDrop:
			v = -sc.Diff
			if !s.HigherIsBetter {
				v = sc.Diff
			}
		case GateScore:
			v = sc.Score
		case GateFlips:
			v = float64(sc.PassToFail)
			if !s.HigherIsBetter {
				v = float64(sc.FailToPass)
			}
		}
		r := res(v, label)
		if g.Metric == GateScore && !s.HigherIsBetter {
			// For a rate that should be low, min reads as max.
			r = GateResult{Gate: g, Cache: spec, Suite: label, Value: v, Pass: true}
			if g.Min != nil && v > 100-*g.Min {
				r.Pass, r.Message = false, fmt.Sprintf("%.4g > %g", v, 100-*g.Min)
			}
			if g.Max != nil && v > *g.Max {
				r.Pass, r.Message = false, fmt.Sprintf("%.4g > %g", v, *g.Max)
			}
		}
		if g.Metric == GateDrop || g.Metric == GateFlips {
			p := sc.McNemarP
			r.PValue = &p
			alpha := g.Alpha
			if alpha == 0 {
				alpha = defaultAlpha
			}
			if !r.Pass && g.Significant && p >= alpha {
				r.Pass = true
				r.Message = fmt.Sprintf("%.4g beyond the bound but not significant (McNemar p = %.3g ≥ %g)", v, p, alpha)
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return missing(g.Suite)
	}
	return out
}

// recommend picks the passing candidate with the fewest bytes per token,
// among those smaller than the baseline.
func recommend(rep *Report) *Recommendation {
	var best *CacheInfo
	for ci := range rep.Caches {
		c := &rep.Caches[ci]
		if ci == 0 {
			continue
		}
		pass := false
		for _, v := range rep.Verdicts {
			if v.Cache == c.Spec {
				pass = v.Pass
			}
		}
		if pass && c.Compression > 1 && (best == nil || c.BytesPerToken < best.BytesPerToken) {
			best = c
		}
	}
	if best == nil {
		return nil
	}
	passing := 0
	for _, v := range rep.Verdicts {
		if v.Pass {
			passing++
		}
	}
	return &Recommendation{
		Cache: best.Spec, Compression: best.Compression, Saving: 1 - 1/best.Compression,
		Reason: fmt.Sprintf("the smallest of the %d candidates that pass every gate", passing),
	}
}

// sortGates orders results for display: failures first, then by cache.
func sortGates(rs []GateResult) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Pass != rs[j].Pass {
			return !rs[i].Pass
		}
		return rs[i].Cache < rs[j].Cache
	})
}
