package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name; -update rewrites it, and a
// mismatch writes testdata/name.got for inspection.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		os.WriteFile(path+".got", got, 0o644)
		t.Errorf("output differs from %s; wrote %s.got\ngot:\n%s", path, path, got)
	}
}

func sample() Report {
	t := Table{
		Title:  "Per format",
		Header: []string{"FORMAT", "BYTES/TOKEN", "BITS", "NOTE"},
		Rows: [][]string{
			{"fp16", "131,072", "16.00", "baseline"},
			{"k=int8,v=int4", "36,864", "4.50", "a|b"},
		},
		Align: []Align{Left, Right, Right},
		Notes: []string{"* one note"},
	}
	t2 := Table{Header: []string{"A", "B"}, Rows: [][]string{{"1", "2"}, {"333", ""}}}
	return Report{Preamble: []string{"Model: x"}, Tables: []Table{t, t2}}
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		tty    bool
	}{
		{"report.plain.golden", FormatTable, false},
		{"report.tty.golden", FormatTable, true},
		{"report.md.golden", FormatMarkdown, false},
		{"report.csv.golden", FormatCSV, false},
		{"report.json.golden", FormatJSON, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, tc.format, sample(), Options{TTY: tc.tty}); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
			if !tc.tty {
				for _, l := range strings.Split(b.String(), "\n") {
					if strings.TrimRight(l, " ") != l {
						t.Errorf("line %q has trailing spaces", l)
					}
				}
			}
		})
	}
	t.Run("value", func(t *testing.T) {
		var b bytes.Buffer
		if err := Write(&b, FormatJSON, Report{Value: map[string]any{"a": 1, "b": "<x>"}}, Options{}); err != nil {
			t.Fatal(err)
		}
		if want := "{\n  \"a\": 1,\n  \"b\": \"<x>\"\n}\n"; b.String() != want {
			t.Errorf("JSON = %q, want %q", b.String(), want)
		}
	})
	t.Run("flat csv", func(t *testing.T) {
		var b bytes.Buffer
		r := sample()
		r.Flat = &Table{Header: []string{"x"}, Rows: [][]string{{"1,5"}}}
		if err := Write(&b, FormatCSV, r, Options{}); err != nil {
			t.Fatal(err)
		}
		if want := "x\n\"1,5\"\n"; b.String() != want {
			t.Errorf("CSV = %q, want %q", b.String(), want)
		}
	})
	t.Run("write error", func(t *testing.T) {
		if err := Write(failWriter{}, FormatTable, sample(), Options{}); err == nil {
			t.Error("Write to a failing writer succeeded")
		}
	})
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"table": FormatTable, "JSON": FormatJSON, " csv ": FormatCSV, "markdown": FormatMarkdown, "md": FormatMarkdown} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("yaml"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "table, json, csv, markdown") {
		t.Errorf("ParseFormat(yaml) error = %v", err)
	}
	if err := Write(io.Discard, "yaml", Report{}, Options{}); !errors.Is(err, ErrFormat) {
		t.Errorf("Write(yaml) error = %v", err)
	}
}

func sampleChart() Chart {
	c := Chart{
		Title:  "KV cache per rank: test & <model>",
		X:      Axis{Label: "context length (tokens)", Binary: true},
		Y:      Axis{Label: "KV memory (GiB)"},
		HLines: []HLine{{Y: 50, Label: "KV budget 50.00 GiB"}},
	}
	for i, slope := range []float64{1.0 / 1024, 0.5 / 1024} {
		s := Series{Name: []string{"fp16", "fp8"}[i]}
		for x := 0.0; x <= 131072; x += 8192 {
			s.X = append(s.X, x)
			s.Y = append(s.Y, x*slope/8)
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func TestChartSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, sampleChart()); err != nil {
		t.Fatal(err)
	}
	golden(t, "chart.svg.golden", b.Bytes())
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var texts []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
			texts = append(texts, string(cd))
		}
	}
	joined := strings.Join(texts, "|")
	for _, want := range []string{"KV cache per rank: test & <model>", "context length (tokens)", "KV memory (GiB)", "fp16", "fp8", "KV budget 50.00 GiB", "131072"} {
		if !strings.Contains(joined, want) {
			t.Errorf("SVG text %q lacks %q", joined, want)
		}
	}
}

func TestChartPNG(t *testing.T) {
	var b bytes.Buffer
	if err := WritePNG(&b, sampleChart()); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz.X != 880 || sz.Y != 520 {
		t.Errorf("PNG is %v, want 880×520", sz)
	}
	count := map[color.RGBA]int{}
	for y := 0; y < 520; y++ {
		for x := 0; x < 880; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			count[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}]++
		}
	}
	for name, c := range map[string]color.RGBA{"first series": palette[0], "second series": palette[1], "budget": red, "text": black} {
		if count[c] < 100 {
			t.Errorf("%s colour %v drawn on %d pixels, want a line", name, c, count[c])
		}
	}
}

func TestChartErrors(t *testing.T) {
	for name, c := range map[string]Chart{
		"empty":      {},
		"mismatched": {Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}},
		"no points":  {Series: []Series{{Name: "a"}}},
		"nan":        {Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{0 / zero}}}},
		"inf line":   {Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{1}}}, HLines: []HLine{{Y: 1 / zero}}},
	} {
		if err := WriteSVG(io.Discard, c); !errors.Is(err, ErrChart) {
			t.Errorf("WriteSVG(%s) error = %v, want ErrChart", name, err)
		}
		if err := WritePNG(io.Discard, c); !errors.Is(err, ErrChart) {
			t.Errorf("WritePNG(%s) error = %v, want ErrChart", name, err)
		}
	}
}

var zero float64

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		x      float64
		binary bool
		want   float64
	}{{0.3, false, 0.5}, {13, false, 20}, {7000, false, 10000}, {20000, true, 32768}, {1, false, 1}} {
		if got := niceStep(tc.x, tc.binary); got != tc.want {
			t.Errorf("niceStep(%v, %v) = %v, want %v", tc.x, tc.binary, got, tc.want)
		}
	}
}
