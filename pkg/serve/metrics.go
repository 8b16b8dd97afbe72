package serve

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
)

// MetricsHelp describes what GET /metrics exposes, for a README or --help.
// Every series carries the labels model_name (the served name) and cache
// (the engine cache, a spec such as fp16 or k=int8,v=int4). The names are
// vLLM's under a kvq: prefix, so that dashboards and the scrapers of vllm
// bench read them after a prefix swap; the histograms use vLLM's bucket
// boundaries.
const MetricsHelp = `Gauges (the engine's state after its last step):
  kvq:num_requests_running      requests admitted to the cache's running batch (prefilling or decoding)
  kvq:num_requests_waiting      requests queued for admission, preempted ones included
  kvq:kv_cache_usage_perc       KV-cache usage, 0..1: bytes in use (blocks, fp16 windows, codec state) / the pool's capacity
  kvq:kv_cache_used_bytes       those bytes in use (kvq's own)
  kvq:kv_cache_capacity_bytes   the pool's capacity in bytes (kvq's own)
Counters:
  kvq:num_preemptions_total     sequences preempted (freed and queued to be recomputed) because the pool was full
  kvq:prompt_tokens_total       prompt tokens of the requests whose prefill completed (once per request, not again after a preemption)
  kvq:generation_tokens_total   tokens generated and returned (stop tokens excluded; a response's usage.completion_tokens summed)
  kvq:request_success_total     finished requests by finished_reason: stop (a stop token or string), length (max_tokens), abort (the client left or the server stopped), error
Histograms (seconds; _bucket{le}, _sum, _count):
  kvq:time_to_first_token_seconds   from the request's submission to the engine to the end of the step that produced its first token
                                    buckets 0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560
  kvq:inter_token_latency_seconds   between the steps that produced consecutive tokens of a request
                                    buckets 0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5 10 20 40 80
  kvq:e2e_request_latency_seconds   from submission to the request's end (its last token, stop or abort)
                                    buckets 0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680
Routes (kvq's own; label match: a route's header=, key= or model= match, "" every request):
  kvq_route_percent             the percentage of the served name's requests a route sends to its cache (one series per route; none without routes)
  kvq_route_changes_total       successful POST /admin/route requests that set the cache's routes
`

// Histogram bucket upper bounds, in seconds: vLLM's (vllm/v1/metrics/
// loggers.py), so that a histogram_quantile over kvq and over vLLM reads
// the same buckets.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
)

// Finish reasons of request_success_total, in exposition order.
var finishReasons = []string{"stop", "length", "abort", "error"}

// metric describes one family: name, type and HELP text.
type metric struct{ name, typ, help string }

// The families, in exposition order. The help texts say in one line what
// MetricsHelp says.
var (
	mRunning  = metric{"kvq:num_requests_running", "gauge", "Requests admitted to the cache's running batch (prefilling or decoding)."}
	mWaiting  = metric{"kvq:num_requests_waiting", "gauge", "Requests queued for admission, preempted ones included."}
	mUsage    = metric{"kvq:kv_cache_usage_perc", "gauge", "KV-cache usage: bytes in use over the pool's capacity (1 means full)."}
	mUsed     = metric{"kvq:kv_cache_used_bytes", "gauge", "KV-cache bytes in use: blocks, fp16 windows and codec state."}
	mCapacity = metric{"kvq:kv_cache_capacity_bytes", "gauge", "KV-cache capacity of the pool in bytes."}
	mPreempt  = metric{"kvq:num_preemptions_total", "counter", "Sequences preempted (freed, to be recomputed) because the pool was full."}
	mPrompt   = metric{"kvq:prompt_tokens_total", "counter", "Prompt tokens of requests whose prefill completed."}
	mGen      = metric{"kvq:generation_tokens_total", "counter", "Generated tokens returned to clients (stop tokens excluded)."}
	mSuccess  = metric{"kvq:request_success_total", "counter", "Finished requests by finish reason."}
	mTTFT     = metric{"kvq:time_to_first_token_seconds", "histogram", "Time from submission to the engine to the first token, in seconds."}
	mITL      = metric{"kvq:inter_token_latency_seconds", "histogram", "Time between consecutive tokens of a request, in seconds."}
	mE2E      = metric{"kvq:e2e_request_latency_seconds", "histogram", "Time from submission to the end of a request, in seconds."}
	mRoute    = metric{"kvq_route_percent", "gauge", "Percentage of the served name's requests a route sends to its cache (match: the route's match, empty for every request)."}
	mChanges  = metric{"kvq_route_changes_total", "counter", "Successful POST /admin/route requests that set the cache's routes."}
)

// histogram counts observations per bucket (not cumulative; the
// exposition sums them).
type histogram struct {
	bounds []float64
	counts []uint64 // len(bounds)+1: the last is above every bound
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

// cacheMetrics are the server-side series of one cache.
type cacheMetrics struct {
	prompt, gen    int64
	finished       map[string]int64
	ttft, itl, e2e histogram
}

// metrics holds the server-side series; the gauges and the preemption
// counter come from the engine's statistics at each scrape.
type metrics struct {
	model  string
	caches []string

	mu      sync.Mutex
	per     map[string]*cacheMetrics
	changes map[string]int64 // POST /admin/route by cache
}

func newMetrics(model string, caches []string) *metrics {
	m := &metrics{model: model, caches: caches, per: map[string]*cacheMetrics{}, changes: map[string]int64{}}
	for _, c := range caches {
		m.per[c] = &cacheMetrics{finished: map[string]int64{}, ttft: newHistogram(ttftBuckets), itl: newHistogram(itlBuckets), e2e: newHistogram(e2eBuckets)}
	}
	return m
}

func (m *metrics) with(cache string, f func(*cacheMetrics)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.per[cache]; c != nil {
		f(c)
	}
}

// token records a generated token that came at t, prev (zero for the
// first) after the previous one, start after submission.
func (m *metrics) token(cache string, start, prev, t time.Time) {
	m.with(cache, func(c *cacheMetrics) {
		c.gen++
		if prev.IsZero() {
			c.ttft.observe(t.Sub(start).Seconds())
		} else {
			c.itl.observe(t.Sub(prev).Seconds())
		}
	})
}

// routeChanged counts a change of cache's routes.
func (m *metrics) routeChanged(cache string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes[cache]++
}

func (m *metrics) prompt(cache string, n int) {
	m.with(cache, func(c *cacheMetrics) { c.prompt += int64(n) })
}

func (m *metrics) finish(cache, reason string, e2e time.Duration) {
	m.with(cache, func(c *cacheMetrics) {
		c.finished[reason]++
		c.e2e.observe(e2e.Seconds())
	})
}

// write writes the exposition (text format 0.0.4) of the server's series,
// the engine's pool statistics and the routes.
func (m *metrics) write(w io.Writer, pools []engine.PoolStats, routes []Route) error {
	bw := bufio.NewWriter(w)
	pool := func(cache string) engine.PoolStats {
		for _, p := range pools {
			if p.Cache == cache {
				return p
			}
		}
		return engine.PoolStats{}
	}
	labels := func(cache string, extra ...string) string {
		var b strings.Builder
		b.WriteString(`{model_name="`)
		b.WriteString(escapeLabel(m.model))
		b.WriteString(`",cache="`)
		b.WriteString(escapeLabel(cache))
		b.WriteByte('"')
		for i := 0; i+1 < len(extra); i += 2 {
			b.WriteString("," + extra[i] + `="` + escapeLabel(extra[i+1]) + `"`)
		}
		b.WriteByte('}')
		return b.String()
	}
	header := func(mt metric) {
		bw.WriteString("# HELP " + mt.name + " " + mt.help + "\n# TYPE " + mt.name + " " + mt.typ + "\n")
	}
	sample := func(name, lbl string, v float64) {
		bw.WriteString(name + lbl + " " + formatFloat(v) + "\n")
	}
	perPool := func(mt metric, f func(engine.PoolStats) float64) {
		header(mt)
		for _, c := range m.caches {
			sample(mt.name, labels(c), f(pool(c)))
		}
	}
	perPool(mRunning, func(p engine.PoolStats) float64 { return float64(p.Running) })
	perPool(mWaiting, func(p engine.PoolStats) float64 { return float64(p.Waiting) })
	perPool(mUsage, engine.PoolStats.Usage)
	perPool(mUsed, func(p engine.PoolStats) float64 { return float64(p.UsedBytes) })
	perPool(mCapacity, func(p engine.PoolStats) float64 { return float64(p.CapacityBytes) })
	perPool(mPreempt, func(p engine.PoolStats) float64 { return float64(p.Preemptions) })

	m.mu.Lock()
	defer m.mu.Unlock()
	header(mPrompt)
	for _, c := range m.caches {
		sample(mPrompt.name, labels(c), float64(m.per[c].prompt))
	}
	header(mGen)
	for _, c := range m.caches {
		sample(mGen.name, labels(c), float64(m.per[c].gen))
	}
	header(mSuccess)
	for _, c := range m.caches {
		for _, r := range finishReasons {
			sample(mSuccess.name, labels(c, "finished_reason", r), float64(m.per[c].finished[r]))
		}
	}
	for _, h := range []struct {
		mt  metric
		get func(*cacheMetrics) *histogram
	}{
		{mTTFT, func(c *cacheMetrics) *histogram { return &c.ttft }},
		{mITL, func(c *cacheMetrics) *histogram { return &c.itl }},
		{mE2E, func(c *cacheMetrics) *histogram { return &c.e2e }},
	} {
		header(h.mt)
		for _, c := range m.caches {
			hs := h.get(m.per[c])
			var cum uint64
			for i, b := range hs.bounds {
				cum += hs.counts[i]
				sample(h.mt.name+"_bucket", labels(c, "le", formatFloat(b)), float64(cum))
			}
			sample(h.mt.name+"_bucket", labels(c, "le", "+Inf"), float64(hs.n))
			sample(h.mt.name+"_sum", labels(c), hs.sum)
			sample(h.mt.name+"_count", labels(c), float64(hs.n))
		}
	}
	if len(routes) > 0 {
		header(mRoute)
		for _, rt := range routes {
			sample(mRoute.name, labels(rt.Cache, "match", rt.Match.String()), toPercent(rt.Share))
		}
	}
	header(mChanges)
	for _, c := range m.caches {
		sample(mChanges.name, labels(c), float64(m.changes[c]))
	}
	return bw.Flush()
}

// formatFloat writes a sample value as the exposition format spells it.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10) // byte counts whole
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// escapeLabel escapes a label value: backslash, double quote and newline.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
