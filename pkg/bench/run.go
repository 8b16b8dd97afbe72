package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Target runs requests: kvq's in-process engine or an OpenAI-compatible
// endpoint. It must be safe for concurrent use.
type Target interface {
	Name() string
	// Do sends r and calls chunk once per streamed output chunk with the
	// number of tokens it carries and its arrival time; it returns when the
	// response is complete. chunk must be called from Do's goroutine (or
	// synchronized with it) and never after Do returns. A zero at means
	// "now" on the run's clock. Do returns promptly with an error when ctx
	// ends.
	Do(ctx context.Context, r Request, chunk func(tokens int, at time.Time)) (Response, error)
}

// Response is what a target reports of a completed request. Zero counts
// mean "not reported": the runner then counts the prompt's ids and the
// tokens the chunks carried.
type Response struct {
	InputTokens, OutputTokens int
	FinishReason              string
}

// Load is how a workload is sent.
type Load struct {
	// Rate is the mean arrival rate in requests per second; 0 (or +Inf)
	// sends every request at once (vLLM's --request-rate inf).
	Rate float64
	// Burstiness is the shape of the Gamma-distributed gaps (Schedule):
	// 1 (or 0, the default) is a Poisson process, +Inf a constant rate.
	Burstiness float64
	// Concurrency caps the requests in flight on the client side (vLLM's
	// --max-concurrency); 0 means no cap.
	Concurrency int
	// Warmups requests, copies of the workload's first request as in
	// vLLM, are sent under the same concurrency cap and awaited before the
	// measured run; they are not recorded.
	Warmups int
	// Timeout bounds each request; 0 means none. A request that runs out
	// of time is recorded as failed.
	Timeout time.Duration
}

// Validate reports settings Run cannot use, wrapping ErrLoad.
func (l Load) Validate() error {
	switch {
	case !(l.Rate >= 0):
		return fmt.Errorf("%w: request rate %v", ErrLoad, l.Rate)
	case !(l.Burstiness >= 0):
		return fmt.Errorf("%w: burstiness %v", ErrLoad, l.Burstiness)
	case l.Concurrency < 0:
		return fmt.Errorf("%w: max concurrency %d", ErrLoad, l.Concurrency)
	case l.Warmups < 0:
		return fmt.Errorf("%w: %d warmups", ErrLoad, l.Warmups)
	case l.Timeout < 0:
		return fmt.Errorf("%w: timeout %v", ErrLoad, l.Timeout)
	}
	return nil
}

// allAtOnce reports whether the load sends every request at t = 0.
func (l Load) allAtOnce() bool { return l.Rate == 0 || math.IsInf(l.Rate, 1) }

// RunOptions control Run.
type RunOptions struct {
	// Progress, when set, is called after each measured request finishes
	// with the number finished and the workload's size.
	Progress func(done, total int)
	// Now and Sleep are the run's clock (time.Now and a timer by default);
	// tests inject a fake one. Sleep must return ctx.Err() when ctx ends
	// first.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Seed seeds the arrival schedule.
	Seed uint64
}

func (o *RunOptions) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Record is one request as measured. Times are offsets from the run's
// start (Result.Started), which is the origin of the arrival schedule.
type Record struct {
	Index int // the Request's Index
	// Start is when the request was sent, after any wait in the client
	// queue (vLLM's st, taken just before the POST).
	Start time.Duration
	// FirstToken and End are the arrivals of the first and the last
	// output chunks (0 when Chunks is 0); Done is when Do returned.
	FirstToken, End, Done time.Duration
	// ITL holds the gaps between consecutive chunks (Chunks−1 of them).
	ITL    []time.Duration
	Chunks int
	// QueueTime is the wait for a slot under Load.Concurrency, from the
	// request's arrival to Start.
	QueueTime                 time.Duration
	InputTokens, OutputTokens int
	FinishReason              string
	// Error is why the request failed, "" when it succeeded.
	Error string
}

// OK reports whether the request succeeded.
func (r Record) OK() bool { return r.Error == "" }

// TTFT is the time to the first chunk: FirstToken − Start.
func (r Record) TTFT() time.Duration { return r.FirstToken - r.Start }

// E2EL is the end-to-end latency: End − Start (the last chunk, not Done,
// as vLLM measures it).
func (r Record) E2EL() time.Duration { return r.End - r.Start }

// TPOT is (E2EL − TTFT)/(OutputTokens − 1), and ok is false when
// OutputTokens ≤ 1.
func (r Record) TPOT() (tpot time.Duration, ok bool) {
	if r.OutputTokens <= 1 {
		return 0, false
	}
	return (r.End - r.FirstToken) / time.Duration(r.OutputTokens-1), true
}

// Result is one run.
type Result struct {
	Target  string
	Load    Load
	Started time.Time // wall clock at the schedule's origin
	// Duration runs from the schedule's origin to the last request's
	// completion (vLLM's benchmark_duration).
	Duration time.Duration
	// Requests is the workload's size.
	Requests int
	// Records holds the requests that finished (succeeded or failed), in
	// workload order.
	Records []Record
	// Interrupted counts requests that were in flight when the run's
	// context ended; they are not recorded. Requests not yet sent then are
	// Requests − len(Records) − Interrupted.
	Interrupted int
	// WarmupFailed counts warmup requests that failed.
	WarmupFailed int
}

// errNoChunk is vLLM's failure for a response without output.
const errNoChunk = "no output chunk received (cannot measure TTFT)"

// Run sends reqs to t under load and records each request. Arrivals follow
// Schedule(len(reqs), load.Rate, load.Burstiness, opts.Seed); a request
// that arrives while load.Concurrency requests are in flight waits, in
// arrival order, and the wait is its QueueTime. A request that fails
// (an error from Do, a timeout, no output chunk) is recorded with its
// Error and never stops the run. When ctx ends, Run stops sending, waits
// for the requests in flight to return and returns what finished with
// ctx.Err(). It runs at most one goroutine per request in flight.
func Run(ctx context.Context, t Target, reqs []Request, load Load, opts RunOptions) (*Result, error) {
	if err := load.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	now := opts.Now
	res := &Result{Target: t.Name(), Load: load, Requests: len(reqs)}
	var slots chan struct{}
	if load.Concurrency > 0 {
		slots = make(chan struct{}, load.Concurrency)
	}
	acquire := func() bool {
		if ctx.Err() != nil {
			return false
		}
		if slots == nil {
			return true
		}
		select {
		case slots <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	release := func() {
		if slots != nil {
			<-slots
		}
	}

	if load.Warmups > 0 && len(reqs) > 0 {
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range load.Warmups {
			if !acquire() {
				break
			}
			wg.Go(func() {
				defer release()
				if rec, interrupted := measure(ctx, t, reqs[0], load.Timeout, now, now(), now()); !interrupted && !rec.OK() {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		res.WarmupFailed = int(failed.Load())
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("bench: warmup: %w", err)
		}
	}

	offsets := Schedule(len(reqs), load.Rate, load.Burstiness, opts.Seed)
	t0 := now()
	res.Started = t0
	records := make([]Record, len(reqs))
	finished := make([]bool, len(reqs))
	var (
		mu          sync.Mutex
		done        int
		interrupted int
		wg          sync.WaitGroup
	)
	for i, r := range reqs {
		scheduled := t0.Add(offsets[i])
		arrival := scheduled
		if d := scheduled.Sub(now()); d > 0 {
			if opts.Sleep(ctx, d) != nil {
				break
			}
			arrival = now() // when it was sent for, as vLLM takes it
		}
		if !acquire() {
			break
		}
		wg.Go(func() {
			defer release()
			rec, intr := measure(ctx, t, r, load.Timeout, now, t0, arrival)
			mu.Lock()
			defer mu.Unlock()
			if intr {
				interrupted++
				return
			}
			records[i], finished[i] = rec, true
			done++
			if opts.Progress != nil {
				opts.Progress(done, len(reqs))
			}
		})
	}
	wg.Wait()
	res.Duration = now().Sub(t0)
	for i, ok := range finished {
		if ok {
			res.Records = append(res.Records, records[i])
		}
	}
	res.Interrupted = interrupted
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: run stopped after %d of %d requests: %w", len(res.Records), len(reqs), err)
	}
	return res, nil
}

// measure sends r and times it against origin t0; interrupted reports that
// ctx (the run's) ended before r finished.
func measure(ctx context.Context, t Target, r Request, timeout time.Duration, now func() time.Time, t0, arrival time.Time) (rec Record, interrupted bool) {
	rctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var (
		first, last time.Time
		tokens      int
	)
	rec.Index = r.Index
	st := now()
	rec.Start, rec.QueueTime = st.Sub(t0), st.Sub(arrival)
	resp, err := t.Do(rctx, r, func(n int, at time.Time) {
		if at.IsZero() {
			at = now()
		}
		if rec.Chunks == 0 {
			first = at
		} else {
			rec.ITL = append(rec.ITL, at.Sub(last))
		}
		last = at
		rec.Chunks++
		tokens += n
	})
	rec.Done = now().Sub(t0)
	if rec.Chunks > 0 {
		rec.FirstToken, rec.End = first.Sub(t0), last.Sub(t0)
	}
	rec.InputTokens, rec.OutputTokens, rec.FinishReason = resp.InputTokens, resp.OutputTokens, resp.FinishReason
	if rec.InputTokens <= 0 {
		rec.InputTokens = len(r.Prompt)
	}
	if rec.OutputTokens <= 0 {
		rec.OutputTokens = tokens
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return rec, true
	case err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded):
		rec.Error = fmt.Sprintf("timed out after %v: %v", timeout, err)
	case err != nil:
		rec.Error = err.Error()
	case rec.Chunks == 0:
		rec.Error = errNoChunk
	}
	return rec, false
}
