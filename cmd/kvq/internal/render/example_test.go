package render_test

import (
	"bytes"
	"fmt"
	"math"
	"os"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
)

func ExampleWrite() {
	r := render.Report{Tables: []render.Table{{
		Header: []string{"FORMAT", "BITS/VALUE"},
		Rows:   [][]string{{"fp16", "16.00"}, {"int4", "4.50"}},
		Align:  []render.Align{render.Left, render.Right},
	}}}
	render.Write(os.Stdout, render.FormatTable, r, render.Options{TTY: false})
	// Output:
	// FORMAT  BITS/VALUE
	// fp16         16.00
	// int4          4.50
}

func ExampleWriteHeatmapSVG() {
	h := render.Heatmap{
		Title:   "Needle retrieval, int4",
		XLabel:  "context length (tokens)",
		YLabel:  "needle depth",
		Columns: []string{"256", "1K", "2K"},
		Rows:    []string{"0%", "50%", "100%"},
		Values:  [][]float64{{100, 100, 90}, {100, 75, 50}, {100, 100, math.NaN()}},
		Min:     0, Max: 100,
		Legend: "accuracy (%)",
	}
	if err := render.WriteHeatmapSVG(os.Stdout, h); err != nil {
		fmt.Println(err)
	}
}

func ExampleChart_markers() {
	c := render.Chart{
		Title:   "Quality against size",
		X:       render.Axis{Label: "bits per value", Min: 2, Step: 2},
		Y:       render.Axis{Label: "KL divergence"},
		Markers: true,
		Series: []render.Series{{
			Name: "cache", X: []float64{16, 8.5, 4.5}, Y: []float64{0, 0.002, 0.04},
			Labels: []string{"fp16", "q8_0", "q4_0"},
		}},
	}
	if err := render.WriteSVG(os.Stdout, c); err != nil {
		fmt.Println(err)
	}
}

func ExampleWriteHTML() {
	var fig bytes.Buffer
	h := render.Heatmap{Columns: []string{"1K"}, Rows: []string{"0%"}, Values: [][]float64{{100}}, Max: 100}
	if err := render.WriteHeatmapSVG(&fig, h); err != nil {
		fmt.Println(err)
		return
	}
	d := render.HTMLDoc{
		Title: "kvq eval",
		Sections: []render.HTMLSection{{
			Heading:    "Needle in a haystack",
			Paragraphs: []string{"Accuracy by context length & depth."},
			Tables: []render.Table{{
				Header: []string{"CACHE", "ACCURACY"},
				Rows:   [][]string{{"int4", "100.0"}},
				Align:  []render.Align{render.Left, render.Right},
			}},
			Figures: []render.Figure{{Caption: "int4", SVG: fig.Bytes()}},
		}},
	}
	if err := render.WriteHTML(os.Stdout, d); err != nil {
		fmt.Println(err)
	}
}
