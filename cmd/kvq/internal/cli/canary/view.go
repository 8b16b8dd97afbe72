package canary

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
)

// view prints the windows: JSON lines, a block of lines rewritten in
// place on a terminal, or plain lines.
type view struct {
	out   io.Writer
	json  bool
	tty   bool
	lines int       // lines of the block on screen
	acted time.Time // the last action printed (plain lines)
}

func newView(s *cmdutil.IOStreams, asJSON bool) *view {
	return &view{out: s.Out, json: asJSON, tty: s.OutTTY}
}

func (v *view) window(r *canary.Report) {
	if v.json {
		if r.Kind == "final" {
			return // final writes it
		}
		v.writeJSON(r)
		return
	}
	lines := block(r)
	if v.tty {
		// Back to the block's first line, clear to the end of the screen
		// (the new block may be shorter), and print it again.
		if v.lines > 0 {
			fmt.Fprintf(v.out, "\x1b[%dA", v.lines)
		}
		fmt.Fprint(v.out, "\x1b[J")
		for _, l := range lines {
			fmt.Fprintln(v.out, l)
		}
		v.lines = len(lines)
		return
	}
	fmt.Fprintln(v.out, lines[0])
	// The switches pulled in this window are logged as they happen (the
	// report keeps the last ones only).
	for _, a := range r.Actions {
		if a.Time.After(v.acted) {
			fmt.Fprintln(v.out, actionLine(a))
			v.acted = a.Time
		}
	}
}

func (v *view) writeJSON(r *canary.Report) {
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(v.out, "{\"error\": %q}\n", err.Error())
		return
	}
	fmt.Fprintf(v.out, "%s\n", b)
}

// final prints the last report: the JSON object, or the full block.
func (v *view) final(r *canary.Report) {
	if v.json {
		f := *r
		f.Kind = "final"
		v.writeJSON(&f)
		return
	}
	if v.tty {
		return // the block on screen is the last window's
	}
	for _, l := range block(r)[1:] {
		fmt.Fprintln(v.out, l)
	}
}

// block is a window's lines: a summary line first.
func block(r *canary.Report) []string {
	b, c := r.Interval.Baseline, r.Interval.Candidate
	verdict := strings.ToUpper(r.Result.Verdict)
	reason := ""
	if len(r.Result.Reasons) > 0 {
		reason = " (" + r.Result.Reasons[0]
		if len(r.Result.Reasons) > 1 {
			reason += fmt.Sprintf("; +%d more", len(r.Result.Reasons)-1)
		}
		reason += ")"
	}
	summary := fmt.Sprintf("window %d  %s  %s%s", r.Window, r.End.Format("15:04:05"), verdict, reason)
	if r.Probe != nil {
		summary += fmt.Sprintf("  probe %d/%d items, %d regressed", r.Probe.Items, r.Probe.SetSize, r.Probe.Regressed)
	}
	if len(r.Errors) > 0 {
		summary += "  scrape failed: " + strings.Join(r.Errors, "; ")
	}
	out := []string{summary}
	out = append(out,
		fmt.Sprintf("  %-15s %-26s %-26s %s", "", "baseline ("+engineName(r.Baseline.Engine)+")", "candidate ("+engineName(r.Candidate.Engine)+")", "cand/base"),
		fmt.Sprintf("  %-15s %-26s %-26s", "requests", count(b.Requests), count(c.Requests)),
		fmt.Sprintf("  %-15s %-26s %-26s", "errors", pct(b.ErrorRate), pct(c.ErrorRate)),
		fmt.Sprintf("  %-15s %-26s %-26s", "aborts", pct(b.AbortRate), pct(c.AbortRate)),
		fmt.Sprintf("  %-15s %-26s %-26s %s", "TTFT p50/95/99", secs(b.TTFT), secs(c.TTFT), ratio(r.Ratios, "ttft-p95")),
		fmt.Sprintf("  %-15s %-26s %-26s %s", "ITL p50/95/99", secs(b.ITL), secs(c.ITL), ratio(r.Ratios, "itl-p95")),
		fmt.Sprintf("  %-15s %-26s %-26s %s", "E2E p50/95/99", secs(b.E2E), secs(c.E2E), ratio(r.Ratios, "e2e-p95")),
		fmt.Sprintf("  %-15s %-26s %-26s", "preempt/req", num(b.PreemptionRate, "%.3f"), num(c.PreemptionRate, "%.3f")),
		fmt.Sprintf("  %-15s %-26s %-26s", "KV usage", pct(b.KVUsage), pct(c.KVUsage)),
	)
	if p := r.Probe; p != nil {
		out = append(out, fmt.Sprintf("  probe: %d of %d items scored, pass %d → %d, %d regressed, %d improved (McNemar p %.3g), drift %.0f%%, top-k KLD %s; load %g rpm set, %.1f rpm sent, %d requests per server (%d/%d failed)",
			p.Items, p.SetSize, p.BaselinePass, p.CandidatePass, p.Regressed, p.Improved, p.McNemarP, 100*p.ExactDrift, num(p.KLD, "%.4f"),
			p.RPM, p.ActualRPM, p.Requests, p.BaselineErrors, p.CandidateErrors))
		n := 0
		for _, f := range p.Flips {
			if f.Direction != "regressed" || n == 5 {
				continue
			}
			n++
			out = append(out, fmt.Sprintf("    flip %s: %q → %q", f.Name(), oneLine(f.Baseline), oneLine(f.Candidate)))
		}
	}
	for _, g := range r.Gates {
		mark := map[string]string{canary.StatusPass: "ok  ", canary.StatusFail: "FAIL", canary.StatusPending: "wait", canary.StatusNA: "n/a "}[g.Status]
		line := fmt.Sprintf("  %s %-37s", mark, g.Gate.String())
		if !math.IsNaN(g.Value) {
			line += fmt.Sprintf(" %.4g", g.Value)
		}
		if g.Message != "" {
			line += "  " + g.Message
		}
		out = append(out, line)
	}
	for _, a := range r.Actions {
		out = append(out, actionLine(a))
	}
	return out
}

// actionLine is a switch kvq pulled, or tried to.
func actionLine(a canary.Action) string {
	s := "ok"
	if !a.OK {
		s = a.Error
	}
	return fmt.Sprintf("  action %s: %s share %g%% at %s: %s", a.Time.Format("15:04:05"), a.Cache, a.Percent, a.URL, s)
}

func engineName(e string) string {
	if e == "" {
		return "?"
	}
	return e
}

func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

func num(v float64, f string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf(f, v)
}

func count(v float64) string { return num(v, "%.0f") }

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

func secs(q canary.Quantiles) string {
	if q.Count == 0 {
		return "-"
	}
	ms := func(v float64) string {
		if v >= 1 {
			return num(1000*v, "%.0f") // 1940, not 1.94e+03
		}
		return num(1000*v, "%.3g")
	}
	return ms(q.P50) + "/" + ms(q.P95) + "/" + ms(q.P99) + " ms"
}

func ratio(m map[string]*float64, k string) string {
	if v := m[k]; v != nil {
		return fmt.Sprintf("%.2f× (p95)", *v)
	}
	return "-"
}
