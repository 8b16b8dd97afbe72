package canary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Gate metrics. Each bounds a value of the candidate against the baseline
// (see Gate).
const (
	GateErrorRate      = "error-rate"
	GateAbortRate      = "abort-rate"
	GateProbeErrorRate = "probe-error-rate"
	GatePreemptionRate = "preemption-rate"
	GateKVUsage        = "kv-usage"
	GateFlips          = "flips"
	GateExactDrift     = "exact-drift"
	GateKLD            = "kld"
)

// latencyGates are "ttft-p95" and the like: a latency family and a
// percentile.
var (
	latencyFamilies = []string{"ttft", "itl", "e2e"}
	latencyPercents = []int{50, 95, 99}
)

// GateMetrics lists the gate metrics.
func GateMetrics() []string {
	out := []string{GateErrorRate, GateAbortRate, GateProbeErrorRate}
	for _, f := range latencyFamilies {
		for _, p := range latencyPercents {
			out = append(out, fmt.Sprintf("%s-p%d", f, p))
		}
	}
	return append(out, GatePreemptionRate, GateKVUsage, GateFlips, GateExactDrift, GateKLD)
}

// Gate bounds one metric, kvq eval's gates' style:
//
//	metric            value                                             bound
//	error-rate        candidate error rate − baseline's (finished       max
//	                  requests, finished_reason error), since the start
//	abort-rate        the same for aborted requests                     max
//	probe-error-rate  the same for the quality probe's own requests     max
//	ttft-p50 … p99,   candidate quantile / baseline quantile over a     max
//	itl-…, e2e-…      window (histogram deltas)
//	preemption-rate   candidate preemptions per request − baseline's    max
//	kv-usage          candidate KV-cache usage (0..1) at a window end   max
//	flips             probe items passing on the baseline and failing   max
//	                  on the candidate
//	exact-drift       share of probe items whose outputs differ         max
//	kld               mean top-k KLD (nats) over the probe's tokens     max
//
// With Significant (the default for the rates and flips), a gate beyond
// its bound fails only when the difference is significant at Alpha: the
// exact McNemar test for flips, the exact conditional binomial test of
// the two deployments' counts for the rates. A latency gate fails when
// FailWindows windows in a row are beyond it.
type Gate struct {
	Metric      string  `json:"metric"`
	Max         float64 `json:"max"`
	Significant bool    `json:"significant,omitempty"`
}

// String is the gate as a flag spells it: "ttft-p95 <= 1.5".
func (g Gate) String() string {
	s := fmt.Sprintf("%s <= %g", g.Metric, g.Max)
	if g.Significant {
		s += " (if significant)"
	}
	return s
}

// latency returns a latency gate's family and percentile.
func (g Gate) latency() (family string, pct int, ok bool) {
	for _, f := range latencyFamilies {
		for _, p := range latencyPercents {
			if g.Metric == fmt.Sprintf("%s-p%d", f, p) {
				return f, p, true
			}
		}
	}
	return "", 0, false
}

// Check validates the gate.
func (g Gate) Check() error {
	if !slices.Contains(GateMetrics(), g.Metric) {
		return fmt.Errorf("%w: gate metric %q (valid: %s)", ErrPolicy, g.Metric, strings.Join(GateMetrics(), ", "))
	}
	if math.IsNaN(g.Max) || math.IsInf(g.Max, 0) || g.Max < 0 {
		return fmt.Errorf("%w: gate %s: max %g is not a finite number ≥ 0", ErrPolicy, g.Metric, g.Max)
	}
	return nil
}

// Policy is the gates and how much evidence a verdict needs.
type Policy struct {
	Gates []Gate `json:"gates"`
	// MinWindows is the windows a promote needs (default 3).
	MinWindows int `json:"min_windows"`
	// MinSamples is the probe items each deployment must have answered
	// before quality gates pass (default 20).
	MinSamples int `json:"min_samples"`
	// MinRequests is the finished requests (or latency observations) each
	// deployment needs before a rate or latency gate is judged (default 10).
	MinRequests int `json:"min_requests"`
	// FailWindows is the consecutive failing windows that fail a latency
	// gate (default 2).
	FailWindows int `json:"fail_windows"`
	// Alpha is the significance level (default 0.05).
	Alpha float64 `json:"alpha"`
	// LatencyFloor: a latency gate does not fail while the candidate's
	// quantile exceeds the baseline's by less than this (default 50 ms),
	// so that a ratio of two tiny latencies is not a regression.
	LatencyFloor Duration `json:"latency_floor"`
}

// Duration is a time.Duration written as Go spells it ("50ms").
type Duration time.Duration

// MarshalJSON writes "50ms".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "50ms" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("a duration (\"50ms\") or seconds: %s", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// DefaultGates are the gates applied when none are given: errors and
// aborts at most 1 and 5 points above the baseline, TTFT and ITL p95 at
// most 1.5× the baseline's, preemptions at most 0.05 per request above,
// and no significant quality flips.
func DefaultGates() []Gate {
	return []Gate{
		{Metric: GateErrorRate, Max: 0.01, Significant: true},
		{Metric: GateAbortRate, Max: 0.05, Significant: true},
		{Metric: GateProbeErrorRate, Max: 0.05, Significant: true},
		{Metric: "ttft-p95", Max: 1.5},
		{Metric: "itl-p95", Max: 1.5},
		{Metric: GatePreemptionRate, Max: 0.05},
		{Metric: GateFlips, Max: 0, Significant: true},
	}
}

// DefaultPolicy is DefaultGates with the default evidence.
func DefaultPolicy() Policy {
	p := Policy{Gates: DefaultGates()}
	p.fill()
	return p
}

// fill sets the defaults of the zero fields.
func (p *Policy) fill() {
	if p.MinWindows == 0 {
		p.MinWindows = 3
	}
	if p.MinSamples == 0 {
		p.MinSamples = 20
	}
	if p.MinRequests == 0 {
		p.MinRequests = 10
	}
	if p.FailWindows == 0 {
		p.FailWindows = 2
	}
	if p.Alpha == 0 {
		p.Alpha = 0.05
	}
	if p.LatencyFloor == 0 {
		p.LatencyFloor = Duration(50 * time.Millisecond)
	}
}

// Check fills the defaults and validates the policy.
func (p *Policy) Check() error {
	p.fill()
	switch {
	case len(p.Gates) == 0:
		return fmt.Errorf("%w: no gates (an empty policy would promote every canary)", ErrPolicy)
	case p.MinWindows < 1 || p.MinSamples < 0 || p.MinRequests < 1 || p.FailWindows < 1:
		return fmt.Errorf("%w: min_windows, min_requests and fail_windows must be positive, min_samples at least 0", ErrPolicy)
	case p.Alpha <= 0 || p.Alpha >= 1:
		return fmt.Errorf("%w: alpha %g outside (0, 1)", ErrPolicy, p.Alpha)
	case p.LatencyFloor < 0:
		return fmt.Errorf("%w: latency_floor %v is negative", ErrPolicy, time.Duration(p.LatencyFloor))
	}
	for _, g := range p.Gates {
		if err := g.Check(); err != nil {
			return err
		}
	}
	return nil
}

// ParseGate reads a gate as a flag spells it, "METRIC=MAX" (a
// significance test applies where the metric has one).
func ParseGate(s string) (Gate, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok {
		return Gate{}, fmt.Errorf("%w: gate %q: want METRIC=MAX (e.g. ttft-p95=1.5)", ErrPolicy, s)
	}
	var max float64
	if _, err := fmt.Sscan(strings.TrimSpace(val), &max); err != nil {
		return Gate{}, fmt.Errorf("%w: gate %q: %q is not a number", ErrPolicy, s, val)
	}
	g := Gate{Metric: strings.TrimSpace(name), Max: max}
	g.Significant = significantByDefault(g.Metric)
	return g, g.Check()
}

func significantByDefault(metric string) bool {
	switch metric {
	case GateErrorRate, GateAbortRate, GateProbeErrorRate, GateFlips:
		return true
	}
	return false
}

// ParsePolicy reads a policy file: JSON or YAML, an object with "gates"
// (a list of {metric, max, significant}) and optionally min_windows,
// min_samples, min_requests, fail_windows, alpha and latency_floor, or a
// bare list of gates. A gate without "significant" takes its metric's
// default. name names the file in errors.
func ParsePolicy(data []byte, name string) (Policy, error) {
	data = bytes.TrimSpace(data)
	var raw any
	if len(data) > 0 && (data[0] == '[' || data[0] == '{') {
		if err := json.Unmarshal(data, &raw); err != nil {
			return Policy{}, fmt.Errorf("%w: policy file %s: %w", ErrPolicy, name, err)
		}
	} else if err := yaml.Unmarshal(data, &raw); err != nil {
		return Policy{}, fmt.Errorf("%w: policy file %s: %w", ErrPolicy, name, err)
	}
	if list, ok := raw.([]any); ok {
		raw = map[string]any{"gates": list}
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return Policy{}, fmt.Errorf("%w: policy file %s: want an object with a \"gates\" list, or a list of gates", ErrPolicy, name)
	}
	gates, _ := obj["gates"].([]any)
	for i, g := range gates {
		if m, ok := g.(map[string]any); ok {
			if _, set := m["significant"]; !set {
				metric, _ := m["metric"].(string)
				m["significant"] = significantByDefault(metric)
			}
			if _, set := m["max"]; !set {
				return Policy{}, fmt.Errorf("%w: policy file %s, gate %d: no max", ErrPolicy, name, i+1)
			}
		}
	}
	b, err := json.Marshal(obj)
	if err != nil { // YAML's .nan and .inf
		return Policy{}, fmt.Errorf("%w: policy file %s: a value is not a finite number (%w)", ErrPolicy, name, err)
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("%w: policy file %s: %w", ErrPolicy, name, err)
	}
	if err := p.Check(); err != nil {
		return Policy{}, fmt.Errorf("policy file %s: %w", name, err)
	}
	return p, nil
}
