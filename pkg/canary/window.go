package canary

import (
	"encoding/json"
	"math"

	"github.com/kvqlabs/kvq/pkg/plan"
)

// Quantiles are a latency histogram's p50, p95 and p99 in seconds (NaN,
// written as null, when the window saw no observation).
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	// Count is the observations in the window.
	Count float64 `json:"count"`
}

// MarshalJSON writes NaN as null.
func (q Quantiles) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		P50   *float64 `json:"p50"`
		P95   *float64 `json:"p95"`
		P99   *float64 `json:"p99"`
		Count float64  `json:"count"`
	}{num(q.P50), num(q.P95), num(q.P99), q.Count})
}

// num is v, or nil when v is not a finite number (JSON has no NaN).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// at reads a quantile by its percent (50, 95, 99).
func (q Quantiles) at(p int) float64 {
	switch p {
	case 50:
		return q.P50
	case 95:
		return q.P95
	}
	return q.P99
}

func quantiles(h *plan.Histogram) Quantiles {
	q := Quantiles{P50: math.NaN(), P95: math.NaN(), P99: math.NaN()}
	if h == nil {
		return q
	}
	q.P50, q.P95, q.P99 = h.Quantile(0.50), h.Quantile(0.95), h.Quantile(0.99)
	if n := len(h.Counts); n > 0 {
		q.Count = h.Counts[n-1]
	}
	return q
}

// EngineWindow is one deployment's metrics over a window: counter and
// histogram deltas between two scrapes, gauges as of the second.
type EngineWindow struct {
	// Engine is the metric family found ("vllm", "sglang", "kvq",
	// "llamacpp"; "" when none).
	Engine string `json:"engine"`
	// Requests finished in the window, and of them the aborted and the
	// failed ones (finished_reason abort and error; NaN when the engine
	// exports no finish reasons).
	Requests float64 `json:"requests"`
	Aborts   float64 `json:"aborts"`
	Errors   float64 `json:"errors"`
	// ErrorRate and AbortRate are Errors and Aborts over Requests.
	ErrorRate float64 `json:"error_rate"`
	AbortRate float64 `json:"abort_rate"`
	// TTFT, ITL (inter-token latency, or time per output token) and E2E
	// are the window's latency quantiles, seconds.
	TTFT Quantiles `json:"ttft"`
	ITL  Quantiles `json:"itl"`
	E2E  Quantiles `json:"e2e"`
	// Preemptions in the window, and per finished request.
	Preemptions    float64 `json:"preemptions"`
	PreemptionRate float64 `json:"preemption_rate"`
	// KVUsage (0..1), Running and Waiting are the gauges at the window's
	// end.
	KVUsage float64 `json:"kv_usage"`
	Running float64 `json:"running"`
	Waiting float64 `json:"waiting"`
}

// MarshalJSON writes the numbers that were not measured as null.
func (w EngineWindow) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Engine         string    `json:"engine"`
		Requests       *float64  `json:"requests"`
		Aborts         *float64  `json:"aborts"`
		Errors         *float64  `json:"errors"`
		ErrorRate      *float64  `json:"error_rate"`
		AbortRate      *float64  `json:"abort_rate"`
		TTFT           Quantiles `json:"ttft"`
		ITL            Quantiles `json:"itl"`
		E2E            Quantiles `json:"e2e"`
		Preemptions    *float64  `json:"preemptions"`
		PreemptionRate *float64  `json:"preemption_rate"`
		KVUsage        *float64  `json:"kv_usage"`
		Running        *float64  `json:"running"`
		Waiting        *float64  `json:"waiting"`
	}{w.Engine, num(w.Requests), num(w.Aborts), num(w.Errors), num(w.ErrorRate), num(w.AbortRate), w.TTFT, w.ITL, w.E2E,
		num(w.Preemptions), num(w.PreemptionRate), num(w.KVUsage), num(w.Running), num(w.Waiting)})
}

// counterDelta is cur − prev, or cur after a counter reset; NaN when
// either is absent.
func counterDelta(prev, cur float64) float64 {
	if math.IsNaN(cur) || math.IsNaN(prev) {
		return math.NaN()
	}
	if cur < prev {
		return cur
	}
	return cur - prev
}

// Between is the window from scrape a to scrape b of one deployment.
func Between(a, b plan.Snapshot) EngineWindow {
	w := EngineWindow{Engine: b.Engine, KVUsage: b.Usage, Running: b.Running, Waiting: b.Waiting,
		Requests: math.NaN(), Aborts: math.NaN(), Errors: math.NaN(), ErrorRate: math.NaN(), AbortRate: math.NaN(), PreemptionRate: math.NaN()}
	if b.Finished != nil {
		reason := func(r string) float64 {
			return counterDelta(a.Finished[r], b.Finished[r])
		}
		w.Requests = 0
		for r := range b.Finished {
			w.Requests += reason(r)
		}
		w.Aborts, w.Errors = reason("abort"), reason("error")
	} else {
		w.Requests = counterDelta(a.Requests, b.Requests)
	}
	if w.Requests > 0 {
		w.ErrorRate, w.AbortRate = w.Errors/w.Requests, w.Aborts/w.Requests
	}
	w.TTFT = quantiles(b.TTFT.Sub(a.TTFT))
	w.ITL = quantiles(b.ITL.Sub(a.ITL))
	w.E2E = quantiles(b.E2E.Sub(a.E2E))
	w.Preemptions = counterDelta(a.Preemptions, b.Preemptions)
	if w.Requests > 0 && !math.IsNaN(w.Preemptions) {
		w.PreemptionRate = w.Preemptions / w.Requests
	}
	return w
}
