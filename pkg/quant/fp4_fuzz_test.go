package quant

import (
	"math"
	"testing"
)

// FuzzFP4RoundTrip: on any float32 input, NaN and Inf included, the fast
// fp4 encoders write the reference codecs' bytes; on any stored bytes (the
// input read as a tile), the fast decoder gives the reference decoder's
// values; finite input decodes to finite values, and attention on the packed
// rows matches the decoded rows.
func FuzzFP4RoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3e, 0, 0, 0x20, 0x40, 0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f}, false) // 0.25, 2.5, NaN, +Inf
	f.Add([]byte{0, 0x80, 0xbb, 0x45, 0, 0, 0x60, 0xc4}, true)                                   // 6000, −896
	f.Fuzz(func(t *testing.T, data []byte, mx bool) {
		fm := &fp4Format{mx: mx}
		xs := floatsFrom(data)
		dim := 16
		if len(xs) > 32 {
			dim = 64
		}
		rows := max(1, (len(xs)+dim-1)/dim)
		x := make([]float32, rows*dim)
		copy(x, xs)
		c, err := fm.NewCodec(CodecParams{Dim: dim})
		if err != nil {
			t.Fatal(err)
		}
		rb := c.TileBytes(1)
		tile := make([]byte, c.TileBytes(rows))
		c.Encode(tile, 0, x, rows)
		ref := make([]byte, rb)
		for r := range rows {
			clear(ref)
			if mx {
				refMXFP4Row(ref, x[r*dim:(r+1)*dim])
			} else {
				refNVFP4Row(ref, x[r*dim:(r+1)*dim], 1)
			}
			if got := tile[r*rb : (r+1)*rb]; string(got) != string(ref) {
				t.Fatalf("%s row %d of %v: codec % x, reference % x", fm.Name(), r, x[r*dim:(r+1)*dim], got, ref)
			}
		}

		// Any bytes decode as the reference decodes them.
		raw := make([]byte, rb)
		copy(raw, data)
		got := make([]float32, dim)
		c.Decode(got, raw, 0, 1)
		want := make([]float64, dim)
		refFP4DecodeRow(want, raw, mx, 1)
		for i := range got {
			if g, w := float64(got[i]), float32(want[i]); !(g == float64(w) || math.IsNaN(g) && math.IsNaN(float64(w))) {
				t.Fatalf("%s: bytes % x value %d: decoded %v, reference %v", fm.Name(), raw, i, g, w)
			}
		}

		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return
			}
		}
		dec := make([]float32, len(x))
		c.Decode(dec, tile, 0, rows)
		var total float64
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: finite input %v decoded to %v", fm.Name(), x[i], v)
			}
			total += math.Abs(float64(v))
		}
		if total < 1e30 {
			checkKernels(t, fm.Name(), c, tile, dec, dim, rows)
		}
	})
}
