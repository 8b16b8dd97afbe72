package calibrate

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/internal/atomicfile"
	"github.com/kvqlabs/kvq/pkg/calibrate"
)

func g4(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

func pct(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 0.0001:
		return "<0.01%"
	}
	return strconv.FormatFloat(100*x, 'g', 3, 64) + "%"
}

// scaleList prints one scale, or the heads' range.
func scaleList(v []float32) string {
	switch len(v) {
	case 0:
		return "-"
	case 1:
		return g4(float64(v[0]))
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%s..%s (%d heads)", g4(float64(lo)), g4(float64(hi)), len(v))
}

func dataLine(d calibrate.DataInfo) string {
	return fmt.Sprintf("Calibration data: %s, %d samples, %d tokens (sha256 %s)", d.Source, d.Samples, d.Tokens, short(d.SHA256))
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// calibrateView lays out kvq calibrate's result.
func calibrateView(res *calibrate.Result) render.Report {
	r := render.Report{Value: res}
	r.Preamble = append(r.Preamble, "Model: "+res.Model, dataLine(res.Data),
		fmt.Sprintf("Strategy: %s — %s; scales in %s", res.Strategy, res.Describe, res.DType))
	t := render.Table{Title: "Scales (fp8 value = code × scale; absmax over the calibration data)",
		Header: []string{"LAYER", "K ABSMAX", "K SCALE", "V ABSMAX", "V SCALE"},
		Align:  []render.Align{render.Right, render.Right, render.Right, render.Right, render.Right}}
	sliding := false
	for _, l := range res.Scales {
		layer := strconv.Itoa(l.Layer)
		if l.Sliding {
			layer, sliding = layer+" (sliding)", true
		}
		t.Rows = append(t.Rows, []string{layer, g4(l.KAbsmax), scaleList(l.K), g4(l.VAbsmax), scaleList(l.V)})
	}
	if sliding {
		t.Notes = append(t.Notes, "sliding: a sliding-window layer; --cache SPEC,sliding=fp16 keeps such layers out of the fp8 cache")
	}
	r.Tables = append(r.Tables, t)
	if c := res.Compare; c != nil {
		ct := compareTable(c, fmt.Sprintf("Strategies on held-out text (%s: %d positions in %d chunks of up to %d tokens; KLD in nats against fp16)",
			strings.Join(res.HeldOut, ", "), c.Tokens, c.Chunks, c.Ctx))
		r.Tables = append(r.Tables, ct)
	}
	files := render.Table{Title: "Files", Header: []string{"FILE", "USE"}}
	for _, f := range res.Files {
		files.Rows = append(files.Rows, []string{f, fileUse(f)})
	}
	r.Tables = append(r.Tables, files)
	flat := t
	r.Flat = &flat
	return r
}

func compareTable(c *calibrate.Comparison, title string) render.Table {
	t := render.Table{Title: title,
		Header: []string{"STRATEGY", "CLIP K", "CLIP V", "ERR K", "ERR V", "KLD", "±", "KLD P99", "SAME TOP", "PPL RATIO"},
		Align:  []render.Align{render.Left, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right}}
	for _, cr := range c.Results {
		if cr.Failed != "" {
			t.Rows = append(t.Rows, []string{cr.Name, "-", "-", "-", "-", "-", "-", "-", "-", "cannot run"})
			t.Notes = append(t.Notes, cr.Name+": "+cr.Failed)
			continue
		}
		t.Rows = append(t.Rows, []string{cr.Name, pct(cr.ClipK), pct(cr.ClipV), g4(cr.ErrK), g4(cr.ErrV),
			g4(cr.KLD), g4(cr.KLDErr), g4(cr.KLDP99), fmt.Sprintf("%.2f%%", 100*cr.SameTop), fmt.Sprintf("%.4f", cr.PPLRatio)})
	}
	t.Notes = append(t.Notes, "CLIP: share of held-out entries beyond fp8 max × scale; ERR: Σ(q(x)−x)²/Σx² of the fp8 round trip.")
	if v := c.Verdict; v != nil {
		t.Notes = append(t.Notes, "Recommendation: "+v.Text)
	}
	return t
}

func fileUse(f string) string {
	switch filepath.Base(f) {
	case calibrate.FileKVQ:
		return "kvq eval --cache fp16,fp8:scales@" + f
	case calibrate.FileSafetensors:
		return "copy into the checkpoint (and its index) for vLLM, with the kv_cache_scheme"
	case calibrate.FileScheme:
		return "merge into config.json; then vllm serve MODEL --kv-cache-dtype fp8"
	case calibrate.FileSGLang:
		return "sglang --kv-cache-dtype fp8_e4m3 --quantization-param-path " + f
	case "config.json":
		return "now declares the kv_cache_scheme (original kept as config.json.kvq-backup)"
	}
	switch {
	case strings.HasPrefix(filepath.Base(f), "codebook-"):
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "codebook-"), ".json")
		return "kvq eval --cache fp16," + name + ":codebook@" + f
	case strings.HasSuffix(f, ".svg") || strings.HasSuffix(f, ".png"):
		return "picture of the statistics"
	case strings.HasSuffix(f, ".json"):
		return "statistics (kvq.calibrate.stats/v1)"
	}
	return ""
}

// statsView lays out the statistics: one row per layer and tensor.
func statsView(st *calibrate.Stats) render.Report {
	r := render.Report{Value: st}
	r.Preamble = append(r.Preamble, fmt.Sprintf("Model: %s (%d layers, %d KV heads × %d)", st.Model, st.Layers, st.KVHeads, st.HeadDim), dataLine(st.Data))
	hdr := []string{"LAYER", "TENSOR", "ABSMAX", "MIN", "MAX", "MEAN", "STD"}
	for _, p := range st.Percentiles {
		hdr = append(hdr, "P"+strconv.FormatFloat(p, 'g', -1, 64)+" |X|")
	}
	hdr = append(hdr, "OUTLIERS", "MAX/MEDIAN CH", "OUTLIER CH")
	t := render.Table{Title: "K/V statistics (K after RoPE, K before RoPE, V; percentiles of |x|; outliers: |x| > 6·RMS; outlier channels: absmax > 4× the median channel's)",
		Header: hdr}
	for i := range hdr {
		a := render.Right
		if i == 1 {
			a = render.Left
		}
		t.Align = append(t.Align, a)
	}
	for _, l := range st.Layer {
		for _, side := range []calibrate.Side{calibrate.SideK, calibrate.SideKPre, calibrate.SideV} {
			ts := l.Side(side)
			row := []string{strconv.Itoa(l.Layer), side.String(), g4(ts.Absmax), g4(ts.Min), g4(ts.Max), g4(ts.Mean), g4(ts.Std)}
			for _, p := range ts.AbsPercentiles {
				row = append(row, g4(p))
			}
			row = append(row, strconv.FormatInt(ts.Outliers, 10), g4(ts.Spread.MaxOverMedian), strconv.Itoa(len(ts.Spread.OutlierChannels)))
			t.Rows = append(t.Rows, row)
		}
	}
	r.Tables = append(r.Tables, t)
	return r
}

// auditView lays out an audit.
func auditView(a *calibrate.Audit) render.Report {
	r := render.Report{Value: a}
	r.Preamble = append(r.Preamble, "Scales: "+a.Source)
	if a.Data != nil {
		r.Preamble = append(r.Preamble, dataLine(*a.Data))
	}
	if len(a.Layers) > 0 {
		t := render.Table{Title: "Shipped scales (NEED: the smallest per-tensor scale that clips none of the calibration data)",
			Header: []string{"LAYER", "K SCALE", "K NEED", "CLIP K", "V SCALE", "V NEED", "CLIP V", "FROM"},
			Align:  []render.Align{render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Right, render.Left}}
		for _, l := range a.Layers {
			from := joinFrom(l.KFrom, l.VFrom)
			need := func(x float64, s []float32) string {
				if a.Data == nil || s == nil {
					return "-"
				}
				return g4(x)
			}
			clip := func(x float64, s []float32) string {
				if a.Data == nil || s == nil {
					return "-"
				}
				return pct(x)
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(l.Layer), scaleList(l.K), need(l.NeedK, l.K), clip(l.ClipK, l.K), scaleList(l.V), need(l.NeedV, l.V), clip(l.ClipV, l.V), from})
		}
		r.Tables = append(r.Tables, t)
	}
	ft := render.Table{Title: fmt.Sprintf("Findings: %d error(s), %d warning(s)", a.Errors, a.Warnings), Header: []string{"LEVEL", "WHERE", "FINDING"}}
	for _, f := range a.Findings {
		where := "checkpoint"
		if f.Layer >= 0 {
			where = fmt.Sprintf("layer %d %s", f.Layer, f.Side)
		}
		ft.Rows = append(ft.Rows, []string{strings.ToUpper(f.Level), where, f.Message})
	}
	if len(a.Findings) == 0 {
		ft.Notes = append(ft.Notes, "No findings.")
	}
	r.Tables = append(r.Tables, ft)
	if a.Effect != nil {
		r.Tables = append(r.Tables, compareTable(a.Effect, fmt.Sprintf("Effect on held-out text (%d positions in %d chunks; KLD in nats against fp16)", a.Effect.Tokens, a.Effect.Chunks)))
	}
	flat := ft
	r.Flat = &flat
	return r
}

// joinFrom names where a layer's K and V scales came from, once for what
// they share: "f.safetensors: model.layers.0.self_attn.k_scale, v_scale".
func joinFrom(k, v string) string {
	switch {
	case v == "" || v == k:
		return k
	case k == "":
		return v
	}
	p := 0
	for i := 0; i < min(len(k), len(v)) && k[i] == v[i]; i++ {
		if k[i] == '.' || k[i] == ' ' {
			p = i + 1
		}
	}
	return k + ", " + v[p:]
}

func writeJSON(path string, v any) error {
	return atomicfile.Write(path, func(w io.Writer) error { return render.WriteJSON(w, v) })
}
