package render

import (
	"bufio"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
)

// Heatmap is a grid of values drawn as coloured cells, each with its value
// written in it, with a colour bar as the legend: the needle-in-a-haystack
// picture of accuracy by context length (columns) and needle depth (rows).
type Heatmap struct {
	Title string
	// XLabel names the columns (under the grid), YLabel the rows (left).
	XLabel, YLabel string
	// Columns and Rows are the tick labels, such as "1K" and "25%". Rows
	// are drawn top to bottom in order.
	Columns, Rows []string
	// Values[r][c] is the cell in row r and column c; NaN means no data
	// (a grey cell marked "n/a").
	Values [][]float64
	// Min and Max are the ends of the colour scale (Min < Max). Values
	// outside are drawn in the end colour, their text unchanged.
	Min, Max float64
	Scale    ColorScale
	// Legend labels the colour bar, such as "accuracy (%)".
	Legend string
	// Format prints a cell's value and the colour bar's ticks; nil rounds
	// to one decimal and drops a trailing ".0" ("100", "-12.5").
	Format func(float64) string
	// Width and Height in pixels; zero fits them to the grid (cells wide
	// enough for their text, 28 pixels high).
	Width, Height int
	// Dense draws no value in the cells, for grids too fine to label
	// (per-channel statistics): cells are 6 pixels wide unless Width says
	// otherwise, empty column labels are skipped, and the colour bar is
	// the legend.
	Dense bool
}

// ColorScale maps a value between a heatmap's Min and Max to a colour.
type ColorScale int

// Colour scales, both from ColorBrewer (Cynthia Brewer, colorbrewer2.org).
const (
	// ScaleRedYellowGreen runs red (Min) through yellow to green (Max),
	// for accuracy. Red and green look alike to red-green colour-blind
	// readers (about 1 in 12 men); every cell has its number written in
	// it, so the picture never relies on colour alone.
	ScaleRedYellowGreen ColorScale = iota
	// ScaleRedBlue is diverging, centred on 0: red for negative values,
	// near white at 0 and blue for positive values, for differences
	// (candidate minus baseline). Red and blue stay apart for all common
	// forms of colour blindness (ColorBrewer's RdBu is marked
	// colour-blind safe). Both halves share one slope, the larger of
	// -Min and Max, so equal magnitudes get equal depth of colour;
	// Min <= 0 <= Max is required.
	ScaleRedBlue
	// ScaleBlues is sequential, white (Min) to dark blue (Max), for
	// magnitudes (ColorBrewer's Blues, colour-blind safe).
	ScaleBlues
)

var (
	rdYlGn = []color.RGBA{
		{215, 48, 39, 255}, {244, 109, 67, 255}, {253, 174, 97, 255}, {254, 224, 139, 255},
		{255, 255, 191, 255}, {217, 239, 139, 255}, {166, 217, 106, 255}, {102, 189, 99, 255},
		{26, 152, 80, 255},
	}
	rdBu = []color.RGBA{
		{178, 24, 43, 255}, {214, 96, 77, 255}, {244, 165, 130, 255}, {253, 219, 199, 255},
		{247, 247, 247, 255}, {209, 229, 240, 255}, {146, 197, 222, 255}, {67, 147, 195, 255},
		{33, 102, 172, 255},
	}
	blues = []color.RGBA{
		{247, 251, 255, 255}, {222, 235, 247, 255}, {198, 219, 239, 255}, {158, 202, 225, 255},
		{107, 174, 214, 255}, {66, 146, 198, 255}, {33, 113, 181, 255}, {8, 81, 156, 255},
		{8, 48, 107, 255},
	}
	noData     = color.RGBA{217, 217, 217, 255}
	noDataText = color.RGBA{80, 80, 80, 255}
)

// ramp interpolates linearly between evenly spaced stops, t in [0, 1].
func ramp(stops []color.RGBA, t float64) color.RGBA {
	t = math.Max(0, math.Min(1, t)) * float64(len(stops)-1)
	i := int(t)
	if i >= len(stops)-1 {
		return stops[len(stops)-1]
	}
	f := t - float64(i)
	a, b := stops[i], stops[i+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + f*(float64(y)-float64(x)))) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 255}
}

// color returns v's colour on h's scale.
func (h *Heatmap) color(v float64) color.RGBA {
	if h.Scale == ScaleRedBlue {
		m := math.Max(-h.Min, h.Max)
		return ramp(rdBu, 0.5+v/(2*m))
	}
	if h.Scale == ScaleBlues {
		return ramp(blues, (v-h.Min)/(h.Max-h.Min))
	}
	return ramp(rdYlGn, (v-h.Min)/(h.Max-h.Min))
}

// contrast returns black or white, whichever contrasts more with bg by the
// WCAG 2 contrast ratio.
func contrast(bg color.RGBA) color.RGBA {
	lin := func(c uint8) float64 {
		s := float64(c) / 255
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	l := 0.2126*lin(bg.R) + 0.7152*lin(bg.G) + 0.0722*lin(bg.B)
	if (l+0.05)/0.05 >= 1.05/(l+0.05) {
		return black
	}
	return white
}

func (h *Heatmap) format(v float64) string {
	if h.Format != nil {
		return h.Format(v)
	}
	r := math.Round(v*10) / 10
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func (h *Heatmap) validate() error {
	if len(h.Rows) == 0 || len(h.Columns) == 0 {
		return fmt.Errorf("%w: heatmap %q has %d rows and %d columns", ErrChart, h.Title, len(h.Rows), len(h.Columns))
	}
	if len(h.Values) != len(h.Rows) {
		return fmt.Errorf("%w: heatmap %q has %d rows of values for %d row labels", ErrChart, h.Title, len(h.Values), len(h.Rows))
	}
	for r, row := range h.Values {
		if len(row) != len(h.Columns) {
			return fmt.Errorf("%w: heatmap %q row %d has %d values for %d columns", ErrChart, h.Title, r, len(row), len(h.Columns))
		}
		for c, v := range row {
			if math.IsInf(v, 0) {
				return fmt.Errorf("%w: heatmap %q cell (%d, %d) is infinite", ErrChart, h.Title, r, c)
			}
		}
	}
	if !finite(h.Min) || !finite(h.Max) || h.Min >= h.Max {
		return fmt.Errorf("%w: heatmap %q scale [%g, %g] is empty or not finite", ErrChart, h.Title, h.Min, h.Max)
	}
	switch h.Scale {
	case ScaleRedYellowGreen, ScaleBlues:
	case ScaleRedBlue:
		if h.Min > 0 || h.Max < 0 {
			return fmt.Errorf("%w: heatmap %q diverging scale [%g, %g] does not contain 0", ErrChart, h.Title, h.Min, h.Max)
		}
	default:
		return fmt.Errorf("%w: heatmap %q has unknown colour scale %d", ErrChart, h.Title, h.Scale)
	}
	return nil
}

// heatmapLayout is where the parts of a heatmap go, in pixels.
type heatmapLayout struct {
	w, h           int
	gx, gy, cw, ch float64 // grid origin and cell size
	bx, bh         float64 // colour bar's left edge and height (top is gy)
	tickW          float64 // widest colour bar tick label
	ticks          []float64
	hasNaN         bool
}

const (
	barW     = 16.0
	barBand  = 2.0 // pixels per band of the colour bar
	minBarH  = 160.0
	defCellH = 28.0
)

func (h *Heatmap) layout() heatmapLayout {
	var l heatmapLayout
	maxLen := func(ss []string) (n int) {
		for _, s := range ss {
			n = max(n, len(s))
		}
		return n
	}
	textW := len("n/a")
	for _, row := range h.Values {
		for _, v := range row {
			if math.IsNaN(v) {
				l.hasNaN = true
			} else {
				textW = max(textW, len(h.format(v)))
			}
		}
	}
	l.gx = 40 + float64(maxLen(h.Rows))*charW + 8
	l.gy = marginT
	l.cw = math.Max(44, math.Max(float64(textW)*charW+14, float64(maxLen(h.Columns))*charW+10))
	if h.Dense {
		l.cw = 6
	}
	l.ch = defCellH

	step := niceStep((h.Max-h.Min)/5, false)
	for k := math.Ceil(h.Min/step - 1e-9); k*step <= h.Max+step*1e-9; k++ {
		t := k * step
		if t == 0 {
			t = 0 // no "-0"
		}
		l.ticks = append(l.ticks, t)
		l.tickW = math.Max(l.tickW, float64(len(h.format(t)))*charW)
	}
	right := 24 + barW + 6 + l.tickW + 16
	if h.Legend != "" {
		right += 22
	}
	if l.hasNaN {
		right = math.Max(right, 24+barW+6+float64(len("no data"))*charW+16)
	}
	if h.Width > 0 {
		l.cw = math.Max(1, (float64(h.Width)-l.gx-right)/float64(len(h.Columns)))
	}
	if h.Height > 0 {
		l.ch = math.Max(1, (float64(h.Height)-l.gy-marginB)/float64(len(h.Rows)))
	}
	gw, gh := l.cw*float64(len(h.Columns)), l.ch*float64(len(h.Rows))
	l.bx = l.gx + gw + 24
	l.bh = math.Max(minBarH, gh)
	l.bh = math.Round(l.bh/barBand) * barBand
	l.w = int(math.Ceil(l.gx + gw + right))
	bottom := l.gy + gh + marginB
	if l.hasNaN {
		bottom = math.Max(bottom, l.gy+l.bh+40)
	} else {
		bottom = math.Max(bottom, l.gy+l.bh+16)
	}
	l.h = int(math.Ceil(bottom))
	if h.Width > 0 {
		l.w = h.Width
	}
	if h.Height > 0 {
		l.h = max(h.Height, l.h)
	}
	return l
}

func (h *Heatmap) draw(cv canvas) {
	l := h.layout()
	cv.rect(0, 0, float64(l.w), float64(l.h), white, white)
	if h.Title != "" {
		cv.text(float64(l.w)/2, 24, h.Title, "middle", black, false)
	}
	gw, gh := l.cw*float64(len(h.Columns)), l.ch*float64(len(h.Rows))
	for r, row := range h.Values {
		y := l.gy + float64(r)*l.ch
		cv.text(l.gx-8, y+l.ch/2+4, h.Rows[r], "end", black, false)
		for c, v := range row {
			x := l.gx + float64(c)*l.cw
			fill, txt, fg := noData, "n/a", noDataText
			if !math.IsNaN(v) {
				fill = h.color(v)
				txt, fg = h.format(v), contrast(fill)
			}
			if h.Dense {
				cv.rect(x, y, l.cw, l.ch, fill, fill)
				continue
			}
			cv.rect(x, y, l.cw, l.ch, fill, white)
			cv.text(x+l.cw/2, y+l.ch/2+4, txt, "middle", fg, false)
		}
	}
	// A frame, so that cells near white (0 on the diverging scale) still
	// read as part of the grid.
	frame(cv, l.gx, l.gy, gw, gh, grey)
	for c, s := range h.Columns {
		if s == "" {
			continue
		}
		cv.text(l.gx+(float64(c)+0.5)*l.cw, l.gy+gh+19, s, "middle", black, false)
	}
	if h.XLabel != "" {
		cv.text(l.gx+gw/2, l.gy+gh+44, h.XLabel, "middle", black, false)
	}
	if h.YLabel != "" {
		cv.text(18, l.gy+gh/2, h.YLabel, "middle", black, true)
	}

	// Colour bar: Max at the top, in bands of barBand pixels.
	n := int(l.bh / barBand)
	for i := range n {
		v := h.Max - (float64(i)+0.5)/float64(n)*(h.Max-h.Min)
		c := h.color(v)
		cv.rect(l.bx, l.gy+float64(i)*barBand, barW, barBand, c, c)
	}
	frame(cv, l.bx, l.gy, barW, l.bh, grey)
	sy := func(v float64) float64 { return l.gy + (h.Max-v)/(h.Max-h.Min)*l.bh }
	for _, t := range l.ticks {
		cv.line(l.bx+barW, sy(t), l.bx+barW+4, sy(t), black, 1, false)
		cv.text(l.bx+barW+6, sy(t)+4, h.format(t), "start", black, false)
	}
	if h.Legend != "" {
		cv.text(l.bx+barW+6+l.tickW+14, l.gy+l.bh/2, h.Legend, "middle", black, true)
	}
	if l.hasNaN {
		y := l.gy + l.bh + 14
		cv.rect(l.bx, y, barW, 12, noData, grey)
		cv.text(l.bx+barW+6, y+10, "no data", "start", black, false)
	}
}

// frame outlines a rectangle without filling it.
func frame(cv canvas, x, y, w, h float64, c color.RGBA) {
	cv.line(x, y, x+w, y, c, 1, false)
	cv.line(x, y+h, x+w, y+h, c, 1, false)
	cv.line(x, y, x, y+h, c, 1, false)
	cv.line(x+w, y, x+w, y+h, c, 1, false)
}

// WriteHeatmapSVG draws h as an SVG document.
func WriteHeatmapSVG(w io.Writer, h Heatmap) error {
	if err := h.validate(); err != nil {
		return err
	}
	l := h.layout()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", l.w, l.h, l.w, l.h)
	h.draw(&svgCanvas{w: bw})
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// WriteHeatmapPNG draws h as a PNG image, with the rasterizer and font of
// WritePNG.
func WriteHeatmapPNG(w io.Writer, h Heatmap) error {
	if err := h.validate(); err != nil {
		return err
	}
	l := h.layout()
	cv, err := newRasterCanvas(l.w, l.h)
	if err != nil {
		return err
	}
	h.draw(cv)
	return png.Encode(w, cv.img)
}
