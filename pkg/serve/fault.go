package serve

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Fault injects latency and failures into a server's completions, for
// canary drills and tests: one process can play a degraded candidate, so
// that a canary judge (kvq canary) can be seen to roll it back. Never
// for production traffic.
type Fault struct {
	// Delay is waited before each completion goes to the engine: its time
	// to first token, as the client and the TTFT and E2E metrics see it,
	// grows by Delay.
	Delay time.Duration
	// ErrorRate is the share (0..1) of completions answered with a 500
	// (type server_error, code "injected_fault") and counted as the
	// engine's failures are, finished_reason "error". The k-th completion
	// the fault applies to fails when the first output of a PCG seeded
	// with (Seed, k) is below ErrorRate, so a test knows which.
	ErrorRate float64
	Seed      uint64
	// Cache restricts the faults to the completions that cache serves;
	// "" every cache.
	Cache string
}

// On reports whether f injects anything.
func (f Fault) On() bool { return f.Delay > 0 || f.ErrorRate > 0 }

func (f Fault) check(caches []string) error {
	switch {
	case f.Delay < 0:
		return fmt.Errorf("%w: fault delay %v: must be ≥ 0", ErrOptions, f.Delay)
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1):
		return fmt.Errorf("%w: fault error rate %v: must be in [0, 1]", ErrOptions, f.ErrorRate)
	case f.Cache != "" && !slices.Contains(caches, f.Cache):
		return fmt.Errorf("%w: fault cache %q, which the engine lacks (it has %s)", ErrOptions, f.Cache, strings.Join(caches, ", "))
	}
	return nil
}

// applies reports whether f applies to a completion served by cache.
func (f Fault) applies(cache string) bool {
	return f.On() && (f.Cache == "" || f.Cache == cache)
}

var errInjected = &apiError{status: http.StatusInternalServerError, message: "injected fault: this completion failed on purpose (the server injects errors for a canary drill)", typ: typeServer, code: "injected_fault"}

// inject applies the faults to a completion of jobs before it goes to the
// engine: an injected error (counted as a failure), or the delay. start
// is when the completion began. It returns nil to go on, gone when the
// client left during the delay.
func (s *Server) inject(r *http.Request, jobs []*job, start time.Time) *apiError {
	f := s.opts.Fault
	if !f.applies(jobs[0].cache) {
		return nil
	}
	if f.ErrorRate > 0 && draw(f.Seed, s.faultN.Add(1)-1) < f.ErrorRate {
		for _, j := range jobs {
			s.metrics.finish(j.cache, "error", time.Since(start))
		}
		return errInjected
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			for _, j := range jobs {
				s.metrics.finish(j.cache, "abort", time.Since(start))
			}
			if s.base.Err() != nil {
				return errShuttingDown
			}
			return gone
		}
	}
	return nil
}
