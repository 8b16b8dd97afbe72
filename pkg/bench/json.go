package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JSON forms. Durations are seconds (float), as in vLLM's result files;
// infinite rates are the string "inf", as vLLM writes request_rate.

// infFloat is a float64 that is the JSON string "inf" when infinite.
type infFloat float64

func (f infFloat) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 1) {
		return []byte(`"inf"`), nil
	}
	return json.Marshal(float64(f))
}

func (f *infFloat) UnmarshalJSON(b []byte) error {
	if string(b) == `"inf"` {
		*f = infFloat(math.Inf(1))
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return fmt.Errorf("want a number or \"inf\": %w", err)
	}
	*f = infFloat(x)
	return nil
}

type loadJSON struct {
	RequestRate    infFloat `json:"request_rate"`
	Burstiness     infFloat `json:"burstiness"`
	MaxConcurrency *int     `json:"max_concurrency"`
	Warmups        int      `json:"num_warmups"`
	Timeout        float64  `json:"timeout_s"`
}

// MarshalJSON writes vLLM's run-description keys: request_rate ("inf" for
// all at once), burstiness (1 for the default, "inf" for a constant rate),
// max_concurrency (null for none), num_warmups, and timeout_s.
func (l Load) MarshalJSON() ([]byte, error) {
	j := loadJSON{RequestRate: infFloat(l.Rate), Burstiness: infFloat(l.Burstiness), Warmups: l.Warmups, Timeout: l.Timeout.Seconds()}
	if l.allAtOnce() {
		j.RequestRate = infFloat(math.Inf(1))
	}
	if l.Burstiness == 0 {
		j.Burstiness = 1
	}
	if l.Concurrency > 0 {
		j.MaxConcurrency = &l.Concurrency
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form; "inf" reads back as Rate 0.
func (l *Load) UnmarshalJSON(b []byte) error {
	var j loadJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = Load{Rate: float64(j.RequestRate), Burstiness: float64(j.Burstiness), Warmups: j.Warmups, Timeout: seconds(j.Timeout)}
	if math.IsInf(l.Rate, 1) {
		l.Rate = 0
	}
	if j.MaxConcurrency != nil {
		l.Concurrency = *j.MaxConcurrency
	}
	return nil
}

type recordJSON struct {
	Index        int       `json:"index"`
	Start        float64   `json:"start_s"`
	TTFT         *float64  `json:"ttft_s"` // null without chunks
	E2EL         *float64  `json:"e2el_s"`
	Done         float64   `json:"done_s"`
	ITL          []float64 `json:"itl_s"`
	Chunks       int       `json:"chunks"`
	QueueTime    float64   `json:"queue_time_s"`
	InputTokens  int       `json:"input_tokens"`
	OutputTokens int       `json:"output_tokens"`
	FinishReason string    `json:"finish_reason,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// MarshalJSON writes a record with snake_case keys, times in seconds:
// start_s and done_s from the run's start, ttft_s and e2el_s from
// start_s (null when no chunk arrived), itl_s, queue_time_s.
func (r Record) MarshalJSON() ([]byte, error) {
	j := recordJSON{Index: r.Index, Start: r.Start.Seconds(), Done: r.Done.Seconds(), Chunks: r.Chunks,
		QueueTime: r.QueueTime.Seconds(), InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		FinishReason: r.FinishReason, Error: r.Error, ITL: make([]float64, len(r.ITL))}
	if r.Chunks > 0 {
		ttft, e2el := r.TTFT().Seconds(), r.E2EL().Seconds()
		j.TTFT, j.E2EL = &ttft, &e2el
	}
	for i, g := range r.ITL {
		j.ITL[i] = g.Seconds()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form, to the nanosecond.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record{Index: j.Index, Start: seconds(j.Start), Done: seconds(j.Done), Chunks: j.Chunks,
		QueueTime: seconds(j.QueueTime), InputTokens: j.InputTokens, OutputTokens: j.OutputTokens,
		FinishReason: j.FinishReason, Error: j.Error}
	if j.TTFT != nil {
		r.FirstToken = r.Start + seconds(*j.TTFT)
	}
	if j.E2EL != nil {
		r.End = r.Start + seconds(*j.E2EL)
	}
	if len(j.ITL) > 0 {
		r.ITL = make([]time.Duration, len(j.ITL))
		for i, g := range j.ITL {
			r.ITL[i] = seconds(g)
		}
	}
	return nil
}

type resultJSON struct {
	Target       string    `json:"target"`
	Load         Load      `json:"load"`
	Started      time.Time `json:"started"`
	Duration     float64   `json:"duration"`
	Requests     int       `json:"num_prompts"`
	Interrupted  int       `json:"interrupted"`
	WarmupFailed int       `json:"warmup_failed"`
	Records      []Record  `json:"records"`
}

// MarshalJSON writes target, load, started (RFC 3339), duration (s),
// num_prompts, interrupted, warmup_failed and records.
func (r Result) MarshalJSON() ([]byte, error) {
	return json.Marshal(resultJSON{Target: r.Target, Load: r.Load, Started: r.Started, Duration: r.Duration.Seconds(),
		Requests: r.Requests, Interrupted: r.Interrupted, WarmupFailed: r.WarmupFailed, Records: r.Records})
}

// UnmarshalJSON reads MarshalJSON's form.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{Target: j.Target, Load: j.Load, Started: j.Started, Duration: seconds(j.Duration),
		Requests: j.Requests, Interrupted: j.Interrupted, WarmupFailed: j.WarmupFailed, Records: j.Records}
	return nil
}

// summaryMetrics pairs each Summary Stats field with its vLLM name.
func (s *Summary) metrics() []struct {
	name  string
	stats *Stats
} {
	return []struct {
		name  string
		stats *Stats
	}{
		{"ttft", &s.TTFT}, {"tpot", &s.TPOT}, {"itl", &s.ITL}, {"e2el", &s.E2EL},
		{"client_queue_time", &s.ClientQueueTime}, {"e2el_including_client_queue", &s.E2ELIncludingClientQueue},
	}
}

// percentileWord writes p as vLLM does: "99", "99.9".
func percentileWord(p float64) string {
	if p == math.Trunc(p) {
		return strconv.FormatFloat(p, 'f', 0, 64)
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// MarshalJSON writes the flat object documented on Summary, keys in a
// fixed order.
func (s Summary) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	add := func(key string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("bench: summary %s: %w", key, err)
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(key))
		b.WriteByte(':')
		b.Write(data)
		return nil
	}
	fields := []struct {
		key string
		v   any
	}{
		{"duration", s.Duration}, {"completed", s.Completed}, {"failed", s.Failed},
		{"total_input_tokens", s.TotalInputTokens}, {"total_output_tokens", s.TotalOutputTokens},
		{"request_throughput", s.RequestThroughput}, {"request_goodput", s.RequestGoodput},
		{"output_throughput", s.OutputThroughput}, {"total_token_throughput", s.TotalTokenThroughput},
		{"max_output_tokens_per_s", s.MaxOutputTokensPerS}, {"max_concurrent_requests", s.MaxConcurrentRequests},
		{"mean_concurrency", s.MeanConcurrency},
	}
	for _, f := range fields {
		if err := add(f.key, f.v); err != nil {
			return nil, err
		}
	}
	for _, m := range s.metrics() {
		st := m.stats
		for _, f := range []struct {
			prefix string
			v      float64
		}{{"mean", st.Mean}, {"median", st.Median}, {"std", st.Std}, {"p90", st.P90}, {"p95", st.P95}, {"p99", st.P99}, {"max", st.Max}} {
			if err := add(f.prefix+"_"+m.name+"_ms", f.v); err != nil {
				return nil, err
			}
		}
		for _, q := range st.Extra {
			if err := add("p"+percentileWord(q.P)+"_"+m.name+"_ms", q.Value); err != nil {
				return nil, err
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the flat object MarshalJSON writes (and the
// matching keys of a vLLM result file; others are ignored). Extra
// percentiles come back in increasing order.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*s = Summary{}
	get := func(key string, dst any) error {
		raw, ok := m[key]
		if !ok {
			return nil
		}
		delete(m, key)
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("bench: summary %s: %w", key, err)
		}
		return nil
	}
	for _, f := range []struct {
		key string
		dst any
	}{
		{"duration", &s.Duration}, {"completed", &s.Completed}, {"failed", &s.Failed},
		{"total_input_tokens", &s.TotalInputTokens}, {"total_output_tokens", &s.TotalOutputTokens},
		{"request_throughput", &s.RequestThroughput}, {"request_goodput", &s.RequestGoodput},
		{"output_throughput", &s.OutputThroughput}, {"total_token_throughput", &s.TotalTokenThroughput},
		{"max_output_tokens_per_s", &s.MaxOutputTokensPerS}, {"max_concurrent_requests", &s.MaxConcurrentRequests},
		{"mean_concurrency", &s.MeanConcurrency},
	} {
		if err := get(f.key, f.dst); err != nil {
			return err
		}
	}
	for _, mt := range s.metrics() {
		st := mt.stats
		for _, f := range []struct {
			prefix string
			dst    *float64
		}{{"mean", &st.Mean}, {"median", &st.Median}, {"std", &st.Std}, {"p90", &st.P90}, {"p95", &st.P95}, {"p99", &st.P99}, {"max", &st.Max}} {
			if err := get(f.prefix+"_"+mt.name+"_ms", f.dst); err != nil {
				return err
			}
		}
	}
	// What is left of the form p{P}_{metric}_ms is an extra percentile.
	names := s.metrics()
	for key, raw := range m {
		rest, ok := strings.CutPrefix(key, "p")
		if !ok {
			continue
		}
		if rest, ok = strings.CutSuffix(rest, "_ms"); !ok {
			continue
		}
		for _, mt := range names {
			word, ok := strings.CutSuffix(rest, "_"+mt.name)
			if !ok {
				continue
			}
			p, err := strconv.ParseFloat(word, 64)
			if err != nil || strings.Contains(word, "_") {
				continue
			}
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("bench: summary %s: %w", key, err)
			}
			mt.stats.Extra = append(mt.stats.Extra, Quantile{P: p, Value: v})
			break
		}
	}
	for _, mt := range names {
		slices.SortFunc(mt.stats.Extra, func(a, b Quantile) int { return cmp.Compare(a.P, b.P) })
	}
	return nil
}
