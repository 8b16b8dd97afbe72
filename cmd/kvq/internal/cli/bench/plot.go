package bench

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/bench"
)

// writePlots draws, into dir: the TTFT and TPOT CDFs of each cache at the
// last load, output throughput against the load level (with a sweep), and
// decode speed against depth.
func writePlots(dir string, r *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, c render.Chart) error {
		for _, f := range []struct {
			ext string
			fn  func(io.Writer, render.Chart) error
		}{{".svg", render.WriteSVG}, {".png", render.WritePNG}} {
			if err := atomicfile.Write(filepath.Join(dir, name+f.ext), func(w io.Writer) error { return f.fn(w, c) }); err != nil {
				return err
			}
		}
		return nil
	}
	for _, metric := range []string{"ttft", "tpot"} {
		ch := render.Chart{Title: "CDF of " + metric + " per cache (last load)", X: render.Axis{Label: metric + " (ms)"}, Y: render.Axis{Label: "share of requests", Max: 1}}
		for _, c := range r.Caches {
			if len(c.Points) == 0 || c.Points[len(c.Points)-1].Result == nil {
				continue
			}
			var xs []float64
			for _, rec := range c.Points[len(c.Points)-1].Result.Records {
				if !rec.OK() {
					continue
				}
				switch metric {
				case "ttft":
					xs = append(xs, float64(rec.TTFT().Microseconds())/1000)
				default:
					if t, ok := rec.TPOT(); ok {
						xs = append(xs, float64(t.Microseconds())/1000)
					}
				}
			}
			if len(xs) == 0 {
				continue
			}
			slices.Sort(xs)
			s := render.Series{Name: c.Cache}
			for i, x := range xs {
				s.X, s.Y = append(s.X, x), append(s.Y, float64(i+1)/float64(len(xs)))
			}
			ch.Series = append(ch.Series, s)
		}
		if len(ch.Series) > 0 {
			if err := write(metric+"-cdf", ch); err != nil {
				return err
			}
		}
	}
	if len(r.Loads) > 1 {
		label := "max concurrency"
		if r.Loads[0].Concurrency == r.Loads[len(r.Loads)-1].Concurrency {
			label = "request rate (req/s)"
		}
		ch := render.Chart{Title: "Output throughput against load", Markers: true, X: render.Axis{Label: label}, Y: render.Axis{Label: "output tokens/s"}}
		for _, c := range r.Caches {
			s := render.Series{Name: c.Cache}
			for _, p := range c.Points {
				x := float64(p.Load.Concurrency)
				if label != "max concurrency" {
					x = p.Load.Rate
				}
				s.X, s.Y = append(s.X, x), append(s.Y, p.Summary.OutputThroughput)
			}
			ch.Series = append(ch.Series, s)
		}
		if err := write("throughput-vs-load", ch); err != nil {
			return err
		}
	}
	ch := render.Chart{Title: "Decode speed of one sequence against depth", Markers: true, X: render.Axis{Label: "depth (tokens)"}, Y: render.Axis{Label: "tokens/s"}}
	for _, c := range r.Caches {
		s := render.Series{Name: c.Cache}
		for _, d := range c.Decode {
			if d.Skipped == "" {
				s.X, s.Y = append(s.X, float64(d.Depth)), append(s.Y, d.Median)
				s.Labels = append(s.Labels, strconv.Itoa(d.Depth))
			}
		}
		if len(s.X) > 0 {
			ch.Series = append(ch.Series, s)
		}
	}
	if len(ch.Series) > 0 {
		return write("decode-vs-depth", ch)
	}
	return nil
}
