package render

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// WritePNG draws c as a PNG image: shapes are filled with the
// anti-aliasing rasterizer of golang.org/x/image/vector, and text is set
// in Go Regular (golang.org/x/image/font/gofont) at 12 pixels, the SVG's
// font size. The same chart always gives the same bytes.
func WritePNG(w io.Writer, c Chart) error {
	if err := c.validate(); err != nil {
		return err
	}
	wd, ht := c.size()
	cv, err := newRasterCanvas(wd, ht)
	if err != nil {
		return err
	}
	c.draw(cv)
	return png.Encode(w, cv.img)
}

// fontSize is the text size in pixels, as the SVGs' font-size.
const fontSize = 12

// goRegular is Go Regular, parsed once; an *opentype.Font is read-only
// and may be shared (each face has its own buffers).
var goRegular = sync.OnceValues(func() (*opentype.Font, error) {
	return opentype.Parse(goregular.TTF)
})

// rasterCanvas draws on an RGBA image. A stroke is filled as its
// outline (the polyline offset by half the width on both sides, with
// round outer joins and butt ends, as the SVGs' stroke-linejoin="round"),
// so that the rasterizer covers every pixel once; one-pixel horizontal
// and vertical lines are snapped to the pixel grid, so that axes and grid
// lines stay crisp.
type rasterCanvas struct {
	img  *image.RGBA
	face font.Face
	z    vector.Rasterizer
}

func newRasterCanvas(w, h int) (*rasterCanvas, error) {
	f, err := goRegular()
	if err != nil {
		return nil, err
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: fontSize, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		return nil, err
	}
	return &rasterCanvas{img: image.NewRGBA(image.Rect(0, 0, w, h)), face: face}, nil
}

// point is a point in pixels; (0, 0) is the top left corner of the image.
type point struct{ x, y float64 }

func (p point) add(q point) point       { return point{p.x + q.x, p.y + q.y} }
func (p point) sub(q point) point       { return point{p.x - q.x, p.y - q.y} }
func (p point) scale(k float64) point   { return point{p.x * k, p.y * k} }
func cross(p, q point) float64          { return p.x*q.y - p.y*q.x }
func polar(c point, r, a float64) point { return point{c.x + r*math.Cos(a), c.y + r*math.Sin(a)} }

// fill paints the closed paths in c, anti-aliased. Where paths overlap
// their windings add up: paths running the same way cover the union
// (once), a path inside another running the other way cuts a hole.
func (r *rasterCanvas) fill(c color.RGBA, paths ...[]point) {
	minX, minY := math.Inf(1), math.Inf(1)
	maxX, maxY := math.Inf(-1), math.Inf(-1)
	for _, p := range paths {
		for _, q := range p {
			minX, maxX = math.Min(minX, q.x), math.Max(maxX, q.x)
			minY, maxY = math.Min(minY, q.y), math.Max(maxY, q.y)
		}
	}
	if minX > maxX {
		return
	}
	bb := image.Rect(int(math.Floor(minX)), int(math.Floor(minY)), int(math.Ceil(maxX)), int(math.Ceil(maxY))).Intersect(r.img.Rect)
	if bb.Empty() {
		return
	}
	// Tiles no larger than vector's threshold keep it on fixed-point
	// math: above it, it switches to float32 accumulation, whose SIMD and
	// pure-Go versions round differently, and the bytes would depend on
	// the build.
	const tile = 512
	for ty := bb.Min.Y; ty < bb.Max.Y; ty += tile {
		for tx := bb.Min.X; tx < bb.Max.X; tx += tile {
			tb := image.Rect(tx, ty, min(tx+tile, bb.Max.X), min(ty+tile, bb.Max.Y))
			r.z.Reset(tb.Dx(), tb.Dy())
			o := point{float64(tb.Min.X), float64(tb.Min.Y)}
			for _, p := range paths {
				if len(p) < 3 {
					continue
				}
				for i, q := range p {
					q = q.sub(o)
					if i == 0 {
						r.z.MoveTo(float32(q.x), float32(q.y))
					} else {
						r.z.LineTo(float32(q.x), float32(q.y))
					}
				}
				r.z.ClosePath()
			}
			r.z.Draw(r.img, tb, image.NewUniform(c), image.Point{})
		}
	}
}

// disc is a circle of radius rad as a polygon, fine enough that its
// edge is within a hundredth of a pixel of the circle.
func disc(c point, rad float64) []point {
	n := max(8, int(math.Ceil(math.Pi/math.Acos(1-0.01/math.Max(rad, 0.01)))))
	p := make([]point, n)
	for i := range p {
		p[i] = polar(c, rad, 2*math.Pi*float64(i)/float64(n))
	}
	return p
}

// offset is the polyline pts moved sideways by d (to the right of its
// direction on the screen for d > 0): each segment parallel to its own,
// joined on the outer side of a bend by an arc of radius |d| around the
// vertex, and on the inner side where the two meet. Closed joins the
// last point to the first. Repeated points are dropped.
func offset(pts []point, d float64, closed bool) []point {
	var q []point
	for _, p := range pts {
		if len(q) == 0 || p != q[len(q)-1] {
			q = append(q, p)
		}
	}
	if closed && len(q) > 1 && q[0] == q[len(q)-1] {
		q = q[:len(q)-1]
	}
	n := len(q)
	if n < 2 {
		return nil
	}
	nseg := n - 1
	if closed {
		nseg = n
	}
	// dir[i] and length[i]: segment i, from q[i] to q[i+1].
	dir, length := make([]point, nseg), make([]float64, nseg)
	for i := range nseg {
		v := q[(i+1)%n].sub(q[i])
		length[i] = math.Hypot(v.x, v.y)
		dir[i] = v.scale(1 / length[i])
	}
	normal := func(i int) point { return point{-dir[i].y * d, dir[i].x * d} }
	var out []point
	join := func(v point, i, j int) { // the bend at v from segment i to j
		p1, p2 := v.add(normal(i)), v.add(normal(j))
		den := cross(dir[i], dir[j])
		if math.Abs(den) < 1e-9 && dir[i].x*dir[j].x+dir[i].y*dir[j].y > 0 {
			out = append(out, p1) // straight on
			return
		}
		if math.Abs(den) >= 1e-9 {
			// p1 + a·dir[i] = p2 + b·dir[j]; a < 0 on the inner side.
			a := cross(p2.sub(p1), dir[j]) / den
			b := cross(p2.sub(p1), dir[i]) / den
			if a < 0 {
				if -a <= length[i] && b <= length[j] {
					out = append(out, p1.add(dir[i].scale(a)))
				} else {
					out = append(out, p1, v, p2) // segments too short to meet
				}
				return
			}
		}
		a1 := math.Atan2(p1.y-v.y, p1.x-v.x)
		da := math.Atan2(p2.y-v.y, p2.x-v.x) - a1
		for da > math.Pi {
			da -= 2 * math.Pi
		}
		for da <= -math.Pi {
			da += 2 * math.Pi
		}
		steps := int(math.Ceil(math.Abs(da) / (math.Pi / 16)))
		for k := 0; k <= steps; k++ {
			out = append(out, polar(v, math.Abs(d), a1+da*float64(k)/float64(steps)))
		}
	}
	if closed {
		for i := range n {
			join(q[i], (i+nseg-1)%nseg, i)
		}
		return out
	}
	out = append(out, q[0].add(normal(0)))
	for i := 1; i < n-1; i++ {
		join(q[i], i-1, i)
	}
	return append(out, q[n-1].add(normal(nseg-1)))
}

func reversed(p []point) []point {
	r := make([]point, len(p))
	for i, q := range p {
		r[len(p)-1-i] = q
	}
	return r
}

// stroke is the outline of the open polyline pts drawn width wide.
func stroke(pts []point, width float64) []point {
	right := offset(pts, width/2, false)
	if right == nil {
		return nil
	}
	return append(right, reversed(offset(pts, -width/2, false))...)
}

// Dashes are 8 pixels on and 5 off, as the SVG's stroke-dasharray.
const dashOn, dashOff = 8.0, 5.0

func (r *rasterCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	a, b := point{x1, y1}, point{x2, y2}
	switch {
	case width <= 1 && !dashed && (x1 == x2 || y1 == y2):
		// A crisp one-pixel line on the pixel grid.
		xa, xb := math.Round(math.Min(x1, x2)), math.Round(math.Max(x1, x2))
		ya, yb := math.Round(math.Min(y1, y2)), math.Round(math.Max(y1, y2))
		r.fill(c, []point{{xa, ya}, {xb + 1, ya}, {xb + 1, yb + 1}, {xa, yb + 1}})
	case dashed:
		l := math.Hypot(x2-x1, y2-y1)
		var dashes [][]point
		for s := 0.0; s < l; s += dashOn + dashOff {
			p := a.add(b.sub(a).scale(s / l))
			q := a.add(b.sub(a).scale(math.Min(s+dashOn, l) / l))
			dashes = append(dashes, stroke([]point{p, q}, width))
		}
		r.fill(c, dashes...)
	default:
		r.fill(c, stroke([]point{a, b}, width))
	}
}

func (r *rasterCanvas) polyline(xs, ys []float64, c color.RGBA, width float64) {
	pts := make([]point, len(xs))
	for i := range xs {
		pts[i] = point{xs[i], ys[i]}
	}
	if len(pts) == 1 {
		// One point: a dot, so that a single measurement still shows.
		r.fill(c, disc(pts[0], width))
		return
	}
	r.fill(c, stroke(pts, width))
}

// rect fills the rectangle and, when stroke differs from fill, outlines
// it with crisp one-pixel lines just inside its edges.
func (r *rasterCanvas) rect(x, y, w, h float64, fill, stroke color.RGBA) {
	r.fill(fill, []point{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}})
	if stroke != fill {
		x0, y0 := math.Round(x), math.Round(y)
		x1, y1 := math.Round(x+w)-1, math.Round(y+h)-1
		r.line(x0, y0, x1, y0, stroke, 1, false)
		r.line(x0, y1, x1, y1, stroke, 1, false)
		r.line(x0, y0, x0, y1, stroke, 1, false)
		r.line(x1, y0, x1, y1, stroke, 1, false)
	}
}

// circle is a disc of radius rad with a one-pixel outline centred on its
// edge, as SVG draws it.
func (r *rasterCanvas) circle(x, y, rad float64, fill, stroke color.RGBA) {
	c := point{x, y}
	r.fill(stroke, disc(c, rad+0.5))
	if fill != stroke {
		r.fill(fill, disc(c, rad-0.5))
	}
}

// polygon fills the polygon and strokes its outline one pixel wide,
// centred on the edges, as SVG draws it: the outline is the ring between
// the polygon moved out and in by half a pixel.
func (r *rasterCanvas) polygon(xs, ys []float64, fill, stroke color.RGBA) {
	pts := make([]point, len(xs))
	for i := range xs {
		pts[i] = point{xs[i], ys[i]}
	}
	r.fill(fill, pts)
	r.fill(stroke, offset(pts, 0.5, true), reversed(offset(pts, -0.5, true)))
}

// text draws s with its baseline at y (at x for vertical text, which
// reads bottom to top, as SVG's rotate(-90)). The pen starts on a whole
// pixel, so that hinted glyphs stay sharp.
func (r *rasterCanvas) text(x, y float64, s, anchor string, c color.RGBA, vertical bool) {
	d := &font.Drawer{Face: r.face, Src: image.NewUniform(c)}
	adv := float64(d.MeasureString(s)) / 64
	start := 0.0
	switch anchor {
	case "middle":
		start = -adv / 2
	case "end":
		start = -adv
	}
	if !vertical {
		d.Dst = r.img
		d.Dot = fixed.P(int(math.Round(x+start)), int(math.Round(y)))
		d.DrawString(s)
		return
	}
	// Set the text horizontally in a mask, then turn the mask 90°
	// counter-clockwise: the text's baseline becomes the column x, and
	// its start (per anchor) the point y.
	m := r.face.Metrics()
	asc, desc := m.Ascent.Ceil()+1, m.Descent.Ceil()+1
	tw, th := int(math.Ceil(adv))+2, asc+desc
	mask := image.NewAlpha(image.Rect(0, 0, tw, th))
	d.Dst, d.Src = mask, image.Opaque
	d.Dot = fixed.P(1, asc)
	d.DrawString(s)
	// The turned mask: its column u is the text's row u, its row v the
	// text's column tw-1-v.
	x0 := int(math.Round(x)) - asc
	y0 := int(math.Round(y-start)) - tw + 1
	turned := image.NewAlpha(image.Rect(x0, y0, x0+th, y0+tw))
	for v := range tw {
		for u := range th {
			turned.SetAlpha(x0+u, y0+v, mask.AlphaAt(tw-1-v, u))
		}
	}
	draw.DrawMask(r.img, turned.Rect, image.NewUniform(c), image.Point{}, turned, turned.Rect.Min, draw.Over)
}
