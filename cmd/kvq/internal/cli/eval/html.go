package eval

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/eval"
)

// plot is one of the report's pictures, as SVG and PNG.
type plot struct {
	name    string // file base name
	caption string
	svg     func(io.Writer) error
	png     func(io.Writer) error
}

// plots are the report's pictures: the long-context grid of the baseline,
// each candidate and its difference from the baseline; KLD by position;
// task score and KLD against bits per value.
func plots(rep *eval.Report) []plot {
	var out []plot
	if g := rep.Grid; g != nil && len(g.Caches) > 0 {
		cols := make([]string, len(g.Contexts))
		for i, n := range g.Contexts {
			cols[i] = contextLabel(n)
		}
		rows := make([]string, len(g.Depths))
		for j, d := range g.Depths {
			rows[j] = fmt.Sprintf("%.0f%%", 100*d)
		}
		// Values[depth][context].
		cells := func(acc [][]float64) [][]float64 {
			v := make([][]float64, len(g.Depths))
			for j := range g.Depths {
				v[j] = make([]float64, len(g.Contexts))
				for i := range g.Contexts {
					v[j][i] = acc[i][j]
				}
			}
			return v
		}
		base := g.Caches[0]
		for ci, c := range g.Caches {
			h := render.Heatmap{Title: fmt.Sprintf("Passkey accuracy, %s (%%, %d per cell)", c.Cache, c.N), XLabel: "context (tokens)",
				YLabel: "needle depth", Columns: cols, Rows: rows, Values: cells(c.Accuracy), Min: 0, Max: 100, Legend: "accuracy (%)"}
			out = append(out, heatmapPlot("long-context-"+fileName(c.Cache), h.Title, h))
			if ci == 0 {
				continue
			}
			diff := make([][]float64, len(c.Accuracy))
			for i := range c.Accuracy {
				diff[i] = make([]float64, len(c.Accuracy[i]))
				for j := range c.Accuracy[i] {
					diff[i][j] = c.Accuracy[i][j] - base.Accuracy[i][j]
				}
			}
			d := render.Heatmap{Title: fmt.Sprintf("Passkey accuracy, %s minus %s (points)", c.Cache, base.Cache), XLabel: "context (tokens)",
				YLabel: "needle depth", Columns: cols, Rows: rows, Values: cells(diff), Min: -100, Max: 100, Scale: render.ScaleRedBlue, Legend: "difference (points)"}
			out = append(out, heatmapPlot("long-context-diff-"+fileName(c.Cache), d.Title, d))
		}
	}
	if t := rep.Text; t != nil && len(t.Caches) > 1 && len(t.Caches[1].ByPosition) > 0 {
		ch := render.Chart{Title: "KL divergence to the baseline by position in the chunk",
			X: render.Axis{Label: "position (bucket end, tokens)"}, Y: render.Axis{Label: "mean KLD (nats)"}}
		for _, c := range t.Caches[1:] {
			s := render.Series{Name: c.Cache}
			for _, b := range c.ByPosition {
				s.X = append(s.X, float64(b.To))
				s.Y = append(s.Y, b.KLD)
			}
			ch.Series = append(ch.Series, s)
		}
		out = append(out, chartPlot("kld-by-position", ch.Title, ch))
	}
	if len(rep.Caches) > 1 {
		score := map[string][]float64{}
		for _, s := range rep.Suites {
			for _, c := range s.Caches {
				v := c.Score
				if !s.HigherIsBetter {
					v = 100 - v
				}
				score[c.Cache] = append(score[c.Cache], v)
			}
		}
		if len(score) > 0 {
			ch := render.Chart{Title: "Mean task score against bits per cached value", Markers: true,
				X: render.Axis{Label: "bits per value", Min: 2}, Y: render.Axis{Label: "mean score over the suite rows (%; 100 − rate for rates that should be low)", Max: 100}}
			for _, c := range rep.Caches {
				v := score[c.Spec]
				if len(v) == 0 {
					continue
				}
				var sum float64
				for _, x := range v {
					sum += x
				}
				ch.Series = append(ch.Series, render.Series{Name: c.Spec, X: []float64{c.BitsPerValue}, Y: []float64{sum / float64(len(v))}, Labels: []string{c.Spec}})
			}
			out = append(out, chartPlot("quality-vs-bits", ch.Title, ch))
		}
		if t := rep.Text; t != nil {
			ch := render.Chart{Title: "Mean KL divergence against bits per cached value", Markers: true,
				X: render.Axis{Label: "bits per value", Min: 2}, Y: render.Axis{Label: "mean KLD to the baseline (nats)"}}
			for i, c := range t.Caches {
				if i == 0 || i >= len(rep.Caches) {
					continue
				}
				ch.Series = append(ch.Series, render.Series{Name: c.Cache, X: []float64{rep.Caches[i].BitsPerValue}, Y: []float64{c.KLD.Mean}, Labels: []string{c.Cache}})
			}
			if len(ch.Series) > 0 {
				out = append(out, chartPlot("kld-vs-bits", ch.Title, ch))
			}
		}
	}
	return out
}

func heatmapPlot(name, caption string, h render.Heatmap) plot {
	return plot{name: name, caption: caption,
		svg: func(w io.Writer) error { return render.WriteHeatmapSVG(w, h) },
		png: func(w io.Writer) error { return render.WriteHeatmapPNG(w, h) }}
}

func chartPlot(name, caption string, c render.Chart) plot {
	return plot{name: name, caption: caption,
		svg: func(w io.Writer) error { return render.WriteSVG(w, c) },
		png: func(w io.Writer) error { return render.WritePNG(w, c) }}
}

func contextLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprint(n)
}

// fileName makes a cache spec usable in a file name.
func fileName(spec string) string {
	r := strings.NewReplacer("/", "_", ":", "_", ",", "_", "=", "-", "@", "_", " ", "_")
	return r.Replace(spec)
}

// WriteHTML writes the self-contained HTML report: the summary tables, the
// gates, the review of every flipped item, and every plot inline.
func WriteHTML(w io.Writer, rep *eval.Report) error {
	view := View(rep)
	doc := render.HTMLDoc{Title: "kvq eval: " + rep.Model.Path, Subtitle: strings.Join(view.Preamble, " · ")}
	sum := render.HTMLSection{Heading: "Summary"}
	fails := 0
	for _, g := range rep.Gates {
		if !g.Pass {
			fails++
		}
	}
	sum.Paragraphs = append(sum.Paragraphs, fmt.Sprintf("%d of %d gate checks passed. kvq %s, report schema %s.", len(rep.Gates)-fails, len(rep.Gates), rep.Version, rep.Schema))
	sum.Tables = view.Tables
	doc.Sections = append(doc.Sections, sum)
	if len(rep.Suites) > 0 && len(rep.Caches) > 1 {
		doc.Sections = append(doc.Sections, reviewSection(rep))
	}
	var figs []render.Figure
	for _, p := range plots(rep) {
		var b bytes.Buffer
		if err := p.svg(&b); err != nil {
			return fmt.Errorf("plot %s: %w", p.name, err)
		}
		figs = append(figs, render.Figure{Caption: p.caption, SVG: b.Bytes()})
	}
	if len(figs) > 0 {
		doc.Sections = append(doc.Sections, render.HTMLSection{Heading: "Plots", Figures: figs})
	}
	return render.WriteHTML(w, doc)
}

// WritePlots writes every plot into dir as NAME.svg and NAME.png.
func WritePlots(dir string, rep *eval.Report) error {
	for _, p := range plots(rep) {
		for _, f := range []struct {
			ext   string
			write func(io.Writer) error
		}{{".svg", p.svg}, {".png", p.png}} {
			path := filepath.Join(dir, p.name+f.ext)
			if err := atomicfile.Write(path, f.write); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}

// reviewSection lists every item whose verdict differs between the
// baseline and a candidate (eval.Report.Flips), regressions first, each
// with its prompt excerpt, reference, both outputs and both verdicts;
// the reader filters them by suite and by cache.
func reviewSection(rep *eval.Report) render.HTMLSection {
	sec := render.HTMLSection{Heading: "Review: flipped items"}
	if len(rep.Flips) == 0 {
		sec.Paragraphs = []string{"No item flipped: every candidate passes and fails the same items as the baseline."}
		return sec
	}
	reg := 0
	for _, f := range rep.Flips {
		if f.Direction == eval.FlipRegressed {
			reg++
		}
	}
	sec.Paragraphs = []string{fmt.Sprintf("%d items flipped between the baseline and a candidate: %d regressed (passed with the baseline, fail with the candidate) and %d improved. "+
		"Regressions come first. Read them before signing off: a flip is a judgement of the metric, and the outputs show whether it matters.", len(rep.Flips), reg, len(rep.Flips)-reg)}
	cards := &render.HTMLCards{Filters: []string{"suite", "cache"}}
	verdict := func(pass bool, v float64) string {
		if pass {
			return fmt.Sprintf("pass (%.3g)", v)
		}
		return fmt.Sprintf("fail (%.3g)", v)
	}
	for _, f := range rep.Flips {
		cards.Cards = append(cards.Cards, render.HTMLCard{
			Title: fmt.Sprintf("%s #%d · %s · %s", f.Suite, f.Index, f.Metric, f.Cache),
			Badge: f.Direction, Alert: f.Direction == eval.FlipRegressed,
			Tags: []string{f.Suite, f.Cache},
			Fields: []render.HTMLField{
				{Label: "Prompt (excerpt)", Text: f.Prompt},
				{Label: "Reference", Text: f.Reference},
				{Label: fmt.Sprintf("%s (baseline): %s", f.Baseline, verdict(f.BaselinePass, f.BaselineValue)), Text: f.BaselineOutput, Half: true},
				{Label: fmt.Sprintf("%s: %s", f.Cache, verdict(f.Pass, f.Value)), Text: f.Output, Half: true},
			},
		})
	}
	sec.Cards = cards
	return sec
}
