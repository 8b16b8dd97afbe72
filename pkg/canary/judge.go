package canary

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/plan"
)

// Verdicts.
const (
	Promote  = "promote"
	Hold     = "hold"
	Rollback = "rollback"
)

// Gate statuses.
const (
	StatusPass    = "pass"
	StatusFail    = "fail"
	StatusPending = "pending" // not enough evidence yet
	StatusNA      = "n/a"     // the engines do not export the metric
)

// GateResult is one gate as judged at the end of a window.
type GateResult struct {
	Gate   Gate   `json:"gate"`
	Status string `json:"status"`
	// Value is the gated value (NaN, written null, when not measured);
	// Baseline and Candidate the two sides it compares, where it has two.
	Value     float64 `json:"value"`
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	// PValue is the significance test's p-value, where one applies.
	PValue *float64 `json:"p_value,omitempty"`
	// Message says why it failed, or what it waits for.
	Message string `json:"message,omitempty"`
}

// MarshalJSON writes NaN numbers as null.
func (r GateResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Gate      Gate     `json:"gate"`
		Status    string   `json:"status"`
		Value     *float64 `json:"value"`
		Baseline  *float64 `json:"baseline"`
		Candidate *float64 `json:"candidate"`
		PValue    *float64 `json:"p_value,omitempty"`
		Message   string   `json:"message,omitempty"`
	}{r.Gate, r.Status, num(r.Value), num(r.Baseline), num(r.Candidate), r.PValue, r.Message})
}

// judge keeps what the gates need across windows.
type judge struct {
	policy Policy
	// latency[metric] are the window statuses of each latency and
	// kv-usage gate, oldest first.
	history map[string][]string
}

// evidence is what one judgement reads.
type evidence struct {
	window, total EngineWindowPair
	// history are the scrapes so far, oldest first, the last one the
	// window's end: a latency quantile is judged over the shortest recent
	// span with enough observations.
	history [][2]plan.Snapshot
	// present says which latency histograms both engines export.
	present map[string]bool
	probe   *ProbeStats
	windows int
}

// EngineWindowPair is the baseline's and the candidate's window.
type EngineWindowPair struct {
	Baseline  EngineWindow `json:"baseline"`
	Candidate EngineWindow `json:"candidate"`
}

// judgeWindow applies every gate after a window and returns the results,
// the verdict and its reasons.
func (j *judge) judgeWindow(ev evidence) ([]GateResult, string, []string) {
	p := j.policy
	var out []GateResult
	for _, g := range p.Gates {
		out = append(out, j.gate(g, ev))
	}
	var failed, pending []string
	for _, r := range out {
		switch r.Status {
		case StatusFail:
			failed = append(failed, r.Gate.Metric+": "+r.Message)
		case StatusPending:
			pending = append(pending, r.Gate.Metric+": "+r.Message)
		}
	}
	switch {
	case len(failed) > 0:
		return out, Rollback, failed
	case ev.windows < p.MinWindows:
		return out, Hold, append([]string{fmt.Sprintf("%d of the %d windows a promote needs", ev.windows, p.MinWindows)}, pending...)
	case len(pending) > 0:
		return out, Hold, pending
	}
	return out, Promote, []string{fmt.Sprintf("every gate passed over %d windows", ev.windows)}
}

func (j *judge) gate(g Gate, ev evidence) GateResult {
	p := j.policy
	r := GateResult{Gate: g, Value: math.NaN(), Baseline: math.NaN(), Candidate: math.NaN()}
	b, c := ev.total.Baseline, ev.total.Candidate
	if family, pct, ok := g.latency(); ok {
		return j.latencyGate(g, family, pct, ev)
	}
	switch g.Metric {
	case GateErrorRate, GateAbortRate:
		be, ce := b.Errors, c.Errors
		if g.Metric == GateAbortRate {
			be, ce = b.Aborts, c.Aborts
		}
		if math.IsNaN(be) || math.IsNaN(ce) {
			r.Status, r.Message = StatusNA, "the engines export no finished_reason counts"
			return r
		}
		return rateGate(r, p, int(be), int(b.Requests), int(ce), int(c.Requests), "requests")
	case GateProbeErrorRate:
		if ev.probe == nil {
			r.Status, r.Message = StatusNA, "no quality probe"
			return r
		}
		n := ev.probe.Requests
		return rateGate(r, p, ev.probe.BaselineErrors, n, ev.probe.CandidateErrors, n, "probe requests")
	case GatePreemptionRate:
		r.Baseline, r.Candidate = b.PreemptionRate, c.PreemptionRate
		if math.IsNaN(b.Preemptions) || math.IsNaN(c.Preemptions) {
			r.Status, r.Message = StatusNA, "the engines export no preemption counter"
			return r
		}
		if b.Requests < float64(p.MinRequests) || c.Requests < float64(p.MinRequests) {
			r.Status, r.Message = StatusPending, fmt.Sprintf("%g and %g requests of the %d each needs", b.Requests, c.Requests, p.MinRequests)
			return r
		}
		r.Value = r.Candidate - r.Baseline
		r.Status = StatusPass
		if r.Value > g.Max {
			r.Status, r.Message = StatusFail, fmt.Sprintf("%.3g more preemptions per request than the baseline (> %g)", r.Value, g.Max)
		}
		return r
	case GateKVUsage:
		w := ev.window.Candidate
		r.Baseline, r.Candidate, r.Value = ev.window.Baseline.KVUsage, w.KVUsage, w.KVUsage
		if math.IsNaN(w.KVUsage) {
			r.Status, r.Message = StatusNA, "the candidate exports no KV-cache usage"
			return r
		}
		return j.streak(r, g, w.KVUsage > g.Max, fmt.Sprintf("KV usage %.1f%% > %g%%", 100*w.KVUsage, 100*g.Max))
	}
	// Quality gates.
	if ev.probe == nil {
		r.Status, r.Message = StatusNA, "no quality probe"
		return r
	}
	pr := ev.probe
	enough := pr.Items >= p.MinSamples && pr.Items > 0
	waiting := fmt.Sprintf("%d probe items of the %d a judgement needs", pr.Items, max(1, p.MinSamples))
	r.Status = StatusPass
	switch g.Metric {
	case GateFlips:
		// Significant flips fail the gate at once; a pass waits for
		// MinSamples items.
		r.Value, r.Baseline, r.Candidate = float64(pr.Regressed), float64(pr.BaselinePass), float64(pr.CandidatePass)
		pv := pr.McNemarP
		r.PValue = &pv
		if r.Value > g.Max {
			msg := fmt.Sprintf("%d items regressed, %d improved (McNemar p = %.3g)", pr.Regressed, pr.Improved, pv)
			if names := flipNames(pr.Flips, 3); names != "" {
				msg += ": " + names
			}
			switch {
			case g.Significant && !(pv < p.Alpha && pr.Regressed > pr.Improved):
				r.Message = msg + ", not significant"
			case g.Significant || enough:
				r.Status, r.Message = StatusFail, msg
				return r
			}
		}
		if !enough {
			r.Status, r.Message = StatusPending, waiting
		}
		return r
	}
	if !enough {
		r.Status, r.Message = StatusPending, waiting
		return r
	}
	switch g.Metric {
	case GateExactDrift:
		r.Value = pr.ExactDrift
		if r.Value > g.Max {
			r.Status, r.Message = StatusFail, fmt.Sprintf("%.1f%% of the probe outputs differ (> %g%%)", 100*r.Value, 100*g.Max)
		}
	case GateKLD:
		r.Value = pr.KLD
		if math.IsNaN(pr.KLD) {
			r.Status, r.Message = StatusNA, "the engines return no logprobs"
		} else if r.Value > g.Max {
			r.Status, r.Message = StatusFail, fmt.Sprintf("mean top-k KLD %.4g nats > %g", r.Value, g.Max)
		}
	}
	return r
}

// flipNames names the first n regressions.
func flipNames(fs []Flip, n int) string {
	var names []string
	for _, f := range fs {
		if f.Direction == "regressed" && len(names) < n {
			names = append(names, f.Name())
		}
	}
	return strings.Join(names, ", ")
}

// rateGate judges a difference of two failure rates: the candidate's
// minus the baseline's, significant by the exact conditional binomial
// test of the candidate's share of the failures.
func rateGate(r GateResult, p Policy, be, bn, ce, cn int, what string) GateResult {
	if bn < p.MinRequests || cn < p.MinRequests {
		r.Status, r.Message = StatusPending, fmt.Sprintf("%d and %d %s of the %d each needs", bn, cn, what, p.MinRequests)
		return r
	}
	r.Baseline, r.Candidate = float64(be)/float64(bn), float64(ce)/float64(cn)
	r.Value = r.Candidate - r.Baseline
	pv := binomialUpper(be+ce, ce, float64(cn)/float64(bn+cn))
	r.PValue = &pv
	r.Status = StatusPass
	if r.Value > r.Gate.Max {
		msg := fmt.Sprintf("%.2f%% against the baseline's %.2f%% (%d of %d %s; p = %.3g)", 100*r.Candidate, 100*r.Baseline, ce, cn, what, pv)
		if !r.Gate.Significant || pv < p.Alpha {
			r.Status, r.Message = StatusFail, msg
		} else {
			r.Message = msg + ", not significant"
		}
	}
	return r
}

// binomialUpper is P[X ≥ k] for X ~ Binomial(n, p).
func binomialUpper(n, k int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	lgN, _ := math.Lgamma(float64(n + 1))
	var s float64
	for i := k; i <= n; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(lgN - a - b + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return math.Min(1, s)
}

// latencyGate judges a quantile ratio. A quantile q needs, on each side,
// MinRequests observations and MinRequests/2 above it (MinRequests/2 /
// (1 − q) in all: 10 for a p50, 100 for a p95, 500 for a p99 by
// default), so that one slow request is not a p95. At each window's end
// the gate is judged over the shortest recent span of windows that holds
// them (pending when even the whole watch does not); FailWindows failing
// judgements in a row fail the gate, and it passes once the whole watch's
// ratio passes and the last judgement did not fail.
func (j *judge) latencyGate(g Gate, family string, pct int, ev evidence) GateResult {
	p := j.policy
	r := GateResult{Gate: g, Value: math.NaN(), Baseline: math.NaN(), Candidate: math.NaN()}
	if !ev.present[family] {
		r.Status, r.Message = StatusNA, fmt.Sprintf("the engines do not both export a %s histogram", strings.ToUpper(family))
		return r
	}
	pick := func(w EngineWindow) Quantiles {
		switch family {
		case "ttft":
			return w.TTFT
		case "itl":
			return w.ITL
		}
		return w.E2E
	}
	need := math.Max(float64(p.MinRequests), math.Ceil(float64(p.MinRequests)/2/(1-float64(pct)/100)))
	floor := time.Duration(p.LatencyFloor).Seconds()
	judgeOne := func(pair EngineWindowPair) (status string, b, c float64) {
		bq, cq := pick(pair.Baseline), pick(pair.Candidate)
		b, c = bq.at(pct), cq.at(pct)
		if bq.Count < need || cq.Count < need || math.IsNaN(b) || math.IsNaN(c) {
			return StatusPending, b, c
		}
		if c > g.Max*b && c-b >= floor {
			return StatusFail, b, c
		}
		return StatusPass, b, c
	}
	// The shortest recent span with enough observations.
	ws, wb, wc := StatusPending, math.NaN(), math.NaN()
	if n := len(ev.history); n >= 2 {
		cur := ev.history[n-1]
		for i := n - 2; i >= 0; i-- {
			span := EngineWindowPair{Baseline: Between(ev.history[i][0], cur[0]), Candidate: Between(ev.history[i][1], cur[1])}
			if ws, wb, wc = judgeOne(span); ws != StatusPending {
				break
			}
		}
	}
	ts, tb, tc := judgeOne(ev.total)
	if ws != StatusPending {
		j.history[g.Metric] = append(j.history[g.Metric], ws)
	}
	r.Baseline, r.Candidate = wb, wc
	if ws == StatusPending {
		r.Baseline, r.Candidate = tb, tc
	}
	if r.Baseline > 0 {
		r.Value = r.Candidate / r.Baseline
	}
	h := j.history[g.Metric]
	label := fmt.Sprintf("p%d %s", pct, strings.ToUpper(family))
	switch {
	case ws != StatusPending && len(h) >= p.FailWindows && allFail(h[len(h)-p.FailWindows:]):
		r.Status = StatusFail
		r.Message = fmt.Sprintf("%s %.3g s against the baseline's %.3g s (%.2f×, > %g×) in %d windows in a row", label, r.Candidate, r.Baseline, r.Value, g.Max, p.FailWindows)
	case ts == StatusPass && ws != StatusFail:
		r.Status = StatusPass
	case ts == StatusPending:
		r.Status, r.Message = StatusPending, fmt.Sprintf("fewer than %g %s observations on a side for a p%d", need, strings.ToUpper(family), pct)
	default:
		r.Status, r.Message = StatusPending, fmt.Sprintf("%s %.2f× the baseline's (> %g×), not yet in %d windows in a row", label, r.Value, g.Max, p.FailWindows)
	}
	return r
}

// streak fails a per-window gate after FailWindows failing windows in a
// row.
func (j *judge) streak(r GateResult, g Gate, failed bool, msg string) GateResult {
	s := StatusPass
	if failed {
		s = StatusFail
	}
	j.history[g.Metric] = append(j.history[g.Metric], s)
	h := j.history[g.Metric]
	switch {
	case len(h) >= j.policy.FailWindows && allFail(h[len(h)-j.policy.FailWindows:]):
		r.Status, r.Message = StatusFail, fmt.Sprintf("%s in %d windows in a row", msg, j.policy.FailWindows)
	case failed:
		r.Status, r.Message = StatusPending, msg+", not yet in enough windows in a row"
	default:
		r.Status = StatusPass
	}
	return r
}

func allFail(s []string) bool {
	for _, x := range s {
		if x != StatusFail {
			return false
		}
	}
	return true
}
