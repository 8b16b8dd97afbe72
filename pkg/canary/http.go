package canary

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// VerdictServer serves the latest report over HTTP for the systems that
// consult a judge:
//
//	GET /verdict           the report as JSON (Argo Rollouts' web metric
//	                       provider: jsonPath "{$.result.verdict}",
//	                       successCondition result == "promote")
//	GET or POST /flagger   200 unless the verdict is rollback, then 503
//	                       (a Flagger rollout webhook: a non-2xx answer is
//	                       a failed check)
//	GET /flagger/promote   200 only on promote, else 503 (a Flagger
//	                       confirm-promotion webhook)
//	GET /metrics           kvq_canary_verdict{verdict} (1 on the current
//	                       one), kvq_canary_actions_total,
//	                       kvq_canary_action_failures_total,
//	                       kvq_canary_windows_total, kvq_canary_gate_failed{metric}
//	GET /healthz           200
//
// It is safe for concurrent use; Update replaces the report.
type VerdictServer struct {
	mu       sync.Mutex
	rep      *Report
	actions  int // switches pulled
	failures int // switch attempts that failed
	seen     map[time.Time]bool
}

// NewVerdictServer returns a server whose verdict is hold until the first
// Update.
func NewVerdictServer() *VerdictServer {
	return &VerdictServer{rep: &Report{Schema: Schema, Kind: "window", Result: Result{Verdict: Hold, Reasons: []string{"no window yet"}},
		Gates: []GateResult{}, Actions: []Action{}, Errors: []string{}}}
}

// Update makes rep the served report.
func (s *VerdictServer) Update(rep *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep = rep
	if s.seen == nil {
		s.seen = map[time.Time]bool{}
	}
	for _, a := range rep.Actions {
		if s.seen[a.Time] {
			continue
		}
		s.seen[a.Time] = true
		if a.OK {
			s.actions++
		} else {
			s.failures++
		}
	}
}

// ServeHTTP answers the endpoints above.
func (s *VerdictServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Flagger POSTs its webhooks (the payload names the canary; the
	// verdict does not depend on it); the others GET.
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	rep, actions, failures := s.rep, s.actions, s.failures
	b, err := json.Marshal(rep)
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	verdict := rep.Result.Verdict
	switch r.URL.Path {
	case "/verdict", "/":
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(b, '\n'))
	case "/flagger", "/flagger/promote":
		ok := verdict != Rollback
		if r.URL.Path == "/flagger/promote" {
			ok = verdict == Promote
		}
		status := http.StatusOK
		if !ok {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"verdict": verdict, "reasons": rep.Result.Reasons})
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# HELP kvq_canary_verdict The canary's current verdict (1 on it, 0 on the others).")
		fmt.Fprintln(w, "# TYPE kvq_canary_verdict gauge")
		for _, v := range []string{Promote, Hold, Rollback} {
			x := 0
			if v == verdict {
				x = 1
			}
			fmt.Fprintf(w, "kvq_canary_verdict{verdict=%q} %d\n", v, x)
		}
		fmt.Fprintln(w, "# HELP kvq_canary_actions_total Switches pulled (kvq serve admin route set to 0% on a rollback).")
		fmt.Fprintln(w, "# TYPE kvq_canary_actions_total counter")
		fmt.Fprintf(w, "kvq_canary_actions_total %d\n", actions)
		fmt.Fprintln(w, "# HELP kvq_canary_action_failures_total Switch attempts that failed (retried each window).")
		fmt.Fprintln(w, "# TYPE kvq_canary_action_failures_total counter")
		fmt.Fprintf(w, "kvq_canary_action_failures_total %d\n", failures)
		fmt.Fprintln(w, "# HELP kvq_canary_windows_total Windows judged.")
		fmt.Fprintln(w, "# TYPE kvq_canary_windows_total counter")
		fmt.Fprintf(w, "kvq_canary_windows_total %d\n", rep.Window)
		fmt.Fprintln(w, "# HELP kvq_canary_gate_failed Whether a gate failed in the last window (1) or not (0).")
		fmt.Fprintln(w, "# TYPE kvq_canary_gate_failed gauge")
		for _, g := range rep.Gates {
			x := 0
			if g.Status == StatusFail {
				x = 1
			}
			fmt.Fprintf(w, "kvq_canary_gate_failed{metric=%q} %d\n", g.Gate.Metric, x)
		}
	case "/healthz":
		w.Write([]byte("ok\n"))
	default:
		http.NotFound(w, r)
	}
}

// ReadHeaderTimeout bounds a verdict request's headers.
const ReadHeaderTimeout = 10 * time.Second

// NewVerdictServerReport is the report a VerdictServer serves before its
// first Update.
func NewVerdictServerReport() *Report { return NewVerdictServer().rep }
