package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func snapshotFile(t *testing.T, name string, at time.Time) Snapshot {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	series, err := ParseMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	return Reduce(series, at)
}

func TestParseMetrics(t *testing.T) {
	s, err := ParseMetrics(strings.NewReader(`# HELP x y
a_total 3
b{l="v\"q",m="w"} 1.5e3 1700000000
c{le="+Inf"} +Inf

`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 || s[0].Name != "a_total" || s[0].Value != 3 || s[1].Labels["l"] != `v"q` || s[1].Value != 1500 || !math.IsInf(s[2].Value, 1) {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range []string{"novalue", `x{l="v} 1`, "x 1 2 3", "x abc", `x{l=v} 1`} {
		if _, err := ParseMetrics(strings.NewReader("ok 1\n" + bad + "\n")); !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestAnalyzeVLLM: two scrapes in vLLM's format a minute apart, of a
// KV-bound server (preemptions, the cache full, requests waiting, long
// prompts) and of one that is not (low usage, short chat requests).
func TestAnalyzeVLLM(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	bound := Analyze([]Snapshot{snapshotFile(t, "vllm-kvbound-0.txt", t0), snapshotFile(t, "vllm-kvbound-1.txt", t0.Add(time.Minute))}, nil)
	if bound.Verdict != KVBound || bound.Engine != "vllm" || bound.Preemptions != 31 || bound.UsageMax != 0.98 || bound.WaitingShare != 1 {
		t.Errorf("KV-bound scrape: %+v", bound)
	}
	// 80 requests between the scrapes: 290,000 prompt tokens, 60,000
	// generated; the 76th of 80 lies in the (10,000, 20,000] bucket.
	if tr := bound.Traffic; tr == nil || tr.Requests != 80 || math.Abs(tr.InputP95-19333.33) > 0.01 || tr.InputMean != 3625 || tr.OutputMean != 750 {
		t.Errorf("prompt lengths from the histogram: %+v", tr)
	}
	if !strings.Contains(strings.Join(bound.Evidence, "\n"), "31 requests were preempted") || bound.TTFTP95 <= 0 {
		t.Errorf("evidence %q, TTFT p95 %g", bound.Evidence, bound.TTFTP95)
	}
	idle := Analyze([]Snapshot{snapshotFile(t, "vllm-idle-0.txt", t0), snapshotFile(t, "vllm-idle-1.txt", t0.Add(time.Minute))}, nil)
	if idle.Verdict != NotKVBound || idle.UsageMax != 0.18 || idle.Preemptions != 0 {
		t.Errorf("idle scrape: %+v", idle)
	}
	if !strings.Contains(strings.Join(idle.Evidence, "\n"), "diluted") {
		t.Errorf("idle evidence %q", idle.Evidence)
	}
	if a := Analyze(nil, nil); a.Verdict != NoEvidence {
		t.Errorf("nothing: %+v", a)
	}
	if a := Analyze(nil, &Traffic{Source: "t", Requests: 10, InputP95: 16000, InputMean: 9000}); a.Verdict != Unclear || !strings.Contains(strings.Join(a.Evidence, " "), "long contexts") {
		t.Errorf("long traffic alone: %+v", a)
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := &Histogram{Bounds: []float64{1, 2, 4, math.Inf(1)}, Counts: []float64{10, 30, 40, 40}, Count: 40, Sum: 80}
	for _, c := range []struct{ q, want float64 }{{0.25, 1}, {0.5, 1.5}, {0.875, 3}, {1, 4}} {
		if got := h.Quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%g = %g, want %g", c.q, got, c.want)
		}
	}
	if !math.IsNaN((&Histogram{}).Quantile(0.5)) {
		t.Error("empty histogram quantile is not NaN")
	}
}

// TestScrape samples a live endpoint that serves the two fixtures in turn.
func TestScrape(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		name := "vllm-kvbound-0.txt"
		if n.Add(1) > 1 {
			name = "vllm-kvbound-1.txt"
		}
		b, _ := os.ReadFile(filepath.Join("testdata", name))
		w.Write(b)
	}))
	defer srv.Close()
	snaps, err := Scrape(context.Background(), srv.URL, ScrapeOptions{Duration: 30 * time.Millisecond, Interval: 10 * time.Millisecond, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 4 || snaps[0].Preemptions != 120 || snaps[3].Preemptions != 151 {
		t.Errorf("%d snapshots: %+v", len(snaps), snaps)
	}
	if _, err := Scrape(context.Background(), srv.URL+"/nope", ScrapeOptions{Duration: 10 * time.Millisecond, Interval: 5 * time.Millisecond}); !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), "404") {
		t.Errorf("bad path: %v", err)
	}
}

func TestReadTrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	tr, err := ReadTrace(write("a.jsonl", "{\"prompt_tokens\": 100, \"completion_tokens\": 10}\n{\"input_tokens\": 300, \"output_tokens\": 30}\n"))
	if err != nil || tr.Requests != 2 || tr.InputMean != 200 || tr.OutputMean != 20 || math.Abs(tr.InputP95-290) > 1e-9 {
		t.Errorf("jsonl: %+v, %v", tr, err)
	}
	tr, err = ReadTrace(write("v.json", `{"input_lens": [1, 2, 3], "output_lens": [4, 5, 6]}`))
	if err != nil || tr.Requests != 3 || tr.OutputMean != 5 {
		t.Errorf("vllm detailed: %+v, %v", tr, err)
	}
	tr, err = ReadTrace(write("b.json", `{"records": [{"input_tokens": 7, "output_tokens": 9}]}`))
	if err != nil || tr.InputMean != 7 {
		t.Errorf("bench records: %+v, %v", tr, err)
	}
	if _, err := ReadTrace(write("bad.jsonl", "{\"prompt_tokens\": 1}\n{\"x\": 2}\n")); !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("bad line: %v", err)
	}
}

// TestAnalyzeKVQServe: recorded scrapes of a real kvq serve on the
// built-in model (testdata/record-kvqserve.sh), four 3 s apart: one with
// a 3 MiB KV budget under 16 concurrent 640-token requests (the cache
// fills, 13 wait), one lightly loaded with short requests.
func TestAnalyzeKVQServe(t *testing.T) {
	load := func(name string) []Snapshot {
		t0 := time.Unix(1_800_000_000, 0)
		var snaps []Snapshot
		for i := 0; i < 4; i++ {
			snaps = append(snaps, snapshotFile(t, fmt.Sprintf("kvqserve-%s-%d.txt", name, i), t0.Add(time.Duration(3*i)*time.Second)))
		}
		return snaps
	}
	bound := Analyze(load("kvbound"), nil)
	if bound.Verdict != KVBound || bound.Engine != "kvq" || bound.WaitingShare != 1 || bound.UsageMax < HighUsage {
		t.Errorf("KV-bound kvq serve: %+v", bound)
	}
	if ev := strings.Join(bound.Evidence, "\n"); !strings.Contains(ev, "admission is limited by KV memory") {
		t.Errorf("KV-bound evidence %q", ev)
	}
	idle := Analyze(load("idle"), nil)
	if idle.Verdict != NotKVBound || idle.Engine != "kvq" || idle.UsageMax >= LowUsage || idle.Preemptions != 0 || !(idle.PromptTPS > 0) {
		t.Errorf("idle kvq serve: %+v", idle)
	}
}

// TestHistogramQuantilePrometheus pins Quantile to Prometheus'
// histogram_quantile on hand-computed cases: interpolation within the
// bucket, a rank in the +Inf bucket, a first bucket with a bound ≤ 0,
// counts that decrease, no +Inf bucket, and q outside [0, 1]. The total
// is the +Inf bucket's count, not _count.
func TestHistogramQuantilePrometheus(t *testing.T) {
	inf := math.Inf(1)
	h := &Histogram{Bounds: []float64{0.1, 0.5, 1, inf}, Counts: []float64{2, 6, 8, 10}, Count: 99}
	neg := &Histogram{Bounds: []float64{-1, 0, 1, inf}, Counts: []float64{5, 6, 8, 10}, Count: 10}
	dip := &Histogram{Bounds: []float64{0.1, 0.5, 1, inf}, Counts: []float64{2, 1, 8, 10}, Count: 10}
	for _, c := range []struct {
		name string
		h    *Histogram
		q    float64
		want float64
	}{
		{"first bucket from 0", h, 0.1, 0.05}, // rank 1 of 2 in (0, 0.1]
		{"second bucket", h, 0.5, 0.4},        // 0.1 + 0.4·(5−2)/(6−2)
		{"upper bound reached", h, 0.8, 1},    // rank 8 = the (0.5, 1] bucket's count
		{"+Inf bucket", h, 0.9, 1},            // rank 9 > 8: the highest finite bound
		{"q = 1", h, 1, 1},                    // the same
		{"q = 0", h, 0, 0},                    // rank 0 in the first bucket
		{"bound ≤ 0", neg, 0.2, -1},           // the first bucket's bound, not interpolated
		{"monotonic", dip, 0.5, 0.75},         // counts read as 2 2 8 10: 0.5 + 0.5·3/6
		{"q < 0", h, -0.1, math.Inf(-1)},      //
		{"q > 1", h, 1.1, inf},                //
		{"no +Inf bucket", &Histogram{Bounds: []float64{1, 2}, Counts: []float64{1, 2}, Count: 2}, 0.5, math.NaN()},
		{"no observations", &Histogram{Bounds: []float64{1, inf}, Counts: []float64{0, 0}}, 0.5, math.NaN()},
	} {
		got := c.h.Quantile(c.q)
		if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want) || math.Abs(got-c.want) < 1e-12) {
			t.Errorf("%s: Quantile(%g) = %g, want %g", c.name, c.q, got, c.want)
		}
	}
	// A delta across a counter reset is the later scrape itself.
	later := &Histogram{Bounds: h.Bounds, Counts: []float64{1, 1, 1, 1}, Count: 1}
	if d := later.Sub(h); d != later {
		t.Errorf("Sub across a reset = %+v, want the later histogram", d)
	}
}
