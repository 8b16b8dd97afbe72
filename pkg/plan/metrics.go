package plan

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Series is one sample line of a Prometheus text exposition.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the Prometheus text exposition format (version
// 0.0.4): comments and blank lines are skipped; each other line is
// NAME[{LABELS}] VALUE [TIMESTAMP]. A malformed line is an error naming
// its number.
func ParseMetrics(r io.Reader) ([]Series, error) {
	var out []Series
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSeries(line)
		if err != nil {
			return nil, fmt.Errorf("%w: metrics line %d: %v: %q", ErrMetrics, ln, err, truncate(line, 120))
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMetrics, err)
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func parseSeries(line string) (Series, error) {
	var s Series
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		end, labels, err := parseLabels(rest)
		if err != nil {
			return s, err
		}
		s.Labels, rest = labels, rest[end:]
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := parseValue(f[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

func parseValue(t string) (float64, error) {
	switch t {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", t)
	}
	return v, nil
}

// parseLabels reads {a="x",b="y"} and returns the index after '}'.
func parseLabels(s string) (int, map[string]string, error) {
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return 0, nil, fmt.Errorf("unterminated labels")
		}
		if s[i] == '}' {
			return i + 1, labels, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return 0, nil, fmt.Errorf("label without '='")
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		if i >= len(s) || s[i] != '"' {
			return 0, nil, fmt.Errorf("label %s: value not quoted", name)
		}
		i++
		var b strings.Builder
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return 0, nil, fmt.Errorf("label %s: unterminated value", name)
		}
		i++
		labels[name] = b.String()
	}
}

// A metric is read under the names the engines give it, first match wins:
// vLLM (V1 names, then V0's), SGLang, kvq serve, llama.cpp's llama-server.
var (
	namesUsage = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "kvq:kv_cache_usage_perc", "llamacpp:kv_cache_usage_ratio"}
	namesRun   = []string{"vllm:num_requests_running", "sglang:num_running_reqs", "kvq:num_requests_running", "llamacpp:requests_processing"}
	namesWait  = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "kvq:num_requests_waiting", "llamacpp:requests_deferred"}
	namesPre   = []string{"vllm:num_preemptions_total", "vllm:num_preemptions", "kvq:num_preemptions_total"}
	namesIn    = []string{"vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "kvq:prompt_tokens_total", "llamacpp:prompt_tokens_total"}
	namesOut   = []string{"vllm:generation_tokens_total", "sglang:generation_tokens_total", "kvq:generation_tokens_total", "llamacpp:tokens_predicted_total"}
	namesLenIn = []string{"vllm:request_prompt_tokens"}
	namesTTFT  = []string{"vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds", "kvq:time_to_first_token_seconds"}
	namesITL   = []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds", "kvq:inter_token_latency_seconds"}
	namesE2E   = []string{"vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "kvq:e2e_request_latency_seconds"}
	// namesDone count finished requests by their finished_reason label
	// (stop, length, abort, error).
	namesDone = []string{"vllm:request_success_total", "kvq:request_success_total"}
	namesReqs = []string{"vllm:request_success_total", "kvq:request_success_total", "sglang:num_requests_total"}
)

// Snapshot is one scrape reduced to what the plan reads. Gauges are summed
// over label sets (several models or caches), except usage, which is the
// largest.
type Snapshot struct {
	Time time.Time
	// Engine is the metric family found ("vllm", "sglang", "kvq",
	// "llamacpp"), "" when none.
	Engine                  string
	Usage                   float64 // KV cache usage, 0..1 (NaN when absent)
	Running, Waiting        float64
	Preemptions             float64 // counter (NaN when absent)
	PromptTokens, GenTokens float64 // counters
	Requests                float64 // finished requests counter
	PromptLen, TTFT         *Histogram
	// ITL (inter-token latency, or vLLM V0's and SGLang's time per output
	// token) and E2E (request latency) are nil when absent.
	ITL, E2E *Histogram
	// Finished counts finished requests by finished_reason (vLLM's and
	// kvq serve's request_success_total); nil when absent.
	Finished map[string]float64
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations
// ≤ Bounds[i].
type Histogram struct {
	Bounds, Counts []float64
	Sum, Count     float64
}

// Sub is h − o (the observations between two scrapes of a counter).
func (h *Histogram) Sub(o *Histogram) *Histogram {
	if h == nil {
		return nil
	}
	if o == nil || !slices.Equal(h.Bounds, o.Bounds) || h.Count < o.Count {
		return h // no earlier scrape, other buckets, or a counter reset
	}
	d := &Histogram{Bounds: h.Bounds, Sum: h.Sum - o.Sum, Count: h.Count - o.Count}
	for i := range h.Counts {
		d.Counts = append(d.Counts, h.Counts[i]-o.Counts[i])
	}
	return d
}

// Quantile estimates the q-quantile (0..1) exactly as Prometheus'
// histogram_quantile does (promql/quantile.go, classic buckets): the
// observations are the +Inf bucket's count; the rank q·n falls in the
// first bucket whose cumulative count reaches it, and the value is
// interpolated linearly between that bucket's lower and upper bounds (the
// lower bound of the first bucket is 0, unless its upper bound is ≤ 0,
// which is then returned); a rank in the +Inf bucket returns the highest
// finite bound. Counts that decrease (a scrape racing an observation) are
// raised to be monotonic first. NaN without data or without a +Inf
// bucket; -Inf for q < 0 and +Inf for q > 1.
func (h *Histogram) Quantile(q float64) float64 {
	if h == nil || len(h.Bounds) == 0 || len(h.Counts) != len(h.Bounds) || math.IsNaN(q) {
		return math.NaN()
	}
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	last := len(h.Bounds) - 1
	if !math.IsInf(h.Bounds[last], 1) || len(h.Bounds) < 2 {
		return math.NaN()
	}
	counts := slices.Clone(h.Counts)
	for i := 1; i < len(counts); i++ {
		counts[i] = math.Max(counts[i], counts[i-1])
	}
	n := counts[last]
	if n <= 0 {
		return math.NaN()
	}
	rank := q * n
	b := sort.SearchFloat64s(counts, rank)
	if b >= last {
		return h.Bounds[last-1]
	}
	if b == 0 && h.Bounds[0] <= 0 {
		return h.Bounds[0]
	}
	start, end, count := 0.0, h.Bounds[b], counts[b]
	if b > 0 {
		start = h.Bounds[b-1]
		count -= counts[b-1]
		rank -= counts[b-1]
	}
	return start + (end-start)*(rank/count)
}

// Mean is Sum/Count (NaN without data).
func (h *Histogram) Mean() float64 {
	if h == nil || h.Count <= 0 {
		return math.NaN()
	}
	return h.Sum / h.Count
}

// Reduce turns parsed series into a Snapshot.
func Reduce(series []Series, at time.Time) Snapshot {
	s := Snapshot{Time: at, Usage: math.NaN(), Preemptions: math.NaN()}
	pick := func(names []string, max bool) (float64, string) {
		for _, n := range names {
			v, found := 0.0, false
			for _, x := range series {
				if x.Name != n {
					continue
				}
				if max && found {
					v = math.Max(v, x.Value)
				} else {
					v += x.Value
				}
				found = true
			}
			if found {
				return v, n
			}
		}
		return math.NaN(), ""
	}
	var name string
	s.Usage, name = pick(namesUsage, true)
	if name != "" {
		s.Engine = name[:strings.IndexByte(name, ':')]
	}
	s.Running, _ = pick(namesRun, false)
	s.Waiting, _ = pick(namesWait, false)
	s.Preemptions, _ = pick(namesPre, false)
	s.PromptTokens, _ = pick(namesIn, false)
	s.GenTokens, _ = pick(namesOut, false)
	s.Requests, _ = pick(namesReqs, false)
	if s.Engine == "" {
		for _, names := range [][]string{namesRun, namesIn} {
			if _, n := pick(names, false); n != "" {
				s.Engine = n[:strings.IndexByte(n, ':')]
				break
			}
		}
	}
	s.PromptLen = histogram(series, namesLenIn)
	s.TTFT = histogram(series, namesTTFT)
	s.ITL = histogram(series, namesITL)
	s.E2E = histogram(series, namesE2E)
	s.Finished = byReason(series, namesDone)
	return s
}

// histogram sums the first family of names found over its label sets.
func histogram(series []Series, names []string) *Histogram {
	for _, n := range names {
		byLE := map[float64]float64{}
		var h Histogram
		found := false
		for _, x := range series {
			switch x.Name {
			case n + "_bucket":
				le, err := parseValue(x.Labels["le"])
				if err != nil {
					continue
				}
				byLE[le] += x.Value
				found = true
			case n + "_sum":
				h.Sum += x.Value
			case n + "_count":
				h.Count += x.Value
			}
		}
		if !found {
			continue
		}
		for b := range byLE {
			h.Bounds = append(h.Bounds, b)
		}
		sort.Float64s(h.Bounds)
		for _, b := range h.Bounds {
			h.Counts = append(h.Counts, byLE[b])
		}
		return &h
	}
	return nil
}

// byReason sums the first family of names found by its finished_reason
// label; nil when none is found.
func byReason(series []Series, names []string) map[string]float64 {
	for _, n := range names {
		var out map[string]float64
		for _, x := range series {
			if x.Name != n {
				continue
			}
			if out == nil {
				out = map[string]float64{}
			}
			out[x.Labels["finished_reason"]] += x.Value
		}
		if out != nil {
			return out
		}
	}
	return nil
}

// ScrapeOptions configure Scrape.
type ScrapeOptions struct {
	// Duration is how long to sample (default 30 s), Interval between
	// scrapes (default 1 s).
	Duration, Interval time.Duration
	// Client makes the requests (default: a client with a 5 s timeout).
	Client *http.Client
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Progress, when set, is called after each scrape.
	Progress func(done, total int)
}

// Scrape samples url's /metrics (url is a server's base URL, or the
// metrics URL itself) for opts.Duration and returns the snapshots. It
// stops early, with what it has, when ctx ends; a scrape that fails or
// does not parse is an error.
func Scrape(ctx context.Context, url string, opts ScrapeOptions) ([]Snapshot, error) {
	if opts.Duration <= 0 {
		opts.Duration = 30 * time.Second
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if !strings.HasSuffix(strings.TrimRight(url, "/"), "/metrics") {
		url = strings.TrimRight(url, "/") + "/metrics"
	}
	n := max(2, int(opts.Duration/opts.Interval)+1)
	var out []Snapshot
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-tick.C:
			}
		}
		snap, err := ScrapeOnce(ctx, opts.Client, url, opts.APIKey)
		if err != nil {
			return out, err
		}
		out = append(out, snap)
		if opts.Progress != nil {
			opts.Progress(i+1, n)
		}
	}
	return out, nil
}

// MetricsURL is base's /metrics: base itself when it already ends so.
func MetricsURL(base string) string {
	if strings.HasSuffix(strings.TrimRight(base, "/"), "/metrics") {
		return base
	}
	return strings.TrimRight(base, "/") + "/metrics"
}

// ScrapeOnce reads url (a /metrics URL) once with client, sending apiKey
// as a bearer token when set.
func ScrapeOnce(ctx context.Context, client *http.Client, url, apiKey string) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrMetrics, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: scrape %s: %w", ErrMetrics, url, err)
	}
	series, err := ParseMetrics(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("%w: scrape %s: HTTP %d", ErrMetrics, url, resp.StatusCode)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return Reduce(series, time.Now()), nil
}
