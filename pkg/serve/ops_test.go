package serve_test

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// TestRoute: 1000 requests for plain NAME with int8 at 10% land on int8
// as often as the seeded draws say (the exact count, whatever the order
// the concurrent requests drew in: request k's draw depends only on the
// seed and k), which is within 4 standard deviations of 100 (σ = √(1000 ·
// 0.1 · 0.9) ≈ 9.5, so [62, 138]); each response's field and header agree,
// and NAME@CACHE is never split.
func TestRoute(t *testing.T) {
	const seed, n = 7, 1000
	f := newServer(t, serve.Options{Route: map[string]float64{"int8": 0.10}, RouteSeed: seed})
	want := 0
	for k := range uint64(n) {
		if float64(rand.NewPCG(seed, k).Uint64()>>11)/(1<<53) < 0.10 {
			want++
		}
	}
	if want < 62 || want > 138 {
		t.Fatalf("the draws give %d of %d, outside [62, 138]: the generator is off", want, n)
	}
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				code, hdr, b := f.post(t, "/v1/completions", `{"model": "tiny", "prompt": [1, 2], "max_tokens": 1}`)
				c := decode(t, b)
				if code != 200 || c.Cache != hdr.Get("X-KVQ-Cache") {
					t.Errorf("status %d, field %q, header %q", code, c.Cache, hdr.Get("X-KVQ-Cache"))
				}
				mu.Lock()
				count[c.Cache]++
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if count["int8"] != want || count["fp16"] != n-want {
		t.Errorf("split %v, want int8 %d, fp16 %d", count, want, n-want)
	}
	for range 20 {
		if _, hdr, _ := f.post(t, "/v1/completions", `{"model": "tiny@fp16", "prompt": [1], "max_tokens": 1}`); hdr.Get("X-KVQ-Cache") != "fp16" {
			t.Fatalf("tiny@fp16 routed to %s", hdr.Get("X-KVQ-Cache"))
		}
	}
}

// exposition line: a comment (HELP or TYPE), or name{labels} value.
var (
	helpLine   = regexp.MustCompile(`^# HELP (kvq[:_][a-zA-Z0-9_:]+) \S.*$`)
	typeLine   = regexp.MustCompile(`^# TYPE (kvq[:_][a-zA-Z0-9_:]+) (gauge|counter|histogram)$`)
	sampleLine = regexp.MustCompile(`^(kvq[:_][a-zA-Z0-9_:]+)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\} (\S+)$`)
)

// scrape reads /metrics and checks every line's syntax; it returns the
// samples by series (name and labels as written).
func scrape(t *testing.T, f *fixture) map[string]float64 {
	t.Helper()
	code, hdr, b := f.get(t, "/metrics")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d, %q", code, hdr.Get("Content-Type"))
	}
	out := map[string]float64{}
	types := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case helpLine.MatchString(line):
		case typeLine.MatchString(line):
			m := typeLine.FindStringSubmatch(line)
			types[m[1]] = m[2]
		case sampleLine.MatchString(line):
			m := sampleLine.FindStringSubmatch(line)
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil && m[3] != "+Inf" {
				t.Errorf("sample %q: value %q", line, m[3])
			}
			family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
			if types[family] == "" && types[m[1]] == "" {
				t.Errorf("sample %q before its TYPE", line)
			}
			if !strings.Contains(m[2], `model_name="tiny"`) || !strings.Contains(m[2], `cache="`) {
				t.Errorf("sample %q lacks the model_name and cache labels", line)
			}
			out[m[1]+"{"+m[2]+"}"] = v
		default:
			t.Errorf("not an exposition line: %q", line)
		}
	}
	for _, name := range []string{"kvq:num_requests_running", "kvq:num_requests_waiting", "kvq:kv_cache_usage_perc", "kvq:num_preemptions_total",
		"kvq:prompt_tokens_total", "kvq:generation_tokens_total", "kvq:request_success_total",
		"kvq:time_to_first_token_seconds", "kvq:inter_token_latency_seconds", "kvq:e2e_request_latency_seconds"} {
		if types[name] == "" {
			t.Errorf("no %s", name)
		}
		if !strings.Contains(serve.MetricsHelp, name) {
			t.Errorf("MetricsHelp does not describe %s", name)
		}
	}
	return out
}

// TestMetrics: the exposition parses line by line; counters grow by what
// the requests did (prompt and generated tokens, finish reasons), per
// cache; histogram buckets are cumulative and end at the count.
func TestMetrics(t *testing.T) {
	f := newServer(t, serve.Options{})
	before := scrape(t, f)
	lbl := `{model_name="tiny",cache="int8"}`
	for range 3 {
		f.post(t, "/v1/completions", `{"model": "tiny@int8", "prompt": [1, 2, 3, 4, 5], "max_tokens": 7, "ignore_eos": true, "stream": true}`)
	}
	after := scrape(t, f)
	for name, want := range map[string]float64{
		"kvq:prompt_tokens_total" + lbl: 15, "kvq:generation_tokens_total" + lbl: 21,
		`kvq:request_success_total{model_name="tiny",cache="int8",finished_reason="length"}`: 3,
		"kvq:time_to_first_token_seconds_count" + lbl:                                        3, "kvq:inter_token_latency_seconds_count" + lbl: 18,
		"kvq:e2e_request_latency_seconds_count" + lbl:                 3,
		`kvq:generation_tokens_total{model_name="tiny",cache="fp16"}`: 0,
	} {
		if d := after[name] - before[name]; d != want {
			t.Errorf("%s grew by %g, want %g", name, d, want)
		}
	}
	if after["kvq:kv_cache_capacity_bytes"+lbl] <= 0 {
		t.Errorf("capacity %g", after["kvq:kv_cache_capacity_bytes"+lbl])
	}
	for _, h := range []string{"kvq:time_to_first_token_seconds", "kvq:inter_token_latency_seconds", "kvq:e2e_request_latency_seconds"} {
		prefix := h + `_bucket{model_name="tiny",cache="int8",le="`
		var les []float64
		counts := map[float64]float64{}
		for k, v := range after {
			if s, ok := strings.CutPrefix(k, prefix); ok {
				le, _ := strconv.ParseFloat(strings.TrimSuffix(s, `"}`), 64) // "+Inf" parses as +Inf
				les = append(les, le)
				counts[le] = v
			}
		}
		if len(les) < 10 {
			t.Fatalf("%s: %d buckets", h, len(les))
		}
		sortFloats(les)
		for i := 1; i < len(les); i++ {
			if counts[les[i]] < counts[les[i-1]] {
				t.Errorf("%s: bucket le=%g has %g, below le=%g's %g", h, les[i], counts[les[i]], les[i-1], counts[les[i-1]])
			}
		}
		if top := counts[les[len(les)-1]]; top != after[h+"_count"+lbl] {
			t.Errorf("%s: +Inf bucket %g, count %g", h, top, after[h+"_count"+lbl])
		}
	}
	waitIdle(t, f.e)
	if got := scrape(t, f)["kvq:num_requests_running"+lbl]; got != 0 {
		t.Errorf("running %g after the requests", got)
	}
}

func sortFloats(v []float64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// TestShutdown: when Serve's context ends, /health turns 503, a stream in
// flight finishes within the grace, and Serve returns nil; past the grace
// a stream is cancelled (an error event, its engine request aborted).
func TestShutdown(t *testing.T) {
	m := loadModel(t)
	slowStep := engine.Options{Caches: specs(t, "fp16"), OnStep: func(engine.StepInfo) { time.Sleep(3 * time.Millisecond) }}
	for _, tc := range []struct {
		name      string
		grace     time.Duration
		maxTokens int
		finish    bool // the stream ends with its finish reason
	}{
		{"finishes in the grace", 5 * time.Second, 60, true},
		{"cancelled after the grace", 100 * time.Millisecond, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEngine(t, m, slowStep)
			f := start(t, e, serve.Options{ShutdownGrace: tc.grace})
			req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/completions",
				strings.NewReader(`{"prompt": "a", "stream": true, "ignore_eos": true, "max_tokens": `+strconv.Itoa(tc.maxTokens)+`}`))
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			sr := &streamReader{r: bufio.NewReader(resp.Body)}
			if _, err := sr.next(); err != nil {
				t.Fatal(err)
			}
			f.stop()
			h := f.s.Handler()
			deadline := time.Now().Add(2 * time.Second)
			code := 0
			for time.Now().Before(deadline) {
				rec := &recorder{header: http.Header{}}
				h.ServeHTTP(rec, httptestRequest("/health"))
				if code = rec.code; code == 503 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if code != 503 {
				t.Errorf("/health during shutdown: %d", code)
			}
			var last string
			events, sawErr := 1, false
			for {
				ev, err := sr.next()
				if err != nil {
					break
				}
				last = ev
				events++
				sawErr = sawErr || strings.Contains(ev, `"shutting_down"`)
				if ev == "[DONE]" {
					break
				}
			}
			select {
			case err := <-f.served:
				if err != nil {
					t.Errorf("Serve = %v", err)
				}
				f.served <- err // for the cleanup
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
			if tc.finish && (last != "[DONE]" || events != tc.maxTokens+1) {
				t.Errorf("stream: %d events, last %q; want %d tokens then [DONE]", events, last, tc.maxTokens)
			}
			if !tc.finish && (events > tc.maxTokens || !sawErr || last != "[DONE]") {
				t.Errorf("stream not cancelled: %d events, error event %v, last %q", events, sawErr, last)
			}
			waitIdle(t, e)
		})
	}
}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}

func httptestRequest(path string) *http.Request {
	r, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	return r
}
