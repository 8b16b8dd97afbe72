package render

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// WritePNG draws c as a PNG image. Lines are drawn by a small rasterizer
// (round brush stamped along each segment); text uses the 7×13 bitmap face
// of golang.org/x/image/font/basicfont, the one font available without cgo
// or font files.
func WritePNG(w io.Writer, c Chart) error {
	if err := c.validate(); err != nil {
		return err
	}
	wd, ht := c.size()
	img := image.NewRGBA(image.Rect(0, 0, wd, ht))
	c.draw(&rasterCanvas{img: img})
	return png.Encode(w, img)
}

type rasterCanvas struct{ img *image.RGBA }

// stamp paints a disc of radius r centred on (x, y).
func (r *rasterCanvas) stamp(x, y, rad float64, c color.RGBA) {
	x0, x1 := int(math.Floor(x-rad)), int(math.Ceil(x+rad))
	y0, y1 := int(math.Floor(y-rad)), int(math.Ceil(y+rad))
	for py := y0; py <= y1; py++ {
		for px := x0; px <= x1; px++ {
			dx, dy := float64(px)+0.5-x, float64(py)+0.5-y
			if dx*dx+dy*dy <= rad*rad+0.25 {
				if image.Pt(px, py).In(r.img.Rect) {
					r.img.SetRGBA(px, py, c)
				}
			}
		}
	}
}

func (r *rasterCanvas) segment(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool, phase *float64) {
	length := math.Hypot(x2-x1, y2-y1)
	steps := int(math.Ceil(length*2)) + 1
	rad := math.Max(width/2, 0.5)
	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		d := *phase + t*length
		if dashed && math.Mod(d, 13) >= 8 {
			continue
		}
		r.stamp(x1+t*(x2-x1), y1+t*(y2-y1), rad, c)
	}
	*phase += length
}

func (r *rasterCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	var phase float64
	if width <= 1 && !dashed && (x1 == x2 || y1 == y2) {
		// Crisp one-pixel axis and grid lines.
		xa, xb := int(math.Round(math.Min(x1, x2))), int(math.Round(math.Max(x1, x2)))
		ya, yb := int(math.Round(math.Min(y1, y2))), int(math.Round(math.Max(y1, y2)))
		draw.Draw(r.img, image.Rect(xa, ya, xb+1, yb+1).Intersect(r.img.Rect), image.NewUniform(c), image.Point{}, draw.Src)
		return
	}
	r.segment(x1, y1, x2, y2, c, width, dashed, &phase)
}

func (r *rasterCanvas) polyline(xs, ys []float64, c color.RGBA, width float64) {
	var phase float64
	for i := 1; i < len(xs); i++ {
		r.segment(xs[i-1], ys[i-1], xs[i], ys[i], c, width, false, &phase)
	}
	if len(xs) == 1 {
		r.stamp(xs[0], ys[0], width, c)
	}
}

func (r *rasterCanvas) rect(x, y, w, h float64, fill, stroke color.RGBA) {
	rc := image.Rect(int(x), int(y), int(x+w), int(y+h)).Intersect(r.img.Rect)
	draw.Draw(r.img, rc, image.NewUniform(fill), image.Point{}, draw.Src)
	if stroke != fill {
		x0, y0, x1, y1 := float64(rc.Min.X), float64(rc.Min.Y), float64(rc.Max.X-1), float64(rc.Max.Y-1)
		r.line(x0, y0, x1, y0, stroke, 1, false)
		r.line(x0, y1, x1, y1, stroke, 1, false)
		r.line(x0, y0, x0, y1, stroke, 1, false)
		r.line(x1, y0, x1, y1, stroke, 1, false)
	}
}

func (r *rasterCanvas) text(x, y float64, s, anchor string, c color.RGBA, vertical bool) {
	face := basicfont.Face7x13
	d := &font.Drawer{Face: face, Src: image.NewUniform(c)}
	adv := float64(d.MeasureString(s).Round())
	if !vertical {
		switch anchor {
		case "middle":
			x -= adv / 2
		case "end":
			x -= adv
		}
		d.Dst = r.img
		d.Dot = fixed.P(int(math.Round(x)), int(math.Round(y)))
		d.DrawString(s)
		return
	}
	// Draw horizontally on a scratch image, then copy it rotated 90°
	// counter-clockwise, centred on (x, y).
	tw, th := int(adv)+2, lineH+2
	tmp := image.NewRGBA(image.Rect(0, 0, tw, int(th)))
	d.Dst = tmp
	d.Dot = fixed.P(1, 10)
	d.DrawString(s)
	ox, oy := int(math.Round(x))-int(th)/2, int(math.Round(y))+tw/2
	for ty := 0; ty < int(th); ty++ {
		for tx := 0; tx < tw; tx++ {
			if tmp.RGBAAt(tx, ty).A == 0 {
				continue
			}
			p := image.Pt(ox+ty, oy-tx)
			if p.In(r.img.Rect) {
				r.img.SetRGBA(p.X, p.Y, tmp.RGBAAt(tx, ty))
			}
		}
	}
}

func (r *rasterCanvas) circle(x, y, rad float64, fill, stroke color.RGBA) {
	r.stamp(x, y, rad, stroke)
	r.stamp(x, y, rad-1, fill)
}

// polygon fills the pixels whose centres lie inside the polygon (even-odd
// rule), then strokes its edges.
func (r *rasterCanvas) polygon(xs, ys []float64, fill, stroke color.RGBA) {
	if len(xs) == 0 {
		return
	}
	minX, maxX, minY, maxY := xs[0], xs[0], ys[0], ys[0]
	for i := range xs {
		minX, maxX = math.Min(minX, xs[i]), math.Max(maxX, xs[i])
		minY, maxY = math.Min(minY, ys[i]), math.Max(maxY, ys[i])
	}
	for py := int(math.Floor(minY)); py <= int(math.Ceil(maxY)); py++ {
		for px := int(math.Floor(minX)); px <= int(math.Ceil(maxX)); px++ {
			cx, cy := float64(px)+0.5, float64(py)+0.5
			in := false
			for i, j := 0, len(xs)-1; i < len(xs); j, i = i, i+1 {
				if (ys[i] > cy) != (ys[j] > cy) && cx < (xs[j]-xs[i])*(cy-ys[i])/(ys[j]-ys[i])+xs[i] {
					in = !in
				}
			}
			if in && image.Pt(px, py).In(r.img.Rect) {
				r.img.SetRGBA(px, py, fill)
			}
		}
	}
	if stroke != fill {
		var phase float64
		for i, j := 0, len(xs)-1; i < len(xs); j, i = i, i+1 {
			r.segment(xs[j], ys[j], xs[i], ys[i], stroke, 1, false, &phase)
		}
	}
}
