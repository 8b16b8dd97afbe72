package render

import (
	"bytes"
	"image"
	"math"
	"sync"
	"testing"
)

// TestPNGDeterministic: the same picture gives the same bytes, drawn
// again or concurrently (the parsed font is shared).
func TestPNGDeterministic(t *testing.T) {
	pictures := map[string]func(*bytes.Buffer) error{
		"chart":   func(b *bytes.Buffer) error { return WritePNG(b, sampleChart()) },
		"scatter": func(b *bytes.Buffer) error { return WritePNG(b, sampleScatter()) },
		"heatmap": func(b *bytes.Buffer) error { return WriteHeatmapPNG(b, sampleNIAH()) },
		"diff":    func(b *bytes.Buffer) error { return WriteHeatmapPNG(b, sampleDiff()) },
	}
	for name, draw := range pictures {
		var first bytes.Buffer
		if err := draw(&first); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]bytes.Buffer, 4)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				if err := draw(&got[i]); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			})
		}
		wg.Wait()
		for i := range got {
			if !bytes.Equal(got[i].Bytes(), first.Bytes()) {
				t.Errorf("%s: drawing %d differs from the first (%d and %d bytes)", name, i, got[i].Len(), first.Len())
			}
		}
	}
}

// inkBox is the bounding box of the pixels that are not white.
func inkBox(img *image.RGBA) image.Rectangle {
	var box image.Rectangle
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
			if img.RGBAAt(x, y) != white {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return box
}

func newTestCanvas(t *testing.T, w, h int) *rasterCanvas {
	t.Helper()
	cv, err := newRasterCanvas(w, h)
	if err != nil {
		t.Fatal(err)
	}
	cv.rect(0, 0, float64(w), float64(h), white, white)
	return cv
}

func TestRasterText(t *testing.T) {
	const s = "KL divergence (nats)"
	width := func(cv *rasterCanvas) float64 {
		d := cv.face
		var adv float64
		for _, r := range s {
			a, _ := d.GlyphAdvance(r)
			adv += float64(a) / 64
		}
		return adv
	}
	near := func(got int, want, tol float64) bool { return math.Abs(float64(got)-want) <= tol }

	// Horizontal, anchored at its end: the ink ends at x, sits on the
	// baseline y (descenders below it), and is as wide as the advance.
	cv := newTestCanvas(t, 300, 60)
	cv.text(250, 40, s, "end", black, false)
	box := inkBox(cv.img)
	adv := width(cv)
	if !near(box.Max.X, 250, 2) || !near(box.Dx(), adv, 3) || box.Min.Y < 40-fontSize || box.Max.Y > 40+5 || box.Dy() > fontSize+5 {
		t.Errorf("horizontal text ink %v, want ending at x 250, %.0f wide, on baseline 40", box, adv)
	}

	// Vertical, anchored at its start: it reads bottom to top from y,
	// with its baseline on the column x and the glyphs to its left.
	cv = newTestCanvas(t, 60, 300)
	cv.text(40, 250, s, "start", black, true)
	box = inkBox(cv.img)
	if !near(box.Max.Y, 250, 2) || !near(box.Dy(), adv, 3) || box.Min.X < 40-fontSize || box.Max.X > 40+5 || box.Dx() > fontSize+5 {
		t.Errorf("vertical text ink %v, want starting at y 250 going up, %.0f long, baseline on x 40", box, adv)
	}
	// The first letter, "K", is at the bottom: its stem is a horizontal
	// bar there, the tallest glyph part near the ink's bottom edge.
	row := func(y int) (n int) {
		for x := box.Min.X; x < box.Max.X; x++ {
			if c := cv.img.RGBAAt(x, y); c.R < 128 {
				n++
			}
		}
		return n
	}
	if n := max(row(box.Max.Y-1), row(box.Max.Y-2)); n < 6 {
		t.Errorf("vertical text: the bottom rows hold %d dark pixels, want the stem of K (at least 6)", n)
	}
}

// TestRasterShapes: fills are anti-aliased (edge pixels are blends of the
// colour and the background), strokes are solid inside, one-pixel grid
// lines are crisp, and a stroke's joins are as wide as its segments.
func TestRasterShapes(t *testing.T) {
	blue := palette[0]
	cv := newTestCanvas(t, 100, 100)
	cv.circle(50, 50, 20, blue, blue)
	if got := cv.img.RGBAAt(50, 50); got != blue {
		t.Errorf("circle centre = %v, want %v", got, blue)
	}
	blends := 0
	for x := 0; x < 100; x++ {
		if c := cv.img.RGBAAt(x, 45); c != blue && c != white {
			blends++
		}
	}
	if blends < 2 || blends > 6 {
		t.Errorf("a row through the circle has %d blended edge pixels, want 2 to 6 (anti-aliased edges)", blends)
	}

	cv = newTestCanvas(t, 100, 20)
	cv.line(10, 10, 90, 10, grid, 1, false)
	for x := 10; x <= 90; x++ {
		if got, above, below := cv.img.RGBAAt(x, 10), cv.img.RGBAAt(x, 9), cv.img.RGBAAt(x, 11); got != grid || above != white || below != white {
			t.Fatalf("grid line at x %d: %v between %v and %v, want one crisp %v pixel", x, got, above, below, grid)
		}
	}

	// Shapes wider than a tile (512 pixels) are drawn in tiles: no seam.
	cv = newTestCanvas(t, 1100, 20)
	cv.line(5, 10.3, 1095, 10.3, blue, 2, false)
	for x := 6; x < 1094; x++ {
		for y := range 20 {
			if got, want := cv.img.RGBAAt(x, y), cv.img.RGBAAt(100, y); got != want {
				t.Fatalf("long line at (%d, %d) = %v, want %v as at x 100", x, y, got, want)
			}
		}
	}

	// A polyline with a bend is drawn as its exact outline would be (at
	// so gentle a bend the round join and the miter join differ by
	// hundredths of a pixel): where segments and join overlap, coverage
	// is not counted twice.
	pts := []point{{10, 30}, {50, 18}, {90, 30}}
	cv = newTestCanvas(t, 100, 60)
	cv.polyline([]float64{pts[0].x, pts[1].x, pts[2].x}, []float64{pts[0].y, pts[1].y, pts[2].y}, blue, 2)
	// segment is the rectangle a stroke of width 2 from a to b covers.
	segment := func(a, b point) []point {
		l := math.Hypot(b.x-a.x, b.y-a.y)
		nx, ny := -(b.y-a.y)/l, (b.x-a.x)/l
		return []point{{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}}
	}
	s1, s2 := segment(pts[0], pts[1]), segment(pts[1], pts[2])
	miter := func(p, q point) point { // where the offset lines p and q meet
		d1x, d1y := s1[1].x-s1[0].x, s1[1].y-s1[0].y
		d2x, d2y := s2[1].x-s2[0].x, s2[1].y-s2[0].y
		u := ((q.x-p.x)*d2y - (q.y-p.y)*d2x) / (d1x*d2y - d1y*d2x)
		return point{p.x + u*d1x, p.y + u*d1y}
	}
	exact := newTestCanvas(t, 100, 60)
	exact.fill(blue, []point{s1[0], miter(s1[0], s2[0]), s2[1], s2[2], miter(s1[3], s2[3]), s1[3]})
	worst := 0
	for y := range 60 {
		for x := range 100 {
			g, w := cv.img.RGBAAt(x, y), exact.img.RGBAAt(x, y)
			worst = max(worst, int(g.R)-int(w.R), int(w.R)-int(g.R))
		}
	}
	if worst > 16 {
		t.Errorf("polyline with a join differs from its exact outline by %d in red, want at most 16", worst)
	}
}
