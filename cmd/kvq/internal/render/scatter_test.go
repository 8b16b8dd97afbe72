package render

import (
	"bytes"
	"errors"
	"image/color"
	"io"
	"strings"
	"testing"
)

// sampleScatter is quality against bits per value, one point per cache,
// on an x axis from 2 to 16.
func sampleScatter() Chart {
	return Chart{
		Title:   "Quality against size: stories <260K>",
		X:       Axis{Label: "bits per value", Min: 2, Step: 2},
		Y:       Axis{Label: "KL divergence (nats)"},
		Markers: true,
		Series: []Series{
			{Name: "symmetric", X: []float64{16, 8.5, 4.5, 4.25}, Y: []float64{0, 0.002, 0.041, 0.039}, Labels: []string{"fp16", "q8_0", "q4_0", "int4"}},
			{Name: "k8/v4", X: []float64{6.5, 3}, Y: []float64{0.012, 0.09}, Labels: []string{"k=q8_0,v=q4_0", ""}},
		},
		HLines: []HLine{{Y: 0.05, Label: "gate 0.05"}},
	}
}

func TestScatterSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, sampleScatter()); err != nil {
		t.Fatal(err)
	}
	golden(t, "scatter.svg.golden", b.Bytes())
	joined := "|" + strings.Join(svgTexts(t, b.Bytes()), "|") + "|"
	for _, want := range []string{"Quality against size: stories <260K>", "bits per value", "|fp16|", "|int4|", "|k=q8_0,v=q4_0|", "|symmetric|", "|k8/v4|", "|2|", "|16|", "gate 0.05"} {
		if !strings.Contains(joined, want) {
			t.Errorf("SVG text %q lacks %q", joined, want)
		}
	}
	if s := b.String(); strings.Contains(s, "<polyline") {
		t.Error("scatter SVG draws lines")
	} else if !strings.Contains(s, "<circle") || !strings.Contains(s, "<polygon") {
		t.Error("scatter SVG lacks circle and polygon markers")
	}
}

func TestScatterPNG(t *testing.T) {
	var b bytes.Buffer
	if err := WritePNG(&b, sampleScatter()); err != nil {
		t.Fatal(err)
	}
	count := colourCount(decodePNG(t, b.Bytes()))
	for name, c := range map[string]color.RGBA{"first series": palette[0], "second series": palette[1], "text": black} {
		if count[c] < 60 {
			t.Errorf("%s colour %v drawn on %d pixels, want markers", name, c, count[c])
		}
	}
}

func TestAxisTicks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a          Axis
		dmin, dmax float64
		lo, end    float64
		ticks      string
	}{
		{"from zero", Axis{}, 3, 13, 0, 15, "0 5 10 15"},
		{"zero ignores data below", Axis{}, -3, 13, 0, 15, "0 5 10 15"},
		{"bits 2..16", Axis{Min: 2, Step: 2}, 3, 16, 2, 16, "2 4 6 8 10 12 14 16"},
		{"binary from 2", Axis{Min: 2, Binary: true}, 2, 16, 2, 16, "4 8 12 16"},
		{"data below min", Axis{Min: 2, Step: 2}, 0.5, 8, 0, 8, "0 2 4 6 8"},
		{"negative min", Axis{Min: -1}, -1, 1, -1, 1, "-1 -0.5 0 0.5 1"},
	} {
		lo, end, ts := tc.a.ticks(tc.dmin, tc.dmax)
		var s []string
		for _, v := range ts {
			s = append(s, tc.a.label(v))
		}
		if got := strings.Join(s, " "); lo != tc.lo || end != tc.end || got != tc.ticks {
			t.Errorf("%s: ticks(%v, %v) = %v, %v, %q; want %v, %v, %q", tc.name, tc.dmin, tc.dmax, lo, end, got, tc.lo, tc.end, tc.ticks)
		}
	}
}

func TestScatterErrors(t *testing.T) {
	c := sampleScatter()
	c.Series[0].Labels = c.Series[0].Labels[:2]
	if err := WriteSVG(io.Discard, c); !errors.Is(err, ErrChart) {
		t.Errorf("WriteSVG(labels mismatch) error = %v, want ErrChart", err)
	}
	c = sampleScatter()
	c.X.Min = 1 / zero
	if err := WritePNG(io.Discard, c); !errors.Is(err, ErrChart) {
		t.Errorf("WritePNG(infinite axis min) error = %v, want ErrChart", err)
	}
}
