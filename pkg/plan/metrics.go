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
	namesReqs  = []string{"vllm:request_success_total", "kvq:request_success_total", "sglang:num_requests_total"}
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
	if o == nil || !slices.Equal(h.Bounds, o.Bounds) {
		return h
	}
	d := &Histogram{Bounds: h.Bounds, Sum: h.Sum - o.Sum, Count: h.Count - o.Count}
	for i := range h.Counts {
		d.Counts = append(d.Counts, h.Counts[i]-o.Counts[i])
	}
	return d
}

// Quantile estimates the q-quantile (0..1) by linear interpolation within
// buckets, as Prometheus' histogram_quantile does; NaN without data.
func (h *Histogram) Quantile(q float64) float64 {
	if h == nil || h.Count <= 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	prevB, prevC := 0.0, 0.0
	for i, b := range h.Bounds {
		if h.Counts[i] >= rank {
			if math.IsInf(b, 1) {
				return prevB // the highest finite bound, as Prometheus
			}
			if h.Counts[i] == prevC {
				return b
			}
			return prevB + (b-prevB)*(rank-prevC)/(h.Counts[i]-prevC)
		}
		prevB, prevC = b, h.Counts[i]
	}
	return prevB
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
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMetrics, err)
		}
		if opts.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+opts.APIKey)
		}
		resp, err := opts.Client.Do(req)
		if err != nil {
			return out, fmt.Errorf("%w: scrape %s: %w", ErrMetrics, url, err)
		}
		series, err := ParseMetrics(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return out, fmt.Errorf("%w: scrape %s: HTTP %d", ErrMetrics, url, resp.StatusCode)
		}
		if err != nil {
			return out, fmt.Errorf("scrape %s: %w", url, err)
		}
		out = append(out, Reduce(series, time.Now()))
		if opts.Progress != nil {
			opts.Progress(i+1, n)
		}
	}
	return out, nil
}
