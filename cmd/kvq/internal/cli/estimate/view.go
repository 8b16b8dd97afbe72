package estimate

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/estimate"
)

// report turns a result into the tables, the CSV rows and the JSON value.
func report(res *estimate.Result, gpu *estimate.GPU) render.Report {
	r := render.Report{Preamble: preamble(res, gpu), Value: res}
	left, right := render.Left, render.Right

	storage := render.Table{
		Title:  "Storage (bytes are per token; PER REQUEST is paid once per request)",
		Header: []string{"FORMAT", "BYTES/TOKEN", "PER RANK", "BITS/VALUE", "VS FP16", "EFFECTIVE", "BLOCK", "PER REQUEST"},
		Align:  []render.Align{left, right, right, right, right, right, right, right},
	}
	for _, f := range res.Formats {
		storage.Rows = append(storage.Rows, []string{
			f.Format, bytesPerToken(f.BytesPerToken), bytesPerToken(f.BytesPerTokenPerRank),
			fmt.Sprintf("%.2f", f.BitsPerValue), fmt.Sprintf("%.2fx", f.Compression), fmt.Sprintf("%.2fx", f.CompressionEffective),
			blockSize(f), dash(f.RequestBytes),
		})
	}
	var state []string
	for _, f := range res.Formats {
		if f.StateBytes > 0 {
			state = append(state, f.Format+" "+estimate.FormatBytes(f.StateBytes))
		}
	}
	if anyWindows(res) {
		storage.Notes = append(storage.Notes, "PER REQUEST: the fp16 sink, residual and staging windows each request keeps, per rank.")
	}
	if len(state) > 0 {
		storage.Notes = append(storage.Notes, "Codec state (scales, codebooks), paid once per rank: "+strings.Join(state, ", ")+".")
	}
	for _, s := range res.Skipped {
		storage.Notes = append(storage.Notes, "skipped "+s.Format+": "+s.Reason)
	}
	r.Tables = append(r.Tables, storage)

	if res.Memory != nil {
		capacity := render.Table{
			Title:  "Capacity per rank",
			Header: []string{"FORMAT", "BLOCKS", "TOKENS", "MAX CONCURRENCY @ " + strconv.FormatInt(res.MaxModelLen, 10), "MAX CONTEXT", "FITS"},
			Align:  []render.Align{left, right, right, right, right, left},
		}
		for _, f := range res.Formats {
			capacity.Rows = append(capacity.Rows, []string{
				f.Format, group(*f.Blocks), group(*f.Tokens), fmt.Sprintf("%.2fx", *f.MaxConcurrency),
				group(*f.MaxContext), yesNo(*f.Fits),
			})
			for _, a := range f.Advice {
				capacity.Notes = append(capacity.Notes, f.Format+": "+a)
			}
		}
		r.Tables = append(r.Tables, capacity)
	}

	grid := render.Table{
		Title:  "KV memory per rank",
		Header: []string{"CONTEXT", "REQUESTS"},
		Align:  []render.Align{right, right},
	}
	for _, f := range res.Formats {
		grid.Header = append(grid.Header, f.Format)
		grid.Align = append(grid.Align, right)
	}
	over := false
	for i := range res.Formats[0].Grid {
		c0 := res.Formats[0].Grid[i]
		row := []string{group(c0.Context), group(c0.Concurrency)}
		for _, f := range res.Formats {
			c := f.Grid[i]
			s := estimate.FormatBytes(c.KVBytes)
			if c.Fits != nil && !*c.Fits {
				s += " *"
				over = true
			}
			row = append(row, s)
		}
		grid.Rows = append(grid.Rows, row)
	}
	if over {
		grid.Notes = append(grid.Notes, "* more than the KV budget per rank")
		if res.Memory.Source != "num-gpu-blocks-override" {
			grid.Notes[0] = "* more than the KV budget of " + estimate.FormatGiB(res.Memory.KVBudgetBytes) + " per rank"
		}
	}
	r.Tables = append(r.Tables, grid)
	r.Flat = flat(res)
	return r
}

func anyWindows(res *estimate.Result) bool {
	for _, f := range res.Formats {
		if f.RequestBytes > 0 {
			return true
		}
	}
	return false
}

func preamble(res *estimate.Result, gpu *estimate.GPU) []string {
	m := res.Model
	var lines []string
	geom := fmt.Sprintf("%d layers, %d KV heads × %d", m.Layers, m.KVHeads, m.HeadDim)
	if m.MLA() {
		geom = fmt.Sprintf("%d layers, MLA latent %d + rope %d = %d values per token and layer (replicated on every TP rank)",
			m.Layers, m.KVLoraRank, m.QKRopeHeadDim, m.KVDim())
	}
	if n, ws := m.SlidingLayers(); n > 0 {
		geom += fmt.Sprintf(", %d sliding-window layers (window %s)", n, joinInts(ws))
	}
	params := ""
	if m.Params > 0 {
		params = fmt.Sprintf(", %.3gB params", float64(m.Params)/1e9)
	}
	lines = append(lines, fmt.Sprintf("Model:     %s (%s): %s, max_position %d%s", m.Name, m.Source, geom, m.MaxPosition, params))
	setting := "vLLM " + res.EngineVersion
	if res.Engine == estimate.SGLang {
		setting = "SGLang"
	}
	if mem := res.Memory; mem != nil && mem.TotalBytes > 0 {
		name := mem.GPU
		if gpu != nil {
			name += " (" + gpu.MemoryGiB + " GiB)"
		} else {
			name += " (" + estimate.FormatBytes(mem.TotalBytes) + ")"
		}
		setting += fmt.Sprintf(", %d × %s", res.TP*res.PP, name)
	}
	setting += fmt.Sprintf(", TP%d PP%d, block %d, max_model_len %d, max_num_batched_tokens %d", res.TP, res.PP, res.BlockSize, res.MaxModelLen, res.MaxNumBatchedTokens)
	lines = append(lines, "Setting:   "+setting)
	for _, w := range res.Warnings {
		lines = append(lines, "Warning:   "+w)
	}
	if len(res.Groups) > 1 || res.Hybrid {
		// "full ×1, sliding 1024 ×6 (group size 10, 8 padding layers)"
		var kinds []string
		count := map[int]int{}
		size, pad := 0, 0
		for _, g := range res.Groups {
			if count[g.Window] == 0 {
				kind := "full"
				if g.Window > 0 {
					kind = "sliding " + strconv.Itoa(g.Window)
				}
				kinds = append(kinds, kind)
			}
			count[g.Window]++
			size, pad = max(size, g.Layers+g.Padding), pad+g.Padding
		}
		var parts []string
		i := 0
		for _, g := range res.Groups {
			if count[g.Window] > 0 {
				parts = append(parts, fmt.Sprintf("%s ×%d", kinds[i], count[g.Window]))
				count[g.Window] = 0
				i++
			}
		}
		what := fmt.Sprintf("%d KV-cache groups (hybrid manager)", len(res.Groups))
		if len(res.Groups) == 1 {
			what = "1 KV-cache group"
		}
		detail := fmt.Sprintf("group size %d", size)
		if pad > 0 {
			detail += fmt.Sprintf(", %d padding layers", pad)
		}
		lines = append(lines, fmt.Sprintf("Groups:    %s: %s (%s)", what, strings.Join(parts, ", "), detail))
	}
	if mem := res.Memory; mem != nil {
		switch mem.Source {
		case "kv-budget":
			lines = append(lines, fmt.Sprintf("KV budget: %s per rank (given)", estimate.FormatGiB(mem.KVBudgetBytes)))
		case "num-gpu-blocks-override":
			lines = append(lines, "KV budget: the pool size given by --num-gpu-blocks-override")
		default:
			frac := "gpu_memory_utilization"
			if mem.Source == "sglang-static" {
				frac = "mem_fraction_static"
			}
			g := estimate.FormatGiB
			s := fmt.Sprintf("KV budget: %s per rank = %s × %g (%s) = %s − weights %s − activations %s − non-torch %s",
				g(mem.KVBudgetBytes), g(mem.TotalBytes), mem.Fraction, frac, g(mem.RequestedBytes),
				g(mem.WeightsBytes), g(mem.ActivationBytes), g(mem.NonTorchBytes))
			if mem.CUDAGraphBytes > 0 {
				s += " − CUDA graphs " + g(mem.CUDAGraphBytes)
			}
			lines = append(lines, s)
		}
	} else {
		lines = append(lines, "KV budget: none (give --gpu, --gpu-mem or --kv-budget for capacity figures)")
	}
	return lines
}

// flat is the CSV table: one row per format × context × concurrency, raw
// numbers, empty cells for figures that need a budget.
func flat(res *estimate.Result) *render.Table {
	t := &render.Table{Header: []string{
		"format", "bytes_per_token", "bytes_per_token_per_rank", "bits_per_value", "compression", "compression_effective",
		"block_tokens", "block_bytes", "request_bytes", "state_bytes", "blocks", "tokens", "max_concurrency", "max_context", "fits",
		"context", "concurrency", "kv_bytes", "token_bytes", "cell_request_bytes", "cell_fits",
	}}
	ptr := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	b := func(p *bool) string {
		if p == nil {
			return ""
		}
		return strconv.FormatBool(*p)
	}
	fl := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, f := range res.Formats {
		conc := ""
		if f.MaxConcurrency != nil {
			conc = strconv.FormatFloat(*f.MaxConcurrency, 'f', 4, 64)
		}
		for _, c := range f.Grid {
			t.Rows = append(t.Rows, []string{
				f.Format, fl(f.BytesPerToken), fl(f.BytesPerTokenPerRank), strconv.FormatFloat(f.BitsPerValue, 'f', 4, 64),
				strconv.FormatFloat(f.Compression, 'f', 4, 64), strconv.FormatFloat(f.CompressionEffective, 'f', 4, 64),
				strconv.Itoa(f.BlockTokens), strconv.FormatInt(f.BlockBytes, 10), strconv.FormatInt(f.RequestBytes, 10),
				strconv.FormatInt(f.StateBytes, 10), ptr(f.Blocks), ptr(f.Tokens), conc, ptr(f.MaxContext), b(f.Fits),
				strconv.FormatInt(c.Context, 10), strconv.FormatInt(c.Concurrency, 10), strconv.FormatInt(c.KVBytes, 10),
				strconv.FormatInt(c.TokenBytes, 10), strconv.FormatInt(c.RequestBytes, 10), b(c.Fits),
			})
		}
	}
	return t
}

// listReport lists the presets.
func listReport(models, gpus bool) render.Report {
	var r render.Report
	var values []any
	if models {
		t := render.Table{
			Title:  "Model presets (KV B/TOKEN: 16-bit cache, whole model, TP1)",
			Header: []string{"NAME", "ARCH", "LAYERS", "KV HEADS", "HEAD DIM", "KV B/TOKEN", "MAX POS", "SLIDING", "PARAMS", "VERIFIED"},
			Align:  []render.Align{render.Left, render.Left, render.Right, render.Right, render.Right, render.Right, render.Right, render.Left, render.Right, render.Left},
		}
		for _, m := range estimate.Presets() {
			kv, hd := strconv.Itoa(m.KVHeads), strconv.Itoa(m.HeadDim)
			if m.MLA() {
				kv, hd = "MLA", fmt.Sprintf("%d+%d", m.KVLoraRank, m.QKRopeHeadDim)
			}
			sl := "-"
			if n, ws := m.SlidingLayers(); n > 0 {
				sl = fmt.Sprintf("%d of %d (%s)", n, m.Layers, joinInts(ws))
			}
			t.Rows = append(t.Rows, []string{m.Name, m.Arch, strconv.Itoa(m.Layers), kv, hd,
				group(m.ValuesPerToken() * 2), strconv.FormatInt(m.MaxPosition, 10), sl,
				fmt.Sprintf("%.3gB", float64(m.Params)/1e9), yesNo(m.Verified)})
		}
		r.Tables = append(r.Tables, t)
		values = append(values, estimate.Presets())
	}
	if gpus {
		t := render.Table{
			Title:  "GPU presets (memory as the engines see it)",
			Header: []string{"NAME", "MEMORY (GiB)", "BYTES", "APPROXIMATE"},
			Align:  []render.Align{render.Left, render.Right, render.Right, render.Left},
		}
		for _, g := range estimate.GPUPresets() {
			t.Rows = append(t.Rows, []string{g.Name, g.MemoryGiB, group(g.Memory), yesNo(g.Approximate)})
		}
		r.Tables = append(r.Tables, t)
		values = append(values, estimate.GPUPresets())
	}
	if len(values) == 1 {
		r.Value = values[0]
	} else {
		r.Value = map[string]any{"models": values[0], "gpus": values[1]}
	}
	return r
}

// chart draws KV memory per rank against context length, one line per
// format, at the largest requested concurrency, with the budget as a line.
func chart(res *estimate.Result) (render.Chart, error) {
	xmax := res.MaxModelLen
	var conc int64 = 1
	for _, c := range res.Contexts {
		xmax = max(xmax, c)
	}
	for _, c := range res.Concurrency {
		conc = max(conc, c)
	}
	what := "1 request"
	if conc > 1 {
		what = fmt.Sprintf("%d requests", conc)
	}
	c := render.Chart{
		Title: fmt.Sprintf("KV cache per rank: %s, %s", res.Model.Name, what),
		X:     render.Axis{Label: "context length (tokens)", Binary: true, Format: tokensTick},
		Y:     render.Axis{Label: "KV memory per rank (GiB)", Format: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }},
	}
	const points = 240
	for _, f := range res.Formats {
		s := render.Series{Name: f.Format}
		for i := 0; i <= points; i++ {
			x := max(1, int64(float64(xmax)*float64(i)/points))
			b, err := f.KVBytes(x, conc)
			if err != nil {
				return c, err
			}
			s.X = append(s.X, float64(x))
			s.Y = append(s.Y, float64(b)/float64(estimate.GiB))
		}
		c.Series = append(c.Series, s)
	}
	if res.Memory != nil && res.Memory.KVBudgetBytes > 0 {
		c.HLines = append(c.HLines, render.HLine{
			Y:     float64(res.Memory.KVBudgetBytes) / float64(estimate.GiB),
			Label: "KV budget " + estimate.FormatBytes(res.Memory.KVBudgetBytes),
		})
	}
	return c, nil
}

func tokensTick(v float64) string {
	switch {
	case v >= 1<<20 && math.Mod(v, 1<<20) == 0:
		return strconv.FormatFloat(v/(1<<20), 'f', -1, 64) + "M"
	case v >= 1024 && math.Mod(v, 1024) == 0:
		return strconv.FormatFloat(v/1024, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// group prints n with thousands separators: 476,016.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func bytesPerToken(v float64) string {
	if v == math.Trunc(v) && v < 1e18 {
		return group(int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

func blockSize(f estimate.FormatResult) string {
	return fmt.Sprintf("%s / %d tok", estimate.FormatBytes(f.BlockBytes), f.BlockTokens)
}

func dash(n int64) string {
	if n == 0 {
		return "-"
	}
	return estimate.FormatBytes(n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
