package render

import (
	"image/color"
)

// markerR is a marker's radius in pixels.
const markerR = 5.0

// marker draws series i's marker at (x, y). Shapes cycle through circle,
// square, triangle, diamond and inverted triangle, so that series remain
// distinct in grey print and for readers who cannot tell the palette's
// colours apart.
func marker(cv canvas, i int, x, y float64, c color.RGBA) {
	r := markerR
	switch i % 5 {
	case 0:
		cv.circle(x, y, r, c, c)
	case 1:
		r *= 0.9
		cv.polygon([]float64{x - r, x + r, x + r, x - r}, []float64{y - r, y - r, y + r, y + r}, c, c)
	case 2:
		cv.polygon([]float64{x, x + r*1.15, x - r*1.15}, []float64{y - r*1.15, y + r*0.85, y + r*0.85}, c, c)
	case 3:
		r *= 1.2
		cv.polygon([]float64{x, x + r, x, x - r}, []float64{y - r, y, y + r, y}, c, c)
	case 4:
		cv.polygon([]float64{x - r*1.15, x + r*1.15, x}, []float64{y - r*0.85, y - r*0.85, y + r*1.15}, c, c)
	}
}

// labelBoxes are the rectangles (x, y, w, h) already taken by markers and
// point labels.
type labelBoxes [][4]float64

func (b *labelBoxes) add(x, y, w, h float64) { *b = append(*b, [4]float64{x, y, w, h}) }

func (b labelBoxes) free(x, y, w, h float64) bool {
	for _, r := range b {
		if x < r[0]+r[2] && r[0] < x+w && y < r[1]+r[3] && r[1] < y+h {
			return false
		}
	}
	return true
}

// label writes s next to the point (x, y): to the right if that spot is
// free and inside the plot (px, py, pw, ph), else left, above, below or
// further out, and to the right regardless when none is free. Text width
// is reckoned at charW a character, as the rest of the layout is.
func (b *labelBoxes) label(cv canvas, x, y float64, s string, px, py, pw, ph float64) {
	w, h := float64(len(s))*charW, lineH
	type spot struct {
		x, y   float64 // the box's top left
		anchor string
	}
	g := markerR + 3
	var spots []spot
	for _, d := range []float64{0, lineH, -lineH} {
		spots = append(spots,
			spot{x + g, y - h/2 + d, "start"},
			spot{x - g - w, y - h/2 + d, "end"},
		)
	}
	spots = append(spots,
		spot{x - w/2, y - g - h, "middle"},
		spot{x - w/2, y + g, "middle"},
	)
	pick := spots[0]
	for _, sp := range spots {
		if sp.x >= px && sp.x+w <= px+pw && sp.y >= py && sp.y+h <= py+ph && b.free(sp.x, sp.y, w, h) {
			pick = sp
			break
		}
	}
	b.add(pick.x, pick.y, w, h)
	tx := pick.x
	switch pick.anchor {
	case "middle":
		tx += w / 2
	case "end":
		tx += w
	}
	// The baseline sits 3 pixels above the box's bottom (descenders).
	cv.text(tx, pick.y+h-3, s, pick.anchor, black, false)
}
