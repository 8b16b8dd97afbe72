package render

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
)

// ErrChart reports a chart that cannot be drawn (no data, bad values).
var ErrChart = errors.New("render: bad chart")

// Chart is a line chart: series of (x, y) points, optional horizontal
// reference lines, axis labels and a legend. With Markers set it is a
// scatter plot instead: each point is a marker (a shape per series, so
// the series stay apart without colour) and no lines join them.
type Chart struct {
	Title  string
	X, Y   Axis
	Series []Series
	// Markers draws every series as markers rather than lines, such as
	// quality against bits per value, one point per cache format.
	Markers bool
	// HLines are dashed horizontal lines, such as a memory budget.
	HLines []HLine
	// Width and Height in pixels (default 880×520).
	Width, Height int
}

// Axis describes one axis. The range starts at 0 (or Min) and ends at the
// data's maximum (or Max when larger), rounded up to a tick.
type Axis struct {
	Label string
	// Min, when not zero, is where the axis starts, such as 2 for bits
	// per value; when data lie below it the axis starts lower, at a tick.
	// Ticks are the multiples of the step from there on. Zero keeps the
	// axis starting at 0, whatever the data.
	Min float64
	// Max, when positive, is the least upper end of the axis.
	Max float64
	// Step, when positive, is the tick spacing; otherwise a 1-2-5 step
	// giving about six ticks is chosen (a power of two when Binary).
	Step   float64
	Binary bool
	// Format prints a tick value; nil means strconv 'g'.
	Format func(float64) string
}

// Series is one line, or one set of markers.
type Series struct {
	Name string
	X, Y []float64
	// Labels, when set, has one entry per point, written next to it (such
	// as the cache format, "int4"); empty entries are skipped.
	Labels []string
}

// HLine is a horizontal reference line.
type HLine struct {
	Y     float64
	Label string
}

var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {23, 190, 207, 255}, {188, 189, 34, 255},
}

var (
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{110, 110, 110, 255}
	grid  = color.RGBA{225, 225, 225, 255}
	red   = color.RGBA{214, 39, 40, 255}
	white = color.RGBA{255, 255, 255, 255}
)

// canvas is what the chart layout draws on: SVG text or a raster image.
type canvas interface {
	line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool)
	polyline(xs, ys []float64, c color.RGBA, width float64)
	rect(x, y, w, h float64, fill, stroke color.RGBA)
	// text draws s with its baseline at y; anchor is "start", "middle" or
	// "end"; vertical text reads bottom to top, centred on (x, y).
	text(x, y float64, s string, anchor string, c color.RGBA, vertical bool)
	// circle and polygon are filled shapes with a one-pixel outline.
	circle(x, y, r float64, fill, stroke color.RGBA)
	polygon(xs, ys []float64, fill, stroke color.RGBA)
}

// Layout metrics shared by both canvases: text is reckoned at 7 pixels a
// character and 13 a line, about a 12-pixel sans serif (DejaVu Sans in
// the SVG, Go Regular in the PNG).
const (
	charW   = 7.0
	lineH   = 13.0
	marginL = 84.0
	marginT = 44.0
	marginB = 58.0
)

func (c *Chart) size() (int, int) {
	w, h := c.Width, c.Height
	if w <= 0 {
		w = 880
	}
	if h <= 0 {
		h = 520
	}
	return w, h
}

func (c *Chart) validate() error {
	if len(c.Series) == 0 {
		return fmt.Errorf("%w: no series", ErrChart)
	}
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return fmt.Errorf("%w: series %q has %d x and %d y values", ErrChart, s.Name, len(s.X), len(s.Y))
		}
		if len(s.Labels) != 0 && len(s.Labels) != len(s.X) {
			return fmt.Errorf("%w: series %q has %d points and %d labels", ErrChart, s.Name, len(s.X), len(s.Labels))
		}
		for i := range s.X {
			if !finite(s.X[i]) || !finite(s.Y[i]) {
				return fmt.Errorf("%w: series %q has a non-finite point", ErrChart, s.Name)
			}
		}
	}
	for _, h := range c.HLines {
		if !finite(h.Y) {
			return fmt.Errorf("%w: reference line %q is not finite", ErrChart, h.Label)
		}
	}
	if !finite(c.X.Min) || !finite(c.Y.Min) {
		return fmt.Errorf("%w: axis minimum is not finite", ErrChart)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// ticks returns the axis's start and end and its tick values. With Min
// zero, the start is 0 and dataMin is ignored.
func (a *Axis) ticks(dataMin, dataMax float64) (lo, end float64, ts []float64) {
	lo = a.Min
	below := a.Min != 0 && dataMin < a.Min
	if below {
		lo = dataMin
	}
	hi := math.Max(dataMax, a.Max)
	if hi <= lo {
		hi = lo + 1
	}
	step := a.Step
	if step <= 0 {
		step = niceStep((hi-lo)/6, a.Binary)
	}
	if below {
		lo = math.Floor(lo/step+1e-9) * step
	}
	end = math.Ceil(hi/step-1e-9) * step
	// Ticks are integer multiples of the step (k·step, not a running sum),
	// so 0 is printed as "0" and long axes do not drift.
	k0 := int(math.Ceil(lo/step - 1e-9))
	for i := 0; float64(k0+i)*step <= end+step*1e-9 && i <= 1000; i++ {
		ts = append(ts, float64(k0+i)*step)
	}
	return lo, end, ts
}

// niceStep rounds x up to 1, 2 or 5 × 10^k, or to a power of two.
func niceStep(x float64, binary bool) float64 {
	if binary {
		return math.Pow(2, math.Ceil(math.Log2(x)))
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func (a *Axis) label(v float64) string {
	if a.Format != nil {
		return a.Format(v)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// draw lays the chart out on cv.
func (c *Chart) draw(cv canvas) {
	w, h := c.size()
	legendW := 0.0
	for _, s := range c.Series {
		legendW = math.Max(legendW, float64(len(s.Name)))
	}
	for _, l := range c.HLines {
		legendW = math.Max(legendW, float64(len(l.Label)))
	}
	legendW = legendW*charW + 44
	marginR := legendW + 24
	px0, py0 := marginL, marginT
	pw, ph := float64(w)-marginL-marginR, float64(h)-marginT-marginB

	var xmax, ymax float64
	xmin, ymin := math.Inf(1), math.Inf(1)
	for _, s := range c.Series {
		for i := range s.X {
			xmax, ymax = math.Max(xmax, s.X[i]), math.Max(ymax, s.Y[i])
			xmin, ymin = math.Min(xmin, s.X[i]), math.Min(ymin, s.Y[i])
		}
	}
	for _, l := range c.HLines {
		ymax = math.Max(ymax, l.Y)
		ymin = math.Min(ymin, l.Y)
	}
	xlo, xend, xt := c.X.ticks(xmin, xmax)
	// 4% headroom above the highest point (of the span from the start).
	yhi := ymax * 1.04
	if c.Y.Min != 0 {
		yhi = ymax + (ymax-math.Min(ymin, c.Y.Min))*0.04
	}
	ylo, yend, yt := c.Y.ticks(ymin, yhi)
	sx := func(x float64) float64 { return px0 + (x-xlo)/(xend-xlo)*pw }
	sy := func(y float64) float64 { return py0 + ph - (y-ylo)/(yend-ylo)*ph }

	cv.rect(0, 0, float64(w), float64(h), white, white)
	if c.Title != "" {
		cv.text(float64(w)/2, 24, c.Title, "middle", black, false)
	}
	for _, t := range yt {
		cv.line(px0, sy(t), px0+pw, sy(t), grid, 1, false)
		cv.line(px0-5, sy(t), px0, sy(t), black, 1, false)
		cv.text(px0-8, sy(t)+4, c.Y.label(t), "end", black, false)
	}
	for _, t := range xt {
		cv.line(sx(t), py0, sx(t), py0+ph, grid, 1, false)
		cv.line(sx(t), py0+ph, sx(t), py0+ph+5, black, 1, false)
		cv.text(sx(t), py0+ph+19, c.X.label(t), "middle", black, false)
	}
	cv.line(px0, py0+ph, px0+pw, py0+ph, black, 1, false)
	cv.line(px0, py0, px0, py0+ph, black, 1, false)
	cv.text(px0+pw/2, float64(h)-14, c.X.Label, "middle", black, false)
	cv.text(18, py0+ph/2, c.Y.Label, "middle", black, true)

	for _, l := range c.HLines {
		cv.line(px0, sy(l.Y), px0+pw, sy(l.Y), red, 2, true)
	}
	var placed labelBoxes
	for i, s := range c.Series {
		xs, ys := make([]float64, len(s.X)), make([]float64, len(s.Y))
		for j := range s.X {
			xs[j], ys[j] = sx(s.X[j]), sy(math.Min(s.Y[j], yend))
		}
		if c.Markers {
			for j := range xs {
				marker(cv, i, xs[j], ys[j], palette[i%len(palette)])
				placed.add(xs[j]-markerR, ys[j]-markerR, 2*markerR, 2*markerR)
			}
		} else {
			cv.polyline(xs, ys, palette[i%len(palette)], 2)
		}
	}
	// Point labels go over every series, each where it overlaps no other
	// label and no marker, when such a place is next to its point.
	for _, s := range c.Series {
		for j, l := range s.Labels {
			if l != "" {
				placed.label(cv, sx(s.X[j]), sy(math.Min(s.Y[j], yend)), l, px0, py0, pw, ph)
			}
		}
	}

	// Legend, right of the plot.
	lx, ly := px0+pw+20, py0+4
	rows := len(c.Series) + len(c.HLines)
	cv.rect(lx-8, ly-4, legendW, float64(rows)*18+8, white, grey)
	for i, s := range c.Series {
		y := ly + float64(i)*18 + 9
		if c.Markers {
			marker(cv, i, lx+11, y, palette[i%len(palette)])
		} else {
			cv.line(lx, y, lx+22, y, palette[i%len(palette)], 2, false)
		}
		cv.text(lx+30, y+4, s.Name, "start", black, false)
	}
	for i, l := range c.HLines {
		y := ly + float64(len(c.Series)+i)*18 + 9
		cv.line(lx, y, lx+22, y, red, 2, true)
		cv.text(lx+30, y+4, l.Label, "start", black, false)
	}
}

// WriteSVG draws c as an SVG document.
func WriteSVG(w io.Writer, c Chart) error {
	if err := c.validate(); err != nil {
		return err
	}
	wd, ht := c.size()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", wd, ht, wd, ht)
	c.draw(&svgCanvas{w: bw})
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

type svgCanvas struct{ w *bufio.Writer }

func rgb(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func num(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

func (s *svgCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="8 5"`
	}
	fmt.Fprintf(s.w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), rgb(c), num(width), dash)
}

func (s *svgCanvas) polyline(xs, ys []float64, c color.RGBA, width float64) {
	var b strings.Builder
	for i := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(xs[i]) + "," + num(ys[i]))
	}
	fmt.Fprintf(s.w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"/>`+"\n", b.String(), rgb(c), num(width))
}

func (s *svgCanvas) rect(x, y, w, h float64, fill, stroke color.RGBA) {
	fmt.Fprintf(s.w, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="%s"/>`+"\n", num(x), num(y), num(w), num(h), rgb(fill), rgb(stroke))
}

func (s *svgCanvas) circle(x, y, r float64, fill, stroke color.RGBA) {
	fmt.Fprintf(s.w, `<circle cx="%s" cy="%s" r="%s" fill="%s" stroke="%s"/>`+"\n", num(x), num(y), num(r), rgb(fill), rgb(stroke))
}

func (s *svgCanvas) polygon(xs, ys []float64, fill, stroke color.RGBA) {
	var b strings.Builder
	for i := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(xs[i]) + "," + num(ys[i]))
	}
	fmt.Fprintf(s.w, `<polygon points="%s" fill="%s" stroke="%s"/>`+"\n", b.String(), rgb(fill), rgb(stroke))
}

func (s *svgCanvas) text(x, y float64, str, anchor string, c color.RGBA, vertical bool) {
	tr := ""
	if vertical {
		tr = fmt.Sprintf(` transform="rotate(-90 %s %s)"`, num(x), num(y))
	}
	fmt.Fprintf(s.w, `<text x="%s" y="%s" text-anchor="%s" fill="%s"%s>`, num(x), num(y), anchor, rgb(c), tr)
	xml.EscapeText(s.w, []byte(str))
	s.w.WriteString("</text>\n")
}
