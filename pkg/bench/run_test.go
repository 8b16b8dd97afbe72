package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// scripted is a target on a fake clock: request i waits ttft[i], then
// sends chunks after the gaps in gaps[i], one token each. It runs one
// request at a time (the tests use Concurrency 1) so that the clock is
// its alone.
func scripted(clock *fakeClock, ttft []time.Duration, gaps [][]time.Duration) *funcTarget {
	return &funcTarget{name: "scripted", do: func(_ context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		clock.Advance(ttft[r.Index])
		chunk(1, clock.Now())
		for _, g := range gaps[r.Index] {
			clock.Advance(g)
			chunk(1, time.Time{}) // zero: the run's clock
		}
		return bench.Response{FinishReason: "length"}, nil
	}}
}

func TestRunRecordsOnFakeClock(t *testing.T) {
	clock := newFakeClock()
	ttft := []time.Duration{ms(30), ms(10), ms(20)}
	gaps := [][]time.Duration{{ms(5), ms(7)}, {}, {ms(1)}}
	res, err := bench.Run(context.Background(), scripted(clock, ttft, gaps), requests(3),
		bench.Load{Concurrency: 1}, bench.RunOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// All arrive at 0; one at a time, each waits for the previous one.
	want := []bench.Record{
		{Index: 0, Start: 0, FirstToken: ms(30), End: ms(42), Done: ms(42), ITL: []time.Duration{ms(5), ms(7)}, Chunks: 3,
			QueueTime: 0, InputTokens: 4, OutputTokens: 3, FinishReason: "length"},
		{Index: 1, Start: ms(42), FirstToken: ms(52), End: ms(52), Done: ms(52), Chunks: 1,
			QueueTime: ms(42), InputTokens: 4, OutputTokens: 1, FinishReason: "length"},
		{Index: 2, Start: ms(52), FirstToken: ms(72), End: ms(73), Done: ms(73), ITL: []time.Duration{ms(1)}, Chunks: 2,
			QueueTime: ms(52), InputTokens: 4, OutputTokens: 2, FinishReason: "length"},
	}
	if !reflect.DeepEqual(res.Records, want) {
		t.Errorf("records:\ngot  %+v\nwant %+v", res.Records, want)
	}
	if res.Duration != ms(73) || res.Target != "scripted" || res.Requests != 3 || !res.Started.Equal(newFakeClock().Now()) {
		t.Errorf("result: duration %v, target %q, requests %d, started %v", res.Duration, res.Target, res.Requests, res.Started)
	}
	if got := res.Records[2].TTFT(); got != ms(20) {
		t.Errorf("TTFT = %v, want 20ms", got)
	}
	if got, ok := res.Records[0].TPOT(); !ok || got != ms(6) {
		t.Errorf("TPOT = %v, %v, want 6ms, true", got, ok)
	}
	if _, ok := res.Records[1].TPOT(); ok {
		t.Error("TPOT of a one-token request is defined")
	}
}

// stepSleep is a fake Sleep that waits until the target has finished the
// requests dispatched so far, then advances the clock: arrivals on the
// fake clock become exact.
type stepSleep struct {
	clock *fakeClock
	done  atomic.Int64
	calls int
}

func (s *stepSleep) sleep(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(2 * time.Second)
	for s.done.Load() < int64(s.calls) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	s.calls++
	s.clock.Advance(d)
	return ctx.Err()
}

func TestRunFollowsSchedule(t *testing.T) {
	clock := newFakeClock()
	ss := &stepSleep{clock: clock}
	instant := &funcTarget{name: "instant", do: func(_ context.Context, _ bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		defer ss.done.Add(1)
		chunk(2, time.Time{})
		return bench.Response{}, nil
	}}
	const n, rate, seed = 8, 4.0, 11
	for _, burst := range []float64{1, math.Inf(1)} {
		ss.done.Store(0)
		ss.calls = 0
		res, err := bench.Run(context.Background(), instant, requests(n), bench.Load{Rate: rate, Burstiness: burst},
			bench.RunOptions{Now: clock.Now, Sleep: ss.sleep, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		sched := bench.Schedule(n, rate, burst, seed)
		if len(res.Records) != n {
			t.Fatalf("%d records, want %d", len(res.Records), n)
		}
		for i, r := range res.Records {
			if r.Start != sched[i] || r.QueueTime != 0 || r.OutputTokens != 2 || r.TTFT() != 0 {
				t.Errorf("burstiness %v, request %d: start %v (schedule %v), queue %v, %d output tokens", burst, i, r.Start, sched[i], r.QueueTime, r.OutputTokens)
			}
		}
		if res.Duration != sched[n-1] {
			t.Errorf("burstiness %v: duration %v, want the last arrival %v", burst, res.Duration, sched[n-1])
		}
	}
}

func TestRunConcurrencyCap(t *testing.T) {
	var inFlight, peak atomic.Int64
	slow := &funcTarget{name: "slow", do: func(_ context.Context, _ bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		chunk(1, time.Time{})
		return bench.Response{}, nil
	}}
	var progress []int
	res, err := bench.Run(context.Background(), slow, requests(18), bench.Load{Concurrency: 3},
		bench.RunOptions{Progress: func(done, total int) {
			if total != 18 {
				t.Errorf("progress total %d, want 18", total)
			}
			progress = append(progress, done)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 3 {
		t.Errorf("peak in flight %d, want the cap 3", peak.Load())
	}
	if len(res.Records) != 18 {
		t.Fatalf("%d records, want 18", len(res.Records))
	}
	for i, r := range res.Records {
		if r.Index != i {
			t.Errorf("record %d has index %d: not in workload order", i, r.Index)
		}
		// The first three find a slot at once; the others wait at least one
		// 2 ms request.
		if i >= 3 && r.QueueTime < ms(1.5) {
			t.Errorf("request %d queued %v under a cap of 3, want ≥ 1.5ms", i, r.QueueTime)
		}
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}; !slices.Equal(progress, want) {
		t.Errorf("progress %v, want 1..18", progress)
	}
	s, _ := bench.Summarize(res, bench.SummaryOptions{})
	if s.MaxConcurrentRequests > 3 {
		t.Errorf("max_concurrent_requests %d over the cap", s.MaxConcurrentRequests)
	}
}

func TestRunAllAtOnce(t *testing.T) {
	// Without a cap and at rate 0 every request is in flight together: the
	// target only answers once all n have arrived.
	const n = 16
	var arrived atomic.Int64
	all := make(chan struct{})
	barrier := &funcTarget{name: "barrier", do: func(ctx context.Context, _ bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(2 * time.Second):
			return bench.Response{}, errors.New("not all requests arrived")
		}
		chunk(1, time.Time{})
		return bench.Response{}, nil
	}}
	res, err := bench.Run(context.Background(), barrier, requests(n), bench.Load{}, bench.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := bench.Summarize(res, bench.SummaryOptions{})
	if s.Completed != n {
		t.Errorf("%d of %d completed: requests were not sent at once", s.Completed, n)
	}
}

func TestRunWarmups(t *testing.T) {
	var mu sync.Mutex
	var seq int
	type call struct{ index, start, end int }
	var calls []*call
	target := &funcTarget{name: "log", do: func(_ context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		mu.Lock()
		c := &call{index: r.Index, start: seq}
		seq++
		calls = append(calls, c)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		chunk(1, time.Time{})
		mu.Lock()
		c.end = seq
		seq++
		mu.Unlock()
		return bench.Response{}, nil
	}}
	reqs := requests(5)
	for i := range reqs {
		reqs[i].Index = 10 + i
	}
	res, err := bench.Run(context.Background(), target, reqs, bench.Load{Warmups: 3}, bench.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 8 || len(res.Records) != 5 {
		t.Fatalf("%d calls and %d records, want 8 and 5", len(calls), len(res.Records))
	}
	warm, measured := calls[:3], calls[3:]
	lastWarm := 0
	for _, c := range warm {
		if c.index != 10 {
			t.Errorf("warmup sent request %d, want the first (10)", c.index)
		}
		lastWarm = max(lastWarm, c.end)
	}
	for _, c := range measured {
		if c.start < lastWarm {
			t.Errorf("request %d started before the warmups finished", c.index)
		}
	}
	for i, r := range res.Records {
		if r.Index != 10+i {
			t.Errorf("record %d is request %d, want %d: warmups recorded?", i, r.Index, 10+i)
		}
	}
}

func TestRunFailures(t *testing.T) {
	target := &funcTarget{name: "flaky", do: func(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		switch r.Index % 4 {
		case 1:
			return bench.Response{}, errors.New("HTTP 500")
		case 2:
			return bench.Response{}, nil // no chunk
		case 3:
			<-ctx.Done() // until the per-request timeout
			return bench.Response{}, ctx.Err()
		}
		chunk(3, time.Time{})
		return bench.Response{InputTokens: 99, OutputTokens: 5}, nil
	}}
	res, err := bench.Run(context.Background(), target, requests(8), bench.Load{Timeout: 5 * time.Millisecond, Warmups: 2}, bench.RunOptions{})
	if err != nil {
		t.Fatalf("failed requests stopped the run: %v", err)
	}
	if len(res.Records) != 8 {
		t.Fatalf("%d records, want 8", len(res.Records))
	}
	for _, r := range res.Records {
		var want string
		switch r.Index % 4 {
		case 1:
			want = "HTTP 500"
		case 2:
			want = "no output chunk"
		case 3:
			want = "timed out after 5ms"
		}
		if want == "" && (!r.OK() || r.InputTokens != 99 || r.OutputTokens != 5) {
			t.Errorf("request %d: error %q, tokens %d/%d; want success with the target's counts 99/5", r.Index, r.Error, r.InputTokens, r.OutputTokens)
		}
		if want != "" && !strings.Contains(r.Error, want) {
			t.Errorf("request %d: error %q, want %q", r.Index, r.Error, want)
		}
	}
	s, _ := bench.Summarize(res, bench.SummaryOptions{})
	if s.Completed != 2 || s.Failed != 6 {
		t.Errorf("completed %d, failed %d; want 2, 6", s.Completed, s.Failed)
	}
	if res.WarmupFailed != 0 {
		t.Errorf("warmups of request 0 (which succeeds) failed %d times", res.WarmupFailed)
	}
	// Warmup failures are counted, not fatal.
	res, err = bench.Run(context.Background(), target, requests(2)[1:], bench.Load{Warmups: 2}, bench.RunOptions{})
	if err == nil && res.WarmupFailed != 2 {
		t.Errorf("warmups of a failing request: %d failed, want 2", res.WarmupFailed)
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Int64
	blocking := &funcTarget{name: "blocking", do: func(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		if r.Index == 0 {
			chunk(1, time.Time{})
			return bench.Response{}, nil
		}
		if started.Add(1) == 4 { // every slot held: the dispatcher waits for request 5
			cancel()
		}
		<-ctx.Done()
		return bench.Response{}, ctx.Err()
	}}
	t0 := time.Now()
	res, err := bench.Run(ctx, blocking, requests(50), bench.Load{Concurrency: 4}, bench.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if el := time.Since(t0); el > time.Second {
		t.Errorf("cancelled run returned after %v", el)
	}
	if res == nil || len(res.Records) != 1 || res.Records[0].Index != 0 || res.Interrupted != 4 {
		t.Fatalf("result after cancel: %+v, want request 0 recorded and 4 interrupted", res)
	}

	// Cancelled while waiting for the next arrival (rate 1/s).
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	instant := &funcTarget{name: "instant", do: func(_ context.Context, _ bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
		chunk(1, time.Time{})
		return bench.Response{}, nil
	}}
	t0 = time.Now()
	res, err = bench.Run(ctx2, instant, requests(10), bench.Load{Rate: 1, Burstiness: math.Inf(1)}, bench.RunOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 500*time.Millisecond {
		t.Errorf("cancel during an arrival wait: err %v after %v", err, time.Since(t0))
	}
	if res == nil || len(res.Records) != 0 {
		t.Errorf("nothing was due in 20 ms at 1 req/s, got %+v", res)
	}
}

func TestLoadValidate(t *testing.T) {
	for _, l := range []bench.Load{
		{Rate: -1}, {Rate: math.NaN()}, {Burstiness: -1}, {Concurrency: -1}, {Warmups: -1}, {Timeout: -1},
	} {
		if err := l.Validate(); !errors.Is(err, bench.ErrLoad) {
			t.Errorf("%+v: err = %v, want ErrLoad", l, err)
		}
		if _, err := bench.Run(context.Background(), &funcTarget{}, nil, l, bench.RunOptions{}); !errors.Is(err, bench.ErrLoad) {
			t.Errorf("Run(%+v): err = %v, want ErrLoad", l, err)
		}
	}
	if err := (bench.Load{Rate: math.Inf(1), Burstiness: math.Inf(1)}).Validate(); err != nil {
		t.Errorf("infinite rate and burstiness: %v", err)
	}
}

func TestRecordJSON(t *testing.T) {
	r := bench.Record{Index: 3, Start: ms(1500), FirstToken: ms(1625.5), End: ms(1700), Done: ms(1701),
		ITL: []time.Duration{ms(30), ms(44.5)}, Chunks: 3, QueueTime: ms(12), InputTokens: 7, OutputTokens: 3,
		FinishReason: "stop"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for key, want := range map[string]float64{"start_s": 1.5, "ttft_s": 0.1255, "e2el_s": 0.2, "done_s": 1.701, "queue_time_s": 0.012, "output_tokens": 3} {
		if got, _ := m[key].(float64); !near(got, want) {
			t.Errorf("record JSON %s = %v, want %v (%s)", key, m[key], want, b)
		}
	}
	var back bench.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("record round trip:\ngot  %+v\nwant %+v", back, r)
	}
	// A failed request without chunks has null latencies.
	b, _ = json.Marshal(bench.Record{Start: ms(1), Error: "boom"})
	if !strings.Contains(string(b), `"ttft_s":null`) || !strings.Contains(string(b), `"error":"boom"`) {
		t.Errorf("failed record JSON: %s", b)
	}
}

func TestResultJSON(t *testing.T) {
	res := &bench.Result{Target: "x", Load: bench.Load{Rate: 2.5, Burstiness: 0.5, Concurrency: 8, Warmups: 1, Timeout: time.Minute},
		Started: time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC), Duration: ms(2500), Requests: 2, Interrupted: 1,
		Records: []bench.Record{rec(0, 0, []float64{10, 20}, 2, 3, 0)}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration":2.5`, `"request_rate":2.5`, `"max_concurrency":8`, `"num_prompts":2`, `"records":[{"index":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("result JSON lacks %s: %s", want, b)
		}
	}
	var back bench.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, res) {
		t.Errorf("result round trip:\ngot  %+v\nwant %+v", back, *res)
	}
	// vLLM's spellings of an unbounded load.
	b, _ = json.Marshal(bench.Load{Burstiness: math.Inf(1)})
	if want := `{"request_rate":"inf","burstiness":"inf","max_concurrency":null,"num_warmups":0,"timeout_s":0}`; string(b) != want {
		t.Errorf("unbounded load JSON = %s, want %s", b, want)
	}
	var l bench.Load
	if err := json.Unmarshal(b, &l); err != nil || l.Rate != 0 || !math.IsInf(l.Burstiness, 1) || l.Concurrency != 0 {
		t.Errorf("unbounded load reads back as %+v, %v", l, err)
	}
}
