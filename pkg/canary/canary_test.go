package canary_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/kvqlabs/kvq/pkg/eval"
)

// fakeEngine is a test double of a serving engine: kvq serve's metric
// names, advancing by one batch of finished requests at every scrape, and
// an OpenAI completions endpoint answering with answer(prompt).
type fakeEngine struct {
	ttft      float64 // seconds, every request's
	errEvery  int     // every errEvery-th request finishes with error (0: none)
	fail500   bool    // completions answer 500
	answer    func(prompt string) string
	mu        sync.Mutex
	scrapes   int
	requests  int
	errors    int
	ttftObs   []float64
	completes atomic.Int64
}

var ttftBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.scrapes > 0 { // 20 requests finished since the last scrape
			for range 20 {
				f.requests++
				if f.errEvery > 0 && f.requests%f.errEvery == 0 {
					f.errors++
				}
				f.ttftObs = append(f.ttftObs, f.ttft)
			}
		}
		f.scrapes++
		fmt.Fprintf(w, "# TYPE kvq:kv_cache_usage_perc gauge\nkvq:kv_cache_usage_perc{cache=\"x\"} 0.25\n")
		fmt.Fprintf(w, "kvq:num_requests_running{cache=\"x\"} 1\nkvq:num_requests_waiting{cache=\"x\"} 0\nkvq:num_preemptions_total{cache=\"x\"} 0\n")
		fmt.Fprintf(w, "kvq:request_success_total{cache=\"x\",finished_reason=\"stop\"} %d\n", f.requests-f.errors)
		fmt.Fprintf(w, "kvq:request_success_total{cache=\"x\",finished_reason=\"abort\"} 0\n")
		fmt.Fprintf(w, "kvq:request_success_total{cache=\"x\",finished_reason=\"error\"} %d\n", f.errors)
		for _, name := range []string{"kvq:time_to_first_token_seconds", "kvq:inter_token_latency_seconds"} {
			sum := 0.0
			for _, b := range ttftBounds {
				n := 0
				for _, o := range f.ttftObs {
					if o <= b {
						n++
					}
				}
				fmt.Fprintf(w, "%s_bucket{cache=\"x\",le=\"%g\"} %d\n", name, b, n)
			}
			for _, o := range f.ttftObs {
				sum += o
			}
			fmt.Fprintf(w, "%s_bucket{cache=\"x\",le=\"+Inf\"} %d\n%s_sum{cache=\"x\"} %g\n%s_count{cache=\"x\"} %d\n", name, len(f.ttftObs), name, sum, name, len(f.ttftObs))
		}
	case "/v1/completions":
		f.completes.Add(1)
		if f.fail500 {
			http.Error(w, `{"error":{"message":"injected"}}`, http.StatusInternalServerError)
			return
		}
		var req struct {
			Prompt string `json:"prompt"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		text := f.answer(req.Prompt)
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "text_completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "text": text, "finish_reason": "stop"}}})
	default:
		http.NotFound(w, r)
	}
}

// probeSet is a tasks file: n items answering "yes" (exact match).
func probeSet(t *testing.T, n int) []eval.Suite {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"suite":"qa","prompt":"question %d","reference":"yes","metric":"exact"}`+"\n", i)
	}
	s, err := eval.ParseTasks([]byte(b.String()), "probe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func yes(string) string { return "yes" }

func serveFake(t *testing.T, f *fakeEngine) string {
	t.Helper()
	if f.answer == nil {
		f.answer = yes
	}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return s.URL
}

// fastPolicy judges after 2 windows of 20 requests and 6 probe items.
func fastPolicy() canary.Policy {
	p := canary.DefaultPolicy()
	p.MinWindows, p.MinSamples, p.MinRequests = 2, 6, 5
	return p
}

// watch judges base against cand in 50 ms windows until the first
// promote or rollback (the doubles advance per scrape, so the windows, not
// the clock, decide).
func watch(t *testing.T, base, cand string, probe *canary.ProbeOptions, act *canary.Act) (*canary.Report, []*canary.Report) {
	t.Helper()
	var reps []*canary.Report
	rep, err := canary.Watch(context.Background(), canary.Options{
		Baseline: canary.Endpoint{URL: base}, Candidate: canary.Endpoint{URL: cand},
		Duration: 10 * time.Second, StopEarly: true, Window: 50 * time.Millisecond, Policy: fastPolicy(), Probe: probe, Act: act,
	}, func(r *canary.Report) { reps = append(reps, r) })
	if err != nil {
		t.Fatal(err)
	}
	return rep, reps
}

func gate(rep *canary.Report, metric string) canary.GateResult {
	for _, g := range rep.Gates {
		if g.Gate.Metric == metric {
			return g
		}
	}
	return canary.GateResult{}
}

func TestWatchPromotesEqualEngines(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	cand := serveFake(t, &fakeEngine{ttft: 0.03})
	rep, reps := watch(t, base, cand, &canary.ProbeOptions{Suites: probeSet(t, 6), RPM: 60000}, nil)
	if rep.Result.Verdict != canary.Promote || rep.Kind != "final" || rep.ExitCode() != 0 {
		t.Fatalf("verdict %s (%s), kind %s, want a final promote", rep.Result.Verdict, rep.Result.Reasons, rep.Kind)
	}
	if reps[0].Result.Verdict != canary.Hold {
		t.Errorf("first window's verdict %s, want hold (1 of 2 windows)", reps[0].Result.Verdict)
	}
	if rep.Probe == nil || rep.Probe.Items != 6 || rep.Probe.Regressed != 0 || rep.Probe.ExactDrift != 0 {
		t.Errorf("probe %+v, want 6 items, no flips", rep.Probe)
	}
	if g := gate(rep, "ttft-p95"); g.Status != canary.StatusPass || math.Abs(g.Value-1) > 1e-9 {
		t.Errorf("ttft-p95 gate %+v, want a pass at ratio 1", g)
	}
}

func TestWatchRollsBackOnLatency(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	cand := serveFake(t, &fakeEngine{ttft: 0.4}) // an injected TTFT
	rep, reps := watch(t, base, cand, nil, nil)
	if rep.Result.Verdict != canary.Rollback || rep.ExitCode() != 3 {
		t.Fatalf("verdict %s (%s), want rollback", rep.Result.Verdict, rep.Result.Reasons)
	}
	g := gate(rep, "ttft-p95")
	if g.Status != canary.StatusFail || !strings.Contains(g.Message, "2 windows in a row") {
		t.Errorf("ttft-p95 gate %+v, want a failure in 2 windows in a row", g)
	}
	// One slow window is not yet a rollback.
	if reps[0].Result.Verdict == canary.Rollback {
		t.Errorf("rollback after one window: %s", reps[0].Result.Reasons)
	}
	// p95 of a window of 20 observations at 0.4 s: in the (0.25, 0.5]
	// bucket, 0.25 + 0.25·19/20; the baseline's in (0.02, 0.04].
	if want := 0.25 + 0.25*0.95; math.Abs(rep.Interval.Candidate.TTFT.P95-want) > 1e-9 {
		t.Errorf("candidate TTFT p95 %g, want %g", rep.Interval.Candidate.TTFT.P95, want)
	}
	if g := gate(rep, canary.GateFlips); g.Status != canary.StatusNA {
		t.Errorf("flips without a probe: %+v, want n/a", g)
	}
}

func TestWatchRollsBackOnErrors(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	cand := serveFake(t, &fakeEngine{ttft: 0.03, errEvery: 4}) // 25% errors
	rep, _ := watch(t, base, cand, nil, nil)
	g := gate(rep, canary.GateErrorRate)
	if rep.Result.Verdict != canary.Rollback || g.Status != canary.StatusFail || g.PValue == nil || *g.PValue >= 0.05 {
		t.Fatalf("verdict %s, error-rate gate %+v, want a significant failure", rep.Result.Verdict, g)
	}
	if math.Abs(g.Candidate-0.25) > 1e-9 || g.Baseline != 0 {
		t.Errorf("error rates %g vs %g, want 0.25 vs 0", g.Candidate, g.Baseline)
	}
}

func TestWatchRollsBackOnProbeErrors(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	bad := &fakeEngine{ttft: 0.03, fail500: true}
	cand := serveFake(t, bad)
	rep, _ := watch(t, base, cand, &canary.ProbeOptions{Suites: probeSet(t, 12), RPM: 60000}, nil)
	g := gate(rep, canary.GateProbeErrorRate)
	if rep.Result.Verdict != canary.Rollback || g.Status != canary.StatusFail {
		t.Fatalf("verdict %s, probe-error-rate gate %+v, want a failure", rep.Result.Verdict, g)
	}
	if rep.Probe.CandidateErrors == 0 || rep.Probe.BaselineErrors != 0 || bad.completes.Load() == 0 {
		t.Errorf("probe %+v", rep.Probe)
	}
}

func TestWatchRollsBackOnFlipsAndActs(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	// The candidate answers wrong on every other question: 6 of 12 flip.
	cand := serveFake(t, &fakeEngine{ttft: 0.03, answer: func(p string) string {
		var i int
		fmt.Sscanf(p, "question %d", &i)
		if i%2 == 0 {
			return "no"
		}
		return "yes"
	}})
	var calls []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/admin/route" {
			b, _ := io.ReadAll(r.Body)
			calls = append(calls, r.Method+" "+r.Header.Get("Authorization")+" "+string(b))
			w.Write([]byte(`{"cache":"int2","percent":0}`))
			return
		}
		http.Redirect(w, r, cand+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer admin.Close()
	rep, _ := watch(t, base, admin.URL, &canary.ProbeOptions{Suites: probeSet(t, 12), RPM: 60000}, &canary.Act{RouteCache: "int2", APIKey: "k"})
	g := gate(rep, canary.GateFlips)
	if rep.Result.Verdict != canary.Rollback || g.Status != canary.StatusFail || g.Value != 6 {
		t.Fatalf("verdict %s, flips gate %+v, want 6 significant flips", rep.Result.Verdict, g)
	}
	if !strings.Contains(g.Message, "qa #1 (exact)") {
		t.Errorf("flips message %q does not name the first flip", g.Message)
	}
	if len(calls) != 1 || !strings.HasPrefix(calls[0], `POST Bearer k {"cache":"int2","percent":0,"reason":"kvq canary: rollback (flips: `) {
		t.Errorf("admin calls %q, want one POST of percent 0 with the key", calls)
	}
	if len(rep.Actions) != 1 || !rep.Actions[0].OK || rep.Actions[0].Cache != "int2" {
		t.Errorf("actions %+v", rep.Actions)
	}
}

func TestReportMatchesSchema(t *testing.T) {
	base := serveFake(t, &fakeEngine{ttft: 0.03})
	cand := serveFake(t, &fakeEngine{ttft: 0.4, answer: func(string) string { return "no" }})
	rep, reps := watch(t, base, cand, &canary.ProbeOptions{Suites: probeSet(t, 6), RPM: 60000}, &canary.Act{RouteCache: "c"})
	for _, r := range append(reps, rep, canary.NewVerdictServerReport()) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := eval.ValidateJSONSchema(canary.JSONSchema, b); err != nil {
			t.Errorf("window %d: %v\n%s", r.Window, err, b)
		}
	}
	// The schema is strict: an unknown field fails.
	if err := eval.ValidateJSONSchema(canary.JSONSchema, []byte(`{"schema":"kvq.canary/v1","extra":1}`)); err == nil {
		t.Error("an object with an unknown field validates")
	}
}

func TestVerdictServer(t *testing.T) {
	vs := canary.NewVerdictServer()
	s := httptest.NewServer(vs)
	defer s.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Argo Rollouts' web provider reads jsonPath {$.result.verdict}.
	verdict := func() string {
		_, body := get("/verdict")
		var v struct {
			Result struct{ Verdict string } `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v.Result.Verdict
	}
	for _, c := range []struct {
		verdict          string
		flagger, promote int
	}{
		{canary.Hold, 200, 503},
		{canary.Promote, 200, 200},
		{canary.Rollback, 503, 503},
	} {
		if c.verdict != canary.Hold {
			vs.Update(&canary.Report{Schema: canary.Schema, Kind: "window", Window: 4, Result: canary.Result{Verdict: c.verdict, Reasons: []string{"r"}},
				Actions: []canary.Action{{OK: true}}})
		}
		if got := verdict(); got != c.verdict {
			t.Errorf("/verdict result.verdict %q, want %q", got, c.verdict)
		}
		if code, _ := get("/flagger"); code != c.flagger {
			t.Errorf("%s: /flagger %d, want %d", c.verdict, code, c.flagger)
		}
		// Flagger POSTs its webhooks with the canary's name and phase.
		resp, err := http.Post(s.URL+"/flagger", "application/json",
			strings.NewReader(`{"name":"llm","namespace":"prod","phase":"Progressing","checksum":"85d557f47b","metadata":{"k":"v"}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.flagger {
			t.Errorf("%s: POST /flagger %d, want %d", c.verdict, resp.StatusCode, c.flagger)
		}
		if code, _ := get("/flagger/promote"); code != c.promote {
			t.Errorf("%s: /flagger/promote %d, want %d", c.verdict, code, c.promote)
		}
		_, m := get("/metrics")
		if !strings.Contains(m, fmt.Sprintf("kvq_canary_verdict{verdict=%q} 1", c.verdict)) {
			t.Errorf("%s: /metrics lacks the verdict:\n%s", c.verdict, m)
		}
	}
	if _, m := get("/metrics"); !strings.Contains(m, "kvq_canary_actions_total 1\n") {
		t.Errorf("/metrics lacks the action count:\n%s", m)
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := canary.ParsePolicy([]byte("min_windows: 4\nlatency_floor: 10ms\ngates:\n  - metric: ttft-p99\n    max: 2\n  - metric: flips\n    max: 1\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.MinWindows != 4 || time.Duration(p.LatencyFloor) != 10*time.Millisecond || len(p.Gates) != 2 || p.Gates[0].Significant || !p.Gates[1].Significant || p.MinSamples != 20 {
		t.Errorf("policy %+v", p)
	}
	for _, bad := range []string{"gates: []", "gates:\n  - metric: nope\n    max: 1", "gates:\n  - metric: kld", "{\"gates\":[{\"metric\":\"kld\",\"max\":1,\"min\":0}]}", "alpha: 2\ngates:\n  - metric: kld\n    max: 1"} {
		if _, err := canary.ParsePolicy([]byte(bad), "bad.yaml"); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("ParsePolicy(%q) = %v, want an error naming the file", bad, err)
		}
	}
	if _, err := canary.ParseGate("ttft-p95=x"); err == nil {
		t.Error("ParseGate(ttft-p95=x) did not fail")
	}
}

// TestDocsWiring: the Argo Rollouts templates in docs/canary.md read a
// JSON path that /verdict's answer holds (a verdict string), and the
// Flagger webhooks call the endpoints the verdict server answers.
func TestDocsWiring(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "canary.md"))
	if err != nil {
		t.Fatal(err)
	}
	vs := canary.NewVerdictServer()
	vs.Update(&canary.Report{Schema: canary.Schema, Kind: "window", Window: 1, Result: canary.Result{Verdict: canary.Rollback, Reasons: []string{}}})
	rec := httptest.NewRecorder()
	vs.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/verdict", nil))
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`jsonPath: "\{\$\.([a-z_.]+)\}"`).FindAllStringSubmatch(string(doc), -1)
	if len(paths) < 2 {
		t.Fatalf("docs/canary.md has %d Argo jsonPaths, want the two templates'", len(paths))
	}
	for _, m := range paths {
		v := body
		for _, k := range strings.Split(m[1], ".") {
			obj, _ := v.(map[string]any)
			v = obj[k]
		}
		if v != canary.Rollback {
			t.Errorf("jsonPath {$.%s} reads %v from /verdict, want the verdict %q", m[1], v, canary.Rollback)
		}
	}
	for _, m := range regexp.MustCompile(`url: http://[^/\s]+(/\S+)`).FindAllStringSubmatch(string(doc), -1) {
		rec := httptest.NewRecorder()
		vs.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, m[1], strings.NewReader(`{"name":"llm","namespace":"llm","phase":"Progressing"}`)))
		if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
			t.Errorf("docs/canary.md calls %s: HTTP %d", m[1], rec.Code)
		}
	}
}
