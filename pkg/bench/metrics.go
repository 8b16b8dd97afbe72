package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stats summarizes one metric's values, in milliseconds: the mean, the
// median, the population standard deviation (numpy's np.std), the 90th,
// 95th and 99th percentiles, the maximum, and any further percentiles
// asked for (numpy's linear interpolation throughout). With no values every
// statistic is 0, as vLLM reports it (np.mean(xs or 0)).
type Stats struct {
	Mean, Median, Std float64
	P90, P95, P99     float64
	Max               float64
	Extra             []Quantile // SummaryOptions.Percentiles other than 90, 95 and 99, increasing
}

// Quantile is the value of one percentile (P in percent).
type Quantile struct {
	P, Value float64
}

// Percentile returns the P-th percentile, computed or extra, and whether
// s holds it (the median is the 50th).
func (s *Stats) Percentile(p float64) (float64, bool) {
	switch p {
	case 50:
		return s.Median, true
	case 90:
		return s.P90, true
	case 95:
		return s.P95, true
	case 99:
		return s.P99, true
	case 100:
		return s.Max, true
	}
	for _, q := range s.Extra {
		if q.P == p {
			return q.Value, true
		}
	}
	return 0, false
}

// standardPercentiles are the percentiles every Stats carries.
var standardPercentiles = []float64{90, 95, 99}

// newStats summarizes values given in seconds.
func newStats(secs []float64, extra []float64) Stats {
	s := sortedCopy(secs)
	const ms = 1000
	st := Stats{
		Mean:   mean(s) * ms,
		Median: percentile(s, 50) * ms,
		Std:    stdPop(s) * ms,
		P90:    percentile(s, 90) * ms,
		P95:    percentile(s, 95) * ms,
		P99:    percentile(s, 99) * ms,
	}
	if len(s) > 0 {
		st.Max = s[len(s)-1] * ms
	}
	for _, p := range extra {
		if !slices.Contains(standardPercentiles, p) {
			st.Extra = append(st.Extra, Quantile{P: p, Value: percentile(s, p) * ms})
		}
	}
	return st
}

// Goodput holds per-request service-level objectives: a request is good
// when it meets every non-zero limit (vLLM's --goodput, the DistServe
// definition). A request with at most one output token counts TPOT 0.
type Goodput struct {
	TTFT, TPOT, E2EL time.Duration
}

// IsZero reports whether no limit is set.
func (g Goodput) IsZero() bool { return g == Goodput{} }

// String is the SLO list in ParseGoodput's form, "" when none is set.
func (g Goodput) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ttft", g.TTFT}, {"tpot", g.TPOT}, {"e2el", g.E2EL}} {
		if f.d > 0 {
			parts = append(parts, f.name+":"+f.d.String())
		}
	}
	return strings.Join(parts, ",")
}

// meets reports whether a succeeded request meets every limit of g.
func (g Goodput) meets(r *Record) bool {
	if g.TTFT > 0 && r.TTFT() > g.TTFT {
		return false
	}
	if g.E2EL > 0 && r.E2EL() > g.E2EL {
		return false
	}
	// TPOT ≤ limit ⇔ E2EL − TTFT ≤ limit·(out−1), exactly in integers.
	if g.TPOT > 0 && r.OutputTokens > 1 && r.End-r.FirstToken > g.TPOT*time.Duration(r.OutputTokens-1) {
		return false
	}
	return true
}

// ParseGoodput parses SLOs such as "ttft:500ms,tpot:50ms,e2el:2s": pairs
// name:value separated by commas or white space, names ttft, tpot and
// e2el, values Go durations or, as vLLM writes them, bare numbers of
// milliseconds ("ttft:500"). Values must be positive; "" sets none.
// Errors wrap ErrGoodput.
func ParseGoodput(s string) (Goodput, error) {
	var g Goodput
	seen := map[string]bool{}
	for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		name, val, ok := strings.Cut(item, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" || val == "" {
			return Goodput{}, fmt.Errorf("%w: %q is not name:value (e.g. ttft:500ms)", ErrGoodput, item)
		}
		var d time.Duration
		if ms, err := strconv.ParseFloat(val, 64); err == nil {
			if !(ms > 0) || math.IsInf(ms, 0) || ms*float64(time.Millisecond) > math.MaxInt64 {
				return Goodput{}, fmt.Errorf("%w: %s: %q milliseconds: must be positive and finite", ErrGoodput, name, val)
			}
			d = time.Duration(math.Round(ms * float64(time.Millisecond)))
		} else if d, err = time.ParseDuration(val); err != nil {
			return Goodput{}, fmt.Errorf("%w: %s: %q is neither milliseconds nor a duration like 500ms", ErrGoodput, name, val)
		}
		if d <= 0 {
			return Goodput{}, fmt.Errorf("%w: %s: %q: must be positive", ErrGoodput, name, val)
		}
		if seen[name] {
			return Goodput{}, fmt.Errorf("%w: %s given twice", ErrGoodput, name)
		}
		seen[name] = true
		switch name {
		case "ttft":
			g.TTFT = d
		case "tpot":
			g.TPOT = d
		case "e2el":
			g.E2EL = d
		default:
			return Goodput{}, fmt.Errorf("%w: unknown metric %q (have ttft, tpot, e2el)", ErrGoodput, name)
		}
	}
	return g, nil
}

// ParsePercentiles parses a list of percentiles such as "50,90,99.9"
// (commas or white space; each in [0, 100]), as vLLM's
// --metric-percentiles. Errors wrap ErrOptions.
func ParsePercentiles(s string) ([]float64, error) {
	var ps []float64
	for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		p, err := strconv.ParseFloat(item, 64)
		if err != nil || !(p >= 0 && p <= 100) {
			return nil, fmt.Errorf("%w: percentile %q: want a number in [0, 100]", ErrOptions, item)
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// SummaryOptions control Summarize.
type SummaryOptions struct {
	// Percentiles are reported for every metric besides the median, 90,
	// 95, 99 and the maximum, each in [0, 100].
	Percentiles []float64
	// Goodput, when set, gives RequestGoodput.
	Goodput Goodput
}

// Summary is a run's metrics with vLLM bench serve's definitions
// (Formulas) and, in JSON, its key names. The JSON object is flat:
//
//	duration                       s, the run (Result.Duration)
//	completed, failed              requests that succeeded, failed
//	total_input_tokens             Σ input tokens of completed requests
//	total_output_tokens            Σ output tokens of completed requests
//	request_throughput             completed / duration, req/s
//	request_goodput                good requests / duration, req/s; null without SLOs
//	output_throughput              total_output_tokens / duration, tok/s
//	total_token_throughput         (total_input_tokens + total_output_tokens) / duration
//	max_output_tokens_per_s        peak chunks in a 1-second bucket (see Formulas)
//	max_concurrent_requests        peak requests in flight, [start, end) sweep
//	mean_concurrency               Σ E2EL / duration (kvq's addition)
//	{mean,median,std,max}_M_ms     statistics of metric M, ms (max is kvq's addition)
//	p{P}_M_ms                      percentiles: 90, 95, 99 and the extra ones; P is
//	                               written "99" or "99.9" as vLLM writes it
//
// for M in ttft, tpot, itl, e2el, client_queue_time and
// e2el_including_client_queue (vLLM writes the last two only under
// --max-concurrency; kvq always does). Summary reads back what it writes.
type Summary struct {
	Duration                 float64
	Completed, Failed        int
	TotalInputTokens         int
	TotalOutputTokens        int
	RequestThroughput        float64
	RequestGoodput           *float64
	OutputThroughput         float64
	TotalTokenThroughput     float64
	MaxOutputTokensPerS      float64
	MaxConcurrentRequests    int
	MeanConcurrency          float64
	TTFT, TPOT, ITL, E2EL    Stats
	ClientQueueTime          Stats
	E2ELIncludingClientQueue Stats
}

// Summarize computes a run's metrics (see Summary and Formulas). Only
// completed (succeeded) requests enter the latency statistics, token
// totals, peaks and goodput; rates divide by Result.Duration and are 0
// when it is. Errors, for percentiles outside [0, 100], wrap ErrOptions.
func Summarize(res *Result, opts SummaryOptions) (Summary, error) {
	for _, p := range opts.Percentiles {
		if !(p >= 0 && p <= 100) {
			return Summary{}, fmt.Errorf("%w: percentile %v outside [0, 100]", ErrOptions, p)
		}
	}
	extra := slices.Clone(opts.Percentiles)
	slices.Sort(extra)
	extra = slices.Compact(extra)
	s := Summary{Duration: res.Duration.Seconds()}
	v := collect(res.Records)
	s.Completed, s.Failed = len(v.ok), len(res.Records)-len(v.ok)
	good := 0
	for _, r := range v.ok {
		s.TotalInputTokens += r.InputTokens
		s.TotalOutputTokens += r.OutputTokens
		if !opts.Goodput.IsZero() && opts.Goodput.meets(r) {
			good++
		}
	}
	per := func(x float64) float64 {
		if s.Duration <= 0 {
			return 0
		}
		return x / s.Duration
	}
	s.RequestThroughput = per(float64(s.Completed))
	if !opts.Goodput.IsZero() {
		g := per(float64(good))
		s.RequestGoodput = &g
	}
	s.OutputThroughput = per(float64(s.TotalOutputTokens))
	s.TotalTokenThroughput = per(float64(s.TotalInputTokens + s.TotalOutputTokens))
	s.MaxOutputTokensPerS = maxChunksPerSecond(v.ok)
	s.MaxConcurrentRequests = maxConcurrent(v.ok)
	sum := 0.0
	for _, x := range v.e2el {
		sum += x
	}
	s.MeanConcurrency = per(sum)
	s.TTFT = newStats(v.ttft, extra)
	s.TPOT = newStats(v.tpot, extra)
	s.ITL = newStats(v.itl, extra)
	s.E2EL = newStats(v.e2el, extra)
	s.ClientQueueTime = newStats(v.queue, extra)
	s.E2ELIncludingClientQueue = newStats(v.e2elq, extra)
	return s, nil
}

// samples are the metric values of a run's succeeded requests, in seconds.
type samples struct {
	ok                                  []*Record
	ttft, tpot, itl, e2el, queue, e2elq []float64
}

// collect gathers the values of the succeeded records: TTFT, TPOT (of
// those with more than one output token), the pooled ITL gaps, E2EL,
// client queue time and E2EL plus queue time.
func collect(recs []Record) samples {
	var v samples
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		v.ok = append(v.ok, r)
		v.ttft = append(v.ttft, r.TTFT().Seconds())
		v.e2el = append(v.e2el, r.E2EL().Seconds())
		if r.OutputTokens > 1 {
			v.tpot = append(v.tpot, (r.End-r.FirstToken).Seconds()/float64(r.OutputTokens-1))
		}
		for _, g := range r.ITL {
			v.itl = append(v.itl, g.Seconds())
		}
		v.queue = append(v.queue, r.QueueTime.Seconds())
		v.e2elq = append(v.e2elq, (r.E2EL() + r.QueueTime).Seconds())
	}
	return v
}

// maxChunksPerSecond is vLLM's max_output_tokens_per_s: every chunk
// timestamp (the first chunk, then each ITL gap added) counts once in the
// 1-second bucket ⌊(t − earliest start)/1 s⌋, and the result is the
// fullest bucket.
func maxChunksPerSecond(recs []*Record) float64 {
	if len(recs) == 0 {
		return 0
	}
	t0 := recs[0].Start
	for _, r := range recs {
		t0 = min(t0, r.Start)
	}
	buckets := map[int64]int{}
	peak := 0
	add := func(t time.Duration) {
		if t < t0 {
			return
		}
		b := int64((t - t0) / time.Second)
		buckets[b]++
		peak = max(peak, buckets[b])
	}
	for _, r := range recs {
		if r.Chunks == 0 {
			continue
		}
		t := r.FirstToken
		add(t)
		for _, g := range r.ITL {
			t += g
			add(t)
		}
	}
	return float64(peak)
}

// maxConcurrent is the peak number of requests in flight, each over
// [Start, End): a sweep over the endpoints with ends before starts at the
// same instant.
func maxConcurrent(recs []*Record) int {
	type event struct {
		t time.Duration
		d int
	}
	ev := make([]event, 0, 2*len(recs))
	for _, r := range recs {
		ev = append(ev, event{r.Start, +1}, event{r.Start + r.E2EL(), -1})
	}
	slices.SortFunc(ev, func(a, b event) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d)
	})
	cur, peak := 0, 0
	for _, e := range ev {
		cur += e.d
		peak = max(peak, cur)
	}
	return peak
}

// Formulas lists, in words, how each metric is computed, for --help and
// the README.
func Formulas() []string {
	return []string{
		"TTFT = arrival of the first streamed chunk − time the request was sent (after any client-side queue); any chunk counts, even one without text",
		"E2EL = arrival of the last streamed chunk − time the request was sent (not the close of the connection)",
		"TPOT = (E2EL − TTFT) / (output tokens − 1), per request, only for requests with more than one output token",
		"ITL = gap between consecutive chunks, pooled over all requests (a chunk of several tokens is one gap)",
		"client_queue_time = time from a request's arrival to its send, waiting for a slot under --max-concurrency; e2el_including_client_queue = E2EL + client_queue_time",
		"statistics: mean, median, population std, p90/p95/p99 and requested percentiles (numpy linear interpolation), max; all 0 when there are no values",
		"request_throughput = completed requests / duration; duration runs from the start of the arrival schedule to the last completion",
		"output_throughput = Σ output tokens / duration; total_token_throughput = (Σ input + Σ output tokens) / duration; tokens as the target reports them, else counted from the prompt and the chunks",
		"request_goodput = requests meeting every SLO (ttft, tpot, e2el; TPOT 0 for ≤ 1 output token) / duration",
		"max_output_tokens_per_s = most chunk timestamps in one 1-second bucket counted from the earliest send (one per chunk, as vLLM counts)",
		"max_concurrent_requests = peak number of requests in flight, each over [send, last chunk)",
		"mean_concurrency = Σ E2EL / duration",
		"only completed requests enter the statistics, totals, peaks and goodput; failed requests are counted",
	}
}
