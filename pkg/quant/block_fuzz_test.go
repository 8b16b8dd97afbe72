package quant

import (
	"math"
	"testing"
)

// FuzzBlockRoundTrip: for every block type, with and without the Hadamard
// rotation, any input quantizes without panicking; finite input decodes to
// finite values within the type's error bound (blockBound, for inputs in the
// fp16 range the scales can represent), the reference and kernel decoders
// agree, and attention on the packed rows matches the decoded rows. Seeds:
// testdata/fuzz.
func FuzzBlockRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0xbf}, uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, which uint8, rot bool) {
		tp := ggmlTypes[int(which)%len(ggmlTypes)]
		xs := floatsFrom(data)
		dim := 32
		if len(xs) > 64 {
			dim = 64
		}
		rows := max(1, len(xs)/dim)
		x := make([]float32, rows*dim)
		copy(x, xs)

		// The reference quantizer on raw input, NaN and Inf included.
		b := make([]byte, rows*dim/32*tp.bytes)
		quantizeRow(tp, b, x)
		y := make([]float32, len(x))
		dequantizeRow(tp, y, b)

		finite, inRange := true, true
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				finite = false
			}
			if math.Abs(float64(v)) > 65504 {
				inRange = false
			}
		}
		if !finite {
			return
		}
		for i, v := range y {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: finite input %v decoded to %v", tp.name, x[i], v)
			}
		}
		if inRange {
			if err := blockErr(tp, x, y, b); err != "" {
				t.Fatalf("%s: %s", tp.name, err)
			}
		}

		// Through the codec.
		fm := Format(&blockFormat{t: tp, rot: rot})
		c, err := fm.NewCodec(CodecParams{Dim: dim, Key: rot})
		if err != nil {
			t.Fatal(err)
		}
		tile := make([]byte, c.TileBytes(rows))
		c.Encode(tile, 0, x, rows)
		dec := make([]float32, len(x))
		c.Decode(dec, tile, 0, rows)
		var total float64
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: finite input %v decoded to %v", fm.Name(), x[i], v)
			}
			if !rot && v != y[i] {
				t.Fatalf("%s: codec Decode %v, reference %v", fm.Name(), v, y[i])
			}
			total += math.Abs(float64(v))
		}
		if total < 1e30 {
			checkKernels(t, fm.Name(), c, tile, dec, dim, rows)
		}
	})
}
