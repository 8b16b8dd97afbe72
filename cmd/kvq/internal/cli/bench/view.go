package bench

import (
	"fmt"
	"strconv"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/bench"
)

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func loadLabel(l bench.Load) string {
	rate := "inf"
	if l.Rate > 0 {
		rate = strconv.FormatFloat(l.Rate, 'g', 4, 64) + "/s"
	}
	c := "∞"
	if l.Concurrency > 0 {
		c = strconv.Itoa(l.Concurrency)
	}
	return "rate " + rate + ", conc " + c
}

// view lays the report out.
func view(r *bench.Report, pct []float64) render.Report {
	out := render.Report{Value: r}
	out.Preamble = append(out.Preamble, fmt.Sprintf("Model: %s (%s); %s, %d CPUs, %s kernels", r.Model, r.Mode, r.Machine.Arch, r.Machine.CPUs, r.Machine.Kernels))
	w := r.Workload
	out.Preamble = append(out.Preamble, fmt.Sprintf("Workload: %s, %d requests, %d prompt tokens, %d output tokens asked, seed %d", w.Dataset, w.Requests, w.InputTokens, w.OutputTokens, w.Seed))
	if r.Budget > 0 {
		src := ""
		if r.BudgetSource != "" {
			src = "; from " + r.BudgetSource
		}
		out.Preamble = append(out.Preamble, fmt.Sprintf("KV budget: %s per cache pool (blocks, fp16 windows and codec state, as kvq estimate counts them%s)", bytesLabel(r.Budget), src))
	}
	hi := 99.0
	if len(pct) > 0 {
		hi = pct[len(pct)-1]
	}
	p := "P" + strconv.FormatFloat(hi, 'g', -1, 64)
	hdr := []string{"CACHE", "LOAD", "DONE", "FAIL", "REQ/S", "OUT TOK/S", "TTFT MED", "TTFT " + p, "TPOT MED", "TPOT " + p, "ITL MED", "E2EL MED", "MAX CONC"}
	if r.Mode == bench.ModeInProcess {
		hdr = append(hdr, "RUNNING PEAK", "KV PEAK", "PREEMPT")
	}
	t := render.Table{Key: 2, Title: "Serving (latencies in ms; vLLM bench serve's definitions, see kvq bench --help)", Header: hdr}
	for i := range hdr {
		a := render.Right
		if i < 2 {
			a = render.Left
		}
		t.Align = append(t.Align, a)
	}
	for _, c := range r.Caches {
		for _, pt := range c.Points {
			s := pt.Summary
			row := []string{c.Cache, loadLabel(pt.Load), strconv.Itoa(s.Completed), strconv.Itoa(s.Failed),
				strconv.FormatFloat(s.RequestThroughput, 'f', 2, 64), strconv.FormatFloat(s.OutputThroughput, 'f', 1, 64),
				ms(s.TTFT.Median), ms(at(s.TTFT, hi)), ms(s.TPOT.Median), ms(at(s.TPOT, hi)), ms(s.ITL.Median), ms(s.E2EL.Median),
				strconv.Itoa(s.MaxConcurrentRequests)}
			if r.Mode == bench.ModeInProcess {
				e := pt.Engine
				if e == nil {
					e = &bench.EngineStats{}
				}
				row = append(row, strconv.Itoa(e.RunningPeak), fmt.Sprintf("%.0f%%", 100*e.KVUsagePeak), strconv.FormatInt(e.Preemptions, 10))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	if r.Mode == bench.ModeInProcess {
		t.Notes = append(t.Notes, "RUNNING PEAK: the most sequences the engine ran at once in the budget; waiting requests queue in the engine (MAX CONC counts them in flight on the client side).")
	}
	out.Tables = append(out.Tables, t)
	if len(r.Caches) > 1 {
		ct := render.Table{Title: "Capacity and cost against " + r.Caches[0].Cache, Header: []string{"CACHE", "CAPACITY", "VS BASELINE", "OUT TOK/S VS", "TPOT VS", "TTFT VS"},
			Align: []render.Align{render.Left, render.Right, render.Right, render.Right, render.Right, render.Right}}
		b := r.Caches[0]
		for _, c := range r.Caches {
			ct.Rows = append(ct.Rows, []string{c.Cache, strconv.Itoa(c.CapacityLevel), ratio(float64(c.CapacityLevel), float64(b.CapacityLevel)),
				ratio(c.OutputThroughput, b.OutputThroughput), ratio(c.MedianTPOTms, b.MedianTPOTms), ratio(c.MedianTTFTms, b.MedianTTFTms)})
		}
		switch {
		case r.Caches[0].Capacity != nil:
			ct.Notes = append(ct.Notes, "CAPACITY: the largest load level whose latency percentile meets --goodput (and every lower level too).")
		case r.Mode == bench.ModeEndpoint:
			ct.Notes = append(ct.Notes, "CAPACITY: the most requests in flight at once on the client side (a server's own admission is not visible from here); give --goodput SLOs and a --max-concurrency sweep for an SLO-bound capacity.")
		default:
			ct.Notes = append(ct.Notes, "CAPACITY: the most requests served at once within the KV budget (the running peak); give --goodput SLOs and a --max-concurrency sweep for an SLO-bound capacity.")
		}
		out.Tables = append(out.Tables, ct)
	}
	var depths []int
	for _, c := range r.Caches {
		for _, d := range c.Decode {
			if !containsInt(depths, d.Depth) {
				depths = append(depths, d.Depth)
			}
		}
	}
	if len(depths) > 0 {
		hdr := []string{"CACHE"}
		for _, d := range depths {
			hdr = append(hdr, "tg @ d"+strconv.Itoa(d))
		}
		dt := render.Table{Title: "Decode tokens/s of one sequence after a prefill of d tokens (median; llama-bench's tg n @ d)", Header: hdr}
		for range hdr {
			dt.Align = append(dt.Align, render.Right)
		}
		dt.Align[0] = render.Left
		for _, c := range r.Caches {
			row := []string{c.Cache}
			for _, d := range depths {
				v := "-"
				for _, p := range c.Decode {
					if p.Depth == d {
						if p.Skipped != "" {
							v = "skipped"
						} else {
							v = strconv.FormatFloat(p.Median, 'f', 1, 64)
						}
					}
				}
				row = append(row, v)
			}
			dt.Rows = append(dt.Rows, row)
		}
		out.Tables = append(out.Tables, dt)
	}
	flat := t
	out.Flat = &flat
	return out
}

func at(s bench.Stats, p float64) float64 {
	v, _ := s.Percentile(p)
	return v
}

func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func bytesLabel(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}
