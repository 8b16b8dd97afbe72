package calibrate

import (
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/calibrate"
)

// writePlots draws the statistics into dir: the absmax (and 99.9th
// percentile) of K and V by layer, and per-channel absmax heatmaps of K
// and V (rows layers, columns channels): the picture of keys' outlier
// channels, why keys want per-channel quantization while values, whose
// channels are alike, do fine per token.
func writePlots(dir string, st *calibrate.Stats) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	layers := make([]float64, st.Layers)
	for i := range layers {
		layers[i] = float64(i)
	}
	series := func(name string, f func(l calibrate.LayerStats) float64) render.Series {
		s := render.Series{Name: name, X: layers}
		for _, l := range st.Layer {
			s.Y = append(s.Y, f(l))
		}
		return s
	}
	p999 := -1
	for i, p := range st.Percentiles {
		if p == 99.9 {
			p999 = i
		}
	}
	ch := render.Chart{Title: "Absmax of K (after RoPE) and V by layer", X: render.Axis{Label: "layer", Step: 1}, Y: render.Axis{Label: "|x|"},
		Series: []render.Series{
			series("K absmax", func(l calibrate.LayerStats) float64 { return l.K.Absmax }),
			series("V absmax", func(l calibrate.LayerStats) float64 { return l.V.Absmax }),
		}}
	if p999 >= 0 {
		ch.Series = append(ch.Series,
			series("K p99.9", func(l calibrate.LayerStats) float64 { return l.K.AbsPercentiles[p999] }),
			series("V p99.9", func(l calibrate.LayerStats) float64 { return l.V.AbsPercentiles[p999] }))
	}
	var out []string
	write := func(name string, svg, png func(io.Writer) error) error {
		for _, f := range []struct {
			ext string
			fn  func(io.Writer) error
		}{{".svg", svg}, {".png", png}} {
			p := filepath.Join(dir, name+f.ext)
			if err := atomicfile.Write(p, f.fn); err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	}
	if err := write("absmax-by-layer", func(w io.Writer) error { return render.WriteSVG(w, ch) }, func(w io.Writer) error { return render.WritePNG(w, ch) }); err != nil {
		return out, err
	}
	for _, side := range []calibrate.Side{calibrate.SideK, calibrate.SideV} {
		h := channelHeatmap(st, side)
		if err := write(side.String()+"-channel-absmax", func(w io.Writer) error { return render.WriteHeatmapSVG(w, h) },
			func(w io.Writer) error { return render.WriteHeatmapPNG(w, h) }); err != nil {
			return out, err
		}
	}
	return out, nil
}

func channelHeatmap(st *calibrate.Stats, side calibrate.Side) render.Heatmap {
	w := st.KVHeads * st.HeadDim
	cols := make([]string, w)
	for c := 0; c < w; c += st.HeadDim {
		cols[c] = "h" + strconv.Itoa(c/st.HeadDim)
	}
	title := "Per-channel absmax of V"
	if side == calibrate.SideK {
		title = "Per-channel absmax of K (after RoPE): outlier channels"
	}
	h := render.Heatmap{Title: title, XLabel: "channel (KV head, then head dim)", YLabel: "layer", Columns: cols,
		Scale: render.ScaleBlues, Dense: true, Legend: "absmax"}
	for _, l := range st.Layer {
		ts := l.Side(side)
		row := make([]float64, w)
		for c := range w {
			row[c] = max(-float64(ts.Channels.Min[c]), float64(ts.Channels.Max[c]), 0)
			h.Max = max(h.Max, row[c])
		}
		h.Rows = append(h.Rows, "L"+strconv.Itoa(l.Layer))
		h.Values = append(h.Values, row)
	}
	if h.Max <= 0 {
		h.Max = 1
	}
	return h
}
