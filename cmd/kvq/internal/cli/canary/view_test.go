package canary

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
)

// TestView: a terminal gets the block rewritten in place each window;
// other output one line per window and the last block at the end.
func TestView(t *testing.T) {
	reps := []*canary.Report{
		{Window: 1, End: time.Unix(0, 0), Result: canary.Result{Verdict: canary.Hold, Reasons: []string{"1 of the 3 windows a promote needs"}}},
		{Window: 2, End: time.Unix(10, 0), Result: canary.Result{Verdict: canary.Rollback, Reasons: []string{"flips: 7 items regressed"}},
			Actions: []canary.Action{{Time: time.Unix(10, 0), URL: "http://kvq/admin/route", Cache: "int2", OK: true, Status: 200}},
			Gates:   []canary.GateResult{{Gate: canary.Gate{Metric: canary.GateFlips}, Status: canary.StatusFail, Value: 7, Message: "7 items regressed"}}},
	}
	var tty bytes.Buffer
	v := newView(&cmdutil.IOStreams{Out: &tty, OutTTY: true}, false)
	for _, r := range reps {
		v.window(r)
	}
	v.final(reps[1])
	first := len(block(reps[0]))
	if out := tty.String(); !strings.Contains(out, "\x1b["+strconv.Itoa(first)+"A\x1b[J") || strings.Count(out, "window ") != 2 {
		t.Errorf("terminal output does not rewrite the %d-line block:\n%q", first, out)
	}
	var plain bytes.Buffer
	v = newView(&cmdutil.IOStreams{Out: &plain}, false)
	for _, r := range reps {
		v.window(r)
	}
	v.final(reps[1])
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	// The action is logged under its window's line, and again with the
	// evidence.
	if !strings.HasPrefix(lines[0], "window 1 ") || !strings.HasPrefix(lines[1], "window 2 ") || strings.Contains(plain.String(), "\x1b") ||
		lines[2] != "  action "+time.Unix(10, 0).Format("15:04:05")+": int2 share 0% at http://kvq/admin/route: ok" ||
		!strings.Contains(lines[len(lines)-2], "FAIL flips") || lines[len(lines)-1] != lines[2] {
		t.Errorf("plain output:\n%s", plain.String())
	}
}

// TestSecs: latencies print in ms, three digits, whole ms from 1 s on
// (a --fault-delay candidate's 1940 ms, not 1.94e+03).
func TestSecs(t *testing.T) {
	for _, c := range []struct {
		q    canary.Quantiles
		want string
	}{
		{canary.Quantiles{P50: 0.00502, P95: 0.0953, P99: 0.738, Count: 3}, "5.02/95.3/738 ms"},
		{canary.Quantiles{P50: 1.94, P95: 4.3825, P99: 12.5, Count: 3}, "1940/4382/12500 ms"},
		{canary.Quantiles{Count: 0}, "-"},
	} {
		if got := secs(c.q); got != c.want {
			t.Errorf("secs(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}

// TestVerdictError: the verdict's exit error; a rollback whose switch
// failed says so and still exits 3.
func TestVerdictError(t *testing.T) {
	rollback := canary.Result{Verdict: canary.Rollback, Reasons: []string{"flips: 9 items regressed"}}
	failedAct := canary.Action{Cache: "int2", Error: "canary: route switch failed: HTTP 503: down"}
	for _, c := range []struct {
		rep  canary.Report
		act  bool
		want string // "" nil
		gate bool
	}{
		{canary.Report{Result: canary.Result{Verdict: canary.Promote}}, true, "", false},
		{canary.Report{Result: canary.Result{Verdict: canary.Hold, Reasons: []string{"1 of the 3 windows"}}}, false, "1 of the 3 windows", false},
		{canary.Report{Result: rollback}, false, "1 canary gate(s) (verdict rollback) failed", true},
		{canary.Report{Result: rollback, Actions: []canary.Action{{Cache: "int2", OK: true}}}, true, "1 canary gate(s) (verdict rollback) failed", true},
		{canary.Report{Result: rollback, Actions: []canary.Action{failedAct}}, true, "verdict rollback; --act did NOT set int2's share to 0%: canary: route switch failed: HTTP 503: down", true},
		{canary.Report{Result: rollback, Actions: []canary.Action{failedAct, {Cache: "int2", OK: true}}}, true, "1 canary gate(s) (verdict rollback) failed", true},
	} {
		err := verdictError(&c.rep, c.act)
		var ge *cmdutil.GateError
		switch {
		case c.want == "" && err != nil, c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: err %v, want %q", c.rep.Result, err, c.want)
		case c.gate != errors.As(err, &ge):
			t.Errorf("%+v: err %T, GateError (exit 3) %v", c.rep.Result, err, c.gate)
		}
	}
}
