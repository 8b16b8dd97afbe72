package eval

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/eval"
)

// View lays a report out as tables: caches (memory, speed, verdict), the
// teacher-forced distribution metrics, the suites, the long-context grid
// by context, and the gates. JSON output is the report itself; CSV is one
// long table of every number.
func View(rep *eval.Report) render.Report {
	r := render.Report{Value: rep}
	m := rep.Model
	layers := fmt.Sprintf("%d layers", m.Layers)
	if m.SlidingLayers != nil {
		layers += fmt.Sprintf(" (%d sliding, window %d)", len(m.SlidingLayers), m.SlidingWindow)
	}
	r.Preamble = append(r.Preamble, fmt.Sprintf("Model: %s (%s, %s, %d KV heads × %d, context %d, %s params)",
		m.Path, m.Arch, layers, m.KVHeads, m.HeadDim, m.Context, humanCount(m.Params)))
	if t := rep.Text; t != nil && len(t.Caches) > 0 {
		r.Preamble = append(r.Preamble, fmt.Sprintf("Text: %d positions scored in %d chunks of up to %d tokens (%s protocol)",
			t.Caches[0].Tokens, t.Chunks, t.Ctx, t.Protocol))
	}
	switch {
	case rep.Setup.Prefill == "server":
		r.Preamble = append(r.Preamble, "Model: the tokenizer and templates only; prompts go to the servers as token ids, decoded greedily")
	case rep.Setup.Prefill == "exact":
		r.Preamble = append(r.Preamble, "Attention: a prompt attends to its own exact K/V, later steps to the cache (--prefill exact, Hugging Face QuantizedCache)")
	default:
		r.Preamble = append(r.Preamble, "Attention: every step reads the cache as stored, prefill included (as vLLM and llama.cpp)")
	}
	r.Tables = append(r.Tables, cachesTable(rep))
	if rep.Text != nil {
		r.Tables = append(r.Tables, textTable(rep))
	}
	if len(rep.Suites) > 0 {
		r.Tables = append(r.Tables, suitesTable(rep))
	}
	if rep.Grid != nil {
		r.Tables = append(r.Tables, gridTable(rep))
	}
	if len(rep.Gates) > 0 {
		r.Tables = append(r.Tables, gatesTable(rep))
	}
	flat := flatTable(rep)
	r.Flat = &flat
	return r
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func thousands(x float64) string {
	s := strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

func verdict(rep *eval.Report, spec string) string {
	for _, v := range rep.Verdicts {
		if v.Cache == spec {
			if v.Pass {
				return "pass"
			}
			return fmt.Sprintf("FAIL (%d)", len(v.Failed))
		}
	}
	return "baseline"
}

// endpointsTable lists the servers of an endpoint run, whose memory kvq
// does not know.
func endpointsTable(rep *eval.Report) render.Table {
	t := render.Table{Title: "Deployments (OpenAI-compatible servers, evaluated through their API)",
		Header: []string{"NAME", "ENDPOINT", "MODEL", "VERDICT"},
		Align:  []render.Align{render.Left, render.Left, render.Left, render.Left}}
	for _, c := range rep.Caches {
		t.Rows = append(t.Rows, []string{c.Spec, c.Endpoint, c.ServedModel, verdict(rep, c.Spec)})
	}
	t.Notes = append(t.Notes, "memory and speed are the servers': kvq estimate and kvq bench --endpoint measure them")
	failed := 0
	for _, v := range rep.Verdicts {
		if !v.Pass {
			failed++
		}
	}
	if len(rep.Verdicts) > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%d of %d candidates pass every gate", len(rep.Verdicts)-failed, len(rep.Verdicts)))
	}
	return t
}

func cachesTable(rep *eval.Report) render.Table {
	if len(rep.Caches) > 0 && rep.Caches[0].Endpoint != "" {
		return endpointsTable(rep)
	}
	t := render.Table{Title: "Caches (bytes per token: all layers, K and V, as kvq estimate counts them)",
		Header: []string{"CACHE", "BYTES/TOKEN", "BITS/VALUE", "VS BASELINE", "PER REQUEST", "DECODE", "VERDICT"},
		Align:  []render.Align{render.Left, render.Right, render.Right, render.Right, render.Right, render.Right, render.Left}}
	speed := map[string]eval.SpeedResult{}
	for _, s := range rep.Speed {
		speed[s.Cache] = s
	}
	for i, c := range rep.Caches {
		dec := "-"
		if s, ok := speed[c.Spec]; ok {
			dec = fmt.Sprintf("%s tok/s", thousands(s.TokensPerSec))
			if i > 0 {
				dec = fmt.Sprintf("%.2fx time", s.Relative)
			}
		}
		req := "-"
		if c.RequestBytes > 0 {
			req = thousands(float64(c.RequestBytes)) + " B"
		}
		t.Rows = append(t.Rows, []string{c.Spec, thousands(c.BytesPerToken), fmt.Sprintf("%.2f", c.BitsPerValue),
			fmt.Sprintf("%.2fx", c.Compression), req, dec, verdict(rep, c.Spec)})
	}
	if len(rep.Speed) > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("DECODE: single-sequence decode after %d tokens, the baseline's tokens/s and each candidate's time per token over the baseline's (median of interleaved rounds)", rep.Speed[0].Depth))
	}
	t.Notes = append(t.Notes, "PER REQUEST: the fp16 windows (residual, staging) each sequence keeps")
	if len(rep.Caches) > 0 && rep.Caches[0].ContextBytes > 0 {
		var parts []string
		for _, c := range rep.Caches {
			parts = append(parts, fmt.Sprintf("%s %s of %s B", c.Spec, thousands(float64(c.ContextBytes)), thousands(float64(c.ContextBytesFull))))
		}
		t.Notes = append(t.Notes, fmt.Sprintf("Sliding-window layers keep only their window: one request of %d tokens holds at most %s (of: if every layer kept every position)",
			rep.Caches[0].ContextTokens, strings.Join(parts, ", ")))
	}
	if rc := rep.Recommendation; rc != nil {
		t.Notes = append(t.Notes, fmt.Sprintf("Recommendation: %s — %.0f%% less KV memory than the baseline (%.2fx), %s.", rc.Cache, 100*rc.Saving, rc.Compression, rc.Reason))
	} else if len(rep.Verdicts) > 0 {
		t.Notes = append(t.Notes, "Recommendation: none — no candidate smaller than the baseline passes every gate; keep the baseline.")
	}
	return t
}

func textTable(rep *eval.Report) render.Table {
	tr := rep.Text
	header := []string{"CACHE", "PPL", "ln(PPL/base)", "KLD mean", "KLD p99", "KLD max", "same top", "Δp RMS"}
	if tr.Protocol == eval.ProtocolLlamaCpp.String() {
		// llama-perplexity's names for the same quantities.
		header = []string{"CACHE", "Mean PPL(Q)", "Mean ln(PPL(Q)/PPL(base))", "Mean KLD", "99.0% KLD", "Maximum KLD", "Same top p", "RMS Δp"}
	}
	title := fmt.Sprintf("Distribution against %s (teacher-forced; KLD in nats)", rep.Caches[0].Spec)
	if tr.Approximation != "" {
		title = fmt.Sprintf("Distribution against %s (teacher-forced from the servers' prompt log-probabilities; KLD in nats, from top-k: an approximation)", rep.Caches[0].Spec)
	}
	t := render.Table{Title: title,
		Header: header,
		Align:  []render.Align{render.Left, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right}}
	for _, c := range tr.Caches {
		t.Rows = append(t.Rows, []string{c.Cache,
			fmt.Sprintf("%.4f ±%.4f", c.PPL, c.PPLErr),
			fmt.Sprintf("%+.5f ±%.5f", c.LnPPLRatio, c.LnPPLRatioErr),
			fmt.Sprintf("%.5f ±%.5f", c.KLD.Mean, c.KLD.Err),
			fmt.Sprintf("%.4f", c.KLD.P99), fmt.Sprintf("%.4f", c.KLD.Max),
			fmt.Sprintf("%.2f%%", 100*c.SameTop), fmt.Sprintf("%.3f%%", 100*c.DeltaP.RMS)})
	}
	if len(tr.Caches) > 1 && len(tr.Caches[1].ByPosition) > 1 {
		var parts []string
		for _, c := range tr.Caches[1:] {
			var b []string
			for _, p := range c.ByPosition {
				b = append(b, fmt.Sprintf("%.4f", p.KLD))
			}
			parts = append(parts, c.Cache+" "+strings.Join(b, " "))
		}
		var bounds []string
		for _, p := range tr.Caches[1].ByPosition {
			bounds = append(bounds, fmt.Sprintf("%d-%d", p.From, p.To))
		}
		t.Notes = append(t.Notes, "KLD by position ("+strings.Join(bounds, ", ")+"): "+strings.Join(parts, "; "))
	}
	if tr.Approximation != "" {
		t.Notes = append(t.Notes, tr.Approximation)
	}
	return t
}

func suitesTable(rep *eval.Report) render.Table {
	t := render.Table{Title: "Tasks (% of N; in brackets the difference from the baseline; * significant: exact McNemar p < 0.05 on the flips)",
		Header: []string{"TASK", "N"}, Align: []render.Align{render.Left, render.Right}}
	for _, c := range rep.Caches {
		t.Header = append(t.Header, c.Spec)
		t.Align = append(t.Align, render.Right)
	}
	for _, s := range rep.Suites {
		name := s.Name
		if !s.HigherIsBetter {
			name += " ↓"
		}
		row := []string{name, strconv.Itoa(s.N)}
		for i, c := range s.Caches {
			cell := fmt.Sprintf("%.1f", c.Score)
			if i == 0 {
				cell += fmt.Sprintf(" ±%.1f", c.Stderr)
			} else {
				cell += fmt.Sprintf(" (%+.1f)", c.Diff)
				if c.McNemarP < 0.05 {
					cell += "*"
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	t.Notes = append(t.Notes, "↓: a rate that should be low (false refusals); ±: the baseline's standard error, sqrt(p(1-p)/(n-1))")
	t.Notes = append(t.Notes, rulerQANotes(rep)...)
	return t
}

func gridTable(rep *eval.Report) render.Table {
	g := rep.Grid
	t := render.Table{Title: fmt.Sprintf("Long context: passkey accuracy %% by context, over %d depths (0..100%%)", len(g.Depths)),
		Header: []string{"CONTEXT"}, Align: []render.Align{render.Right}}
	for _, c := range g.Caches {
		t.Header = append(t.Header, c.Cache)
		t.Align = append(t.Align, render.Right)
	}
	for i, n := range g.Contexts {
		row := []string{strconv.Itoa(n)}
		for _, c := range g.Caches {
			var sum float64
			for _, v := range c.Accuracy[i] {
				sum += v
			}
			row = append(row, fmt.Sprintf("%.0f", sum/float64(len(c.Accuracy[i]))))
		}
		t.Rows = append(t.Rows, row)
	}
	t.Notes = append(t.Notes, "the context × depth heatmaps are in --report and --plot")
	return t
}

func gatesTable(rep *eval.Report) render.Table {
	t := render.Table{Title: "Gates", Header: []string{"GATE", "CACHE", "VALUE", "RESULT"},
		Align: []render.Align{render.Left, render.Left, render.Right, render.Left}}
	fails := 0
	for _, g := range rep.Gates {
		if g.Pass {
			continue
		}
		fails++
		t.Rows = append(t.Rows, []string{g.Label(), g.Cache, formatValue(g.Value), "FAIL: " + g.Message})
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d of %d gate checks passed (failures listed)", len(rep.Gates)-fails, len(rep.Gates)))
	return t
}

func formatValue(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// flatTable is every number in one long table (CSV output).
func flatTable(rep *eval.Report) render.Table {
	t := render.Table{Header: []string{"section", "name", "metric", "cache", "value", "err", "diff", "p"}}
	add := func(sec, name, metric, cache string, v, e, d, p float64) {
		f := func(x float64) string {
			if math.IsNaN(x) {
				return ""
			}
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		t.Rows = append(t.Rows, []string{sec, name, metric, cache, f(v), f(e), f(d), f(p)})
	}
	nan := math.NaN()
	for _, c := range rep.Caches {
		add("cache", c.Spec, "bytes_per_token", c.Spec, c.BytesPerToken, nan, nan, nan)
		add("cache", c.Spec, "compression", c.Spec, c.Compression, nan, nan, nan)
	}
	if rep.Text != nil {
		for _, c := range rep.Text.Caches {
			add("text", "text", "ppl", c.Cache, c.PPL, c.PPLErr, nan, nan)
			add("text", "text", "ln_ppl_ratio", c.Cache, c.LnPPLRatio, c.LnPPLRatioErr, nan, nan)
			add("text", "text", "kld_mean", c.Cache, c.KLD.Mean, c.KLD.Err, nan, nan)
			add("text", "text", "kld_p99", c.Cache, c.KLD.P99, nan, nan, nan)
			add("text", "text", "same_top", c.Cache, c.SameTop, c.SameTopErr, nan, nan)
			add("text", "text", "delta_p_rms", c.Cache, c.DeltaP.RMS, c.DeltaP.RMSErr, nan, nan)
		}
	}
	for _, s := range rep.Suites {
		for _, c := range s.Caches {
			add("suite", s.Name, s.Metric, c.Cache, c.Score, c.Stderr, c.Diff, c.McNemarP)
		}
	}
	for _, s := range rep.Speed {
		add("speed", "decode", "tokens_per_sec", s.Cache, s.TokensPerSec, nan, s.Relative, nan)
	}
	for _, g := range rep.Gates {
		p := nan
		if g.PValue != nil {
			p = *g.PValue
		}
		pass := 0.0
		if g.Pass {
			pass = 1
		}
		add("gate", g.Label(), "pass", g.Cache, pass, nan, g.Value, p)
	}
	return t
}
