package render_test

import (
	"os"

	"github.com/kvqlabs/kvq/internal/render"
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
