package bench_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// rec builds a succeeded record: sent at start, chunks at the given
// offsets (ms from the run's start), out output tokens.
func rec(index int, start float64, chunks []float64, out, in int, queue float64) bench.Record {
	r := bench.Record{Index: index, Start: ms(start), Chunks: len(chunks), OutputTokens: out, InputTokens: in, QueueTime: ms(queue)}
	if len(chunks) > 0 {
		r.FirstToken, r.End = ms(chunks[0]), ms(chunks[len(chunks)-1])
		for i := 1; i < len(chunks); i++ {
			r.ITL = append(r.ITL, ms(chunks[i]-chunks[i-1]))
		}
	}
	r.Done = r.End
	return r
}

// handRun is a 2-second run with four completed requests and one failed,
// whose metrics are worked out by hand in TestSummarize.
func handRun() *bench.Result {
	return &bench.Result{
		Duration: 2 * time.Second,
		Requests: 5,
		Records: []bench.Record{
			rec(0, 0, []float64{100, 120, 150, 200}, 4, 10, 0), // TTFT 100, E2EL 200, TPOT 100/3, ITL 20 30 50
			rec(1, 50, []float64{250, 300}, 2, 20, 10),         // TTFT 200, E2EL 250, TPOT 50, ITL 50
			rec(2, 100, []float64{400}, 1, 30, 20),             // TTFT 300, E2EL 300, no TPOT
			{Index: 3, Start: ms(150), Error: "boom", InputTokens: 40, OutputTokens: 7},
			rec(4, 1200, []float64{1300, 1310, 1320, 1330, 1340}, 5, 5, 0), // TTFT 100, E2EL 140, TPOT 10, ITL 10×4
		},
	}
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, math.Abs(want)) }

func TestSummarize(t *testing.T) {
	s, err := bench.Summarize(handRun(), bench.SummaryOptions{Percentiles: []float64{99, 25, 50}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != 4 || s.Failed != 1 {
		t.Errorf("completed, failed = %d, %d, want 4, 1", s.Completed, s.Failed)
	}
	if s.TotalInputTokens != 65 || s.TotalOutputTokens != 12 {
		t.Errorf("total input, output tokens = %d, %d, want 65, 12 (failed request not counted)", s.TotalInputTokens, s.TotalOutputTokens)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"duration", s.Duration, 2},
		{"request_throughput", s.RequestThroughput, 2},
		{"output_throughput", s.OutputThroughput, 6},
		{"total_token_throughput", s.TotalTokenThroughput, 38.5},
		// Chunks counted once each: second 0 holds 4+2+1, second 1 holds 5.
		{"max_output_tokens_per_s", s.MaxOutputTokensPerS, 7},
		{"mean_concurrency", s.MeanConcurrency, (0.2 + 0.25 + 0.3 + 0.14) / 2},

		// TTFT sorted 100 100 200 300.
		{"mean_ttft", s.TTFT.Mean, 175},
		{"median_ttft", s.TTFT.Median, 150},
		{"std_ttft", s.TTFT.Std, math.Sqrt(6875)},
		{"p90_ttft", s.TTFT.P90, 270}, // h = 2.7
		{"p95_ttft", s.TTFT.P95, 285},
		{"p99_ttft", s.TTFT.P99, 297},
		{"max_ttft", s.TTFT.Max, 300},
		// TPOT only for more than one token: 100/3, 50, 10.
		{"mean_tpot", s.TPOT.Mean, (100.0/3 + 50 + 10) / 3},
		{"median_tpot", s.TPOT.Median, 100.0 / 3},
		{"p99_tpot", s.TPOT.P99, 100.0/3 + 0.98*(50-100.0/3)},
		// ITL pooled: 10 10 10 10 20 30 50 50.
		{"mean_itl", s.ITL.Mean, 23.75},
		{"median_itl", s.ITL.Median, 15},
		{"p90_itl", s.ITL.P90, 50},
		{"max_itl", s.ITL.Max, 50},
		// E2EL sorted 140 200 250 300.
		{"mean_e2el", s.E2EL.Mean, 222.5},
		{"median_e2el", s.E2EL.Median, 225},
		{"mean_client_queue_time", s.ClientQueueTime.Mean, 7.5},
		{"mean_e2el_including_client_queue", s.E2ELIncludingClientQueue.Mean, 230},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.MaxConcurrentRequests != 3 {
		t.Errorf("max_concurrent_requests = %d, want 3 (at 100 ms)", s.MaxConcurrentRequests)
	}
	if s.RequestGoodput != nil {
		t.Errorf("request_goodput = %v without SLOs, want nil", *s.RequestGoodput)
	}
	// Extra percentiles: sorted, deduplicated, 99 is standard.
	want := []bench.Quantile{{P: 25, Value: 100}, {P: 50, Value: 150}}
	if len(s.TTFT.Extra) != len(want) {
		t.Fatalf("TTFT extra percentiles = %v, want %v", s.TTFT.Extra, want)
	}
	for i, q := range s.TTFT.Extra {
		if q.P != want[i].P || !near(q.Value, want[i].Value) {
			t.Errorf("TTFT extra percentiles = %v, want %v", s.TTFT.Extra, want)
		}
	}
	if v, ok := s.ITL.Percentile(25); !ok || !near(v, 10) {
		t.Errorf("ITL.Percentile(25) = %v, %v, want 10, true", v, ok)
	}
}

func TestSummarizeGoodput(t *testing.T) {
	for _, c := range []struct {
		slo  string
		want float64 // good requests per second over 2 s
	}{
		{"ttft:150ms", 1},  // requests 0 and 4
		{"ttft:300", 2},    // bare milliseconds; 300 ≤ 300 counts
		{"tpot:40ms", 1.5}, // request 2 has one token: TPOT 0; request 1's 50 ms fails
		{"ttft:300,tpot:40ms", 1.5},
		{"e2el:250ms", 1.5}, // 250 ≤ 250 counts, 300 does not
		{"ttft:50ms", 0},
		{"ttft:1s tpot:1s e2el:1s", 2},
	} {
		g, err := bench.ParseGoodput(c.slo)
		if err != nil {
			t.Fatalf("ParseGoodput(%q): %v", c.slo, err)
		}
		s, err := bench.Summarize(handRun(), bench.SummaryOptions{Goodput: g})
		if err != nil {
			t.Fatal(err)
		}
		if s.RequestGoodput == nil || !near(*s.RequestGoodput, c.want) {
			t.Errorf("goodput %q: request_goodput = %v, want %v", c.slo, s.RequestGoodput, c.want)
		}
	}
}

func TestSummarizeEdges(t *testing.T) {
	// No completed request: statistics are 0 (vLLM's np.mean(xs or 0)), rates 0.
	s, err := bench.Summarize(&bench.Result{Duration: time.Second, Records: []bench.Record{{Error: "x"}}}, bench.SummaryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Failed != 1 || s.Completed != 0 || !reflect.DeepEqual(s.TTFT, bench.Stats{}) || s.RequestThroughput != 0 || s.MaxConcurrentRequests != 0 {
		t.Errorf("all failed: %+v", s)
	}
	// Zero duration gives 0 rates, never Inf or NaN.
	s, err = bench.Summarize(&bench.Result{Records: []bench.Record{rec(0, 0, []float64{1}, 1, 1, 0)}}, bench.SummaryOptions{})
	if err != nil || s.RequestThroughput != 0 || s.OutputThroughput != 0 {
		t.Errorf("zero duration: throughput %v, err %v", s.RequestThroughput, err)
	}
	if _, err := bench.Summarize(handRun(), bench.SummaryOptions{Percentiles: []float64{101}}); !errors.Is(err, bench.ErrOptions) {
		t.Errorf("percentile 101: err = %v, want ErrOptions", err)
	}
}

func TestMaxConcurrentHalfOpen(t *testing.T) {
	// [0, 100) and [100, 200) never overlap; [50, 150) overlaps both.
	res := &bench.Result{Duration: time.Second, Records: []bench.Record{
		rec(0, 0, []float64{10, 100}, 2, 1, 0),
		rec(1, 100, []float64{110, 200}, 2, 1, 0),
	}}
	s, _ := bench.Summarize(res, bench.SummaryOptions{})
	if s.MaxConcurrentRequests != 1 {
		t.Errorf("back-to-back requests: max_concurrent_requests = %d, want 1", s.MaxConcurrentRequests)
	}
	res.Records = append(res.Records, rec(2, 50, []float64{60, 150}, 2, 1, 0))
	s, _ = bench.Summarize(res, bench.SummaryOptions{})
	if s.MaxConcurrentRequests != 2 {
		t.Errorf("with an overlapping request: max_concurrent_requests = %d, want 2", s.MaxConcurrentRequests)
	}
}

func TestMaxOutputTokensPerSecondBuckets(t *testing.T) {
	// Buckets count from the earliest send (500 ms): chunks at 1400 and
	// 1600 fall in buckets 0 and 1; 3 chunks at 1.6–1.9 s share bucket 1.
	res := &bench.Result{Duration: 3 * time.Second, Records: []bench.Record{
		rec(0, 500, []float64{1400, 1600, 1700}, 3, 1, 0),
		rec(1, 1000, []float64{1450, 1900}, 2, 1, 0),
	}}
	s, _ := bench.Summarize(res, bench.SummaryOptions{})
	if s.MaxOutputTokensPerS != 3 {
		t.Errorf("max_output_tokens_per_s = %v, want 3", s.MaxOutputTokensPerS)
	}
}

func TestPercentileNumpy(t *testing.T) {
	// Values of np.percentile(xs, p) (method "linear").
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, 25, 1.75},
		{[]float64{15, 20, 35, 40, 50}, 40, 29},
		{[]float64{15, 20, 35, 40, 50}, 0, 15},
		{[]float64{15, 20, 35, 40, 50}, 100, 50},
		{[]float64{7}, 99, 7},
		{[]float64{3, 1, 2}, 50, 2}, // unsorted input
	} {
		var recs []bench.Record
		for i, x := range c.xs {
			recs = append(recs, rec(i, 0, []float64{x}, 1, 1, 0))
		}
		s, err := bench.Summarize(&bench.Result{Duration: time.Second, Records: recs}, bench.SummaryOptions{Percentiles: []float64{c.p}})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.TTFT.Percentile(c.p); !near(got, c.want) {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
}

func TestParseGoodput(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bench.Goodput
	}{
		{"ttft:500ms,tpot:50ms,e2el:2s", bench.Goodput{TTFT: ms(500), TPOT: ms(50), E2EL: 2 * time.Second}},
		{"ttft:500 tpot:50", bench.Goodput{TTFT: ms(500), TPOT: ms(50)}},
		{"TTFT:0.5", bench.Goodput{TTFT: 500 * time.Microsecond}},
		{"", bench.Goodput{}},
	} {
		got, err := bench.ParseGoodput(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseGoodput(%q) = %+v, %v, want %+v", c.in, got, err, c.want)
		}
		if back, err := bench.ParseGoodput(got.String()); err != nil || back != got {
			t.Errorf("ParseGoodput(%q) does not read back: %+v, %v", got.String(), back, err)
		}
	}
	for _, in := range []string{"ttft", "ttft:", "ttft:-5", "ttft:0", "ttft:abc", "itl:50", "ttft:5,ttft:6", "ttft:inf"} {
		if _, err := bench.ParseGoodput(in); !errors.Is(err, bench.ErrGoodput) {
			t.Errorf("ParseGoodput(%q): err = %v, want ErrGoodput", in, err)
		}
	}
}

func TestParsePercentiles(t *testing.T) {
	got, err := bench.ParsePercentiles("50,90 99.9,50")
	if want := []float64{50, 90, 99.9}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePercentiles = %v, %v, want %v", got, err, want)
	}
	for _, in := range []string{"101", "-1", "x"} {
		if _, err := bench.ParsePercentiles(in); !errors.Is(err, bench.ErrOptions) {
			t.Errorf("ParsePercentiles(%q): err = %v, want ErrOptions", in, err)
		}
	}
}

func TestSummaryJSON(t *testing.T) {
	g, _ := bench.ParseGoodput("ttft:300")
	s, err := bench.Summarize(handRun(), bench.SummaryOptions{Percentiles: []float64{99.9, 50}, Goodput: g})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{
		"duration": 2, "completed": 4, "failed": 1, "total_input_tokens": 65, "total_output_tokens": 12,
		"request_throughput": 2, "request_goodput": 2, "output_throughput": 6, "total_token_throughput": 38.5,
		"max_output_tokens_per_s": 7, "max_concurrent_requests": 3,
		"mean_ttft_ms": 175, "median_ttft_ms": 150, "p99_ttft_ms": 297, "p50_ttft_ms": 150, "max_ttft_ms": 300,
		"p99_itl_ms": 50, "mean_e2el_ms": 222.5, "mean_client_queue_time_ms": 7.5, "mean_e2el_including_client_queue_ms": 230,
	} {
		got, ok := m[key].(float64)
		if !ok || !near(got, want) {
			t.Errorf("JSON %s = %v, want %v", key, m[key], want)
		}
	}
	if _, ok := m["p99.9_tpot_ms"]; !ok {
		t.Errorf("JSON lacks p99.9_tpot_ms: %s", b)
	}
	if !strings.HasPrefix(string(b), `{"duration":`) {
		t.Errorf("JSON does not start with duration: %.40s", b)
	}
	var back bench.Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("Summary JSON round trip:\ngot  %+v\nwant %+v", back, s)
	}
	s.RequestGoodput = nil
	b, _ = json.Marshal(s)
	if !strings.Contains(string(b), `"request_goodput":null`) {
		t.Errorf("without SLOs request_goodput is not null: %s", b)
	}
}

func TestFormulas(t *testing.T) {
	text := strings.Join(bench.Formulas(), "\n")
	for _, name := range []string{"TTFT", "TPOT", "ITL", "E2EL", "request_throughput", "request_goodput", "max_concurrent_requests", "max_output_tokens_per_s", "mean_concurrency"} {
		if !strings.Contains(text, name) {
			t.Errorf("Formulas does not define %s", name)
		}
	}
}
