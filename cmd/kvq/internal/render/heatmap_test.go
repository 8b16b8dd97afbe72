package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgTexts checks that b is well-formed XML with an <svg> root and returns
// its text nodes.
func svgTexts(t *testing.T, b []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("SVG root element is %q, want svg", root)
	}
	return texts
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	return img
}

func colourCount(img image.Image) map[color.RGBA]int {
	count := map[color.RGBA]int{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			count[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}]++
		}
	}
	return count
}

var nan = math.NaN()

// sampleNIAH is a needle-in-a-haystack accuracy map: context lengths
// across, needle depths down, one cell without data.
func sampleNIAH() Heatmap {
	return Heatmap{
		Title:   "Needle retrieval accuracy: int4 & <k8>",
		XLabel:  "context length (tokens)",
		YLabel:  "needle depth",
		Columns: []string{"256", "1K", "2K", "4K"},
		Rows:    []string{"0%", "25%", "50%", "75%", "100%"},
		Values: [][]float64{
			{100, 100, 100, 95},
			{100, 100, 87.5, 62.5},
			{100, 93.75, 50, 12.5},
			{100, 100, 75, nan},
			{100, 100, 100, 0},
		},
		Min: 0, Max: 100,
		Legend: "accuracy (%)",
	}
}

// sampleDiff is a candidate-minus-baseline map on the diverging scale.
func sampleDiff() Heatmap {
	return Heatmap{
		Title:   "int4 minus fp16 (points)",
		XLabel:  "context length (tokens)",
		YLabel:  "needle depth",
		Columns: []string{"256", "1K", "2K"},
		Rows:    []string{"0%", "50%", "100%"},
		Values: [][]float64{
			{0, -12.5, -50},
			{6.25, 0, -25},
			{25, -0.01, 50},
		},
		Min: -50, Max: 50,
		Scale:  ScaleRedBlue,
		Legend: "difference (points)",
	}
}

func TestHeatmapSVG(t *testing.T) {
	for _, tc := range []struct {
		golden string
		h      Heatmap
		want   []string
	}{
		{"heatmap.svg.golden", sampleNIAH(), []string{"Needle retrieval accuracy: int4 & <k8>", "context length (tokens)", "needle depth", "accuracy (%)", "1K", "75%", "87.5", "93.8", "12.5", "n/a", "no data", "100"}},
		{"heatmap-diff.svg.golden", sampleDiff(), []string{"int4 minus fp16 (points)", "-12.5", "6.3", "-50", "50", "0"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHeatmapSVG(&b, tc.h); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, b.Bytes())
			texts := svgTexts(t, b.Bytes())
			for _, want := range tc.want {
				found := false
				for _, s := range texts {
					found = found || s == want
				}
				if !found {
					t.Errorf("SVG texts %q lack %q", texts, want)
				}
			}
			for _, s := range texts {
				if s == "-0" {
					t.Errorf("SVG has a %q label", s)
				}
			}
		})
	}
}

func TestHeatmapPNG(t *testing.T) {
	h := sampleNIAH()
	var b bytes.Buffer
	if err := WriteHeatmapPNG(&b, h); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, b.Bytes())
	l := h.layout()
	if sz := img.Bounds().Size(); sz.X != l.w || sz.Y != l.h {
		t.Errorf("PNG is %v, want %d×%d", sz, l.w, l.h)
	}
	count := colourCount(img)
	cell := int(l.cw * l.ch / 2) // a cell, less its border and text
	for name, c := range map[string]color.RGBA{"0 (red)": rdYlGn[0], "100 (green)": rdYlGn[8], "no data": noData} {
		if count[c] < cell {
			t.Errorf("%s colour %v drawn on %d pixels, want at least %d", name, c, count[c], cell)
		}
	}
	// Anti-aliased text: the stems of the glyphs are solid black.
	if count[black] < 200 {
		t.Errorf("text colour %v drawn on %d pixels, want at least 200", black, count[black])
	}
	// The colour bar runs from green at the top to red at the bottom.
	bx := int(l.bx + barW/2)
	for _, p := range []struct {
		y    float64
		want color.RGBA
	}{{l.gy + 1, h.color(h.Max - h.Max/l.bh)}, {l.gy + l.bh - 1, h.color(h.Max / l.bh)}} {
		if got := color.RGBAModel.Convert(img.At(bx, int(p.y))).(color.RGBA); got != p.want {
			t.Errorf("colour bar at (%d, %v) is %v, want %v", bx, p.y, got, p.want)
		}
	}
	// The cell at 50 is yellow; its centre row holds text, so sample above.
	x, y := int(l.gx+2.5*l.cw), int(l.gy+2*l.ch+4)
	if got := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); got != rdYlGn[4] {
		t.Errorf("cell 50 at (%d, %d) is %v, want %v", x, y, got, rdYlGn[4])
	}
}

func TestHeatmapScale(t *testing.T) {
	acc := Heatmap{Min: 0, Max: 100}
	div := Heatmap{Min: -20, Max: 50, Scale: ScaleRedBlue}
	for _, tc := range []struct {
		name string
		h    Heatmap
		v    float64
		want color.RGBA
	}{
		{"accuracy min", acc, 0, rdYlGn[0]},
		{"accuracy mid", acc, 50, rdYlGn[4]},
		{"accuracy max", acc, 100, rdYlGn[8]},
		{"accuracy above max", acc, 120, rdYlGn[8]},
		{"accuracy below min", acc, -5, rdYlGn[0]},
		{"diverging 0", div, 0, rdBu[4]},
		{"diverging max", div, 50, rdBu[8]},
		// One slope for both halves: -20 of a ±50 scale is 2/5 of the way
		// to full red, between stops 2 and 3 of 9.
		{"diverging -20", div, -20, ramp(rdBu, 0.3)},
		{"diverging -50 clamps", div, -50, rdBu[0]},
	} {
		if got := tc.h.color(tc.v); got != tc.want {
			t.Errorf("%s: color(%v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
	if c := contrast(rdYlGn[4]); c != black {
		t.Errorf("contrast(yellow) = %v, want black", c)
	}
	if c := contrast(rdBu[0]); c != white {
		t.Errorf("contrast(dark red) = %v, want white", c)
	}
	if c := contrast(rdBu[8]); c != white {
		t.Errorf("contrast(dark blue) = %v, want white", c)
	}
}

func TestHeatmapFormat(t *testing.T) {
	h := Heatmap{}
	for v, want := range map[float64]string{100: "100", -12.5: "-12.5", 33.333: "33.3", -0.01: "0", 0: "0", 87.55: "87.6"} {
		if got := h.format(v); got != want {
			t.Errorf("format(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestHeatmapErrors(t *testing.T) {
	ok := sampleNIAH()
	for name, mod := range map[string]func(*Heatmap){
		"no rows":          func(h *Heatmap) { h.Rows = nil },
		"no columns":       func(h *Heatmap) { h.Columns = nil },
		"rows mismatch":    func(h *Heatmap) { h.Values = h.Values[:2] },
		"columns mismatch": func(h *Heatmap) { h.Values[1] = h.Values[1][:3] },
		"inf cell":         func(h *Heatmap) { h.Values[0][0] = math.Inf(1) },
		"empty scale":      func(h *Heatmap) { h.Min, h.Max = 1, 1 },
		"nan scale":        func(h *Heatmap) { h.Max = nan },
		"diverging no 0":   func(h *Heatmap) { h.Scale = ScaleRedBlue },
		"unknown scale":    func(h *Heatmap) { h.Scale = 7 },
	} {
		h := ok
		h.Values = make([][]float64, len(ok.Values))
		for i := range ok.Values {
			h.Values[i] = append([]float64(nil), ok.Values[i]...)
		}
		if name == "diverging no 0" {
			h.Min = 10
		}
		mod(&h)
		if err := WriteHeatmapSVG(io.Discard, h); !errors.Is(err, ErrChart) {
			t.Errorf("WriteHeatmapSVG(%s) error = %v, want ErrChart", name, err)
		}
		if err := WriteHeatmapPNG(io.Discard, h); !errors.Is(err, ErrChart) {
			t.Errorf("WriteHeatmapPNG(%s) error = %v, want ErrChart", name, err)
		}
	}
}

func TestHeatmapSize(t *testing.T) {
	h := sampleNIAH()
	h.Width, h.Height = 1000, 600
	var b bytes.Buffer
	if err := WriteHeatmapPNG(&b, h); err != nil {
		t.Fatal(err)
	}
	if sz := decodePNG(t, b.Bytes()).Bounds().Size(); sz.X != 1000 || sz.Y != 600 {
		t.Errorf("PNG is %v, want 1000×600", sz)
	}
}

// TestHeatmapDense: a dense grid (per-channel statistics) has narrow
// cells without text, skips empty column labels and uses the sequential
// blue scale.
func TestHeatmapDense(t *testing.T) {
	cols := make([]string, 64)
	for i := range cols {
		if i%16 == 0 {
			cols[i] = strconv.Itoa(i)
		}
	}
	vals := make([][]float64, 2)
	for r := range vals {
		vals[r] = make([]float64, 64)
		for c := range vals[r] {
			vals[r][c] = float64(c)
		}
	}
	h := Heatmap{Title: "K channel absmax", Columns: cols, Rows: []string{"L0", "L1"}, Values: vals, Min: 0, Max: 63, Scale: ScaleBlues, Dense: true}
	var b bytes.Buffer
	if err := WriteHeatmapSVG(&b, h); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, b.Bytes())
	for _, s := range texts {
		if s == "" || s == "12" {
			t.Errorf("dense heatmap draws %q (cell values or empty labels)", s)
		}
	}
	if l := h.layout(); l.cw != 6 || l.w > 700 {
		t.Errorf("dense layout: cells %g wide, image %d wide", l.cw, l.w)
	}
	if h.color(0) != blues[0] || h.color(63) != blues[8] {
		t.Errorf("blue scale: %v at 0, %v at max", h.color(0), h.color(63))
	}
}
