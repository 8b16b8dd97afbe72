package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// floatsFrom reads little-endian float32s from data.
func floatsFrom(data []byte) []float32 {
	x := make([]float32, len(data)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return x
}

// FuzzFP8RoundTrip: the encoders agree with the exhaustive nearest-code
// reference on any float32, a decoded code re-encodes to itself, and an fp8
// codec with a dynamic scale decodes finite input (saturating) to finite
// values that attention reads back consistently. Seeds: testdata/fuzz.
func FuzzFP8RoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0xe8, 0x43, 0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0x7f}, uint8(0), true) // 464, +Inf, NaN
	refs := map[FP8Kind]*fp8Ref{E4M3: newFP8Ref(E4M3), E5M2: newFP8Ref(E5M2)}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, sat bool) {
		k := FP8Kind(kind & 1)
		xs := floatsFrom(data)
		for _, x := range xs {
			code := k.Encode(x, sat)
			if want := refs[k].encode(x, k, sat); code != want {
				t.Fatalf("%s.Encode(%v, sat=%v) = %#02x, reference %#02x", k, x, sat, code, want)
			}
			v := k.Decode(code)
			finite := !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
			if sat && finite && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
				t.Fatalf("%s: finite %v saturates to %v", k, x, v)
			}
			if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) && k.Encode(v, sat) != code {
				t.Fatalf("%s: code %#02x → %v → %#02x", k, code, v, k.Encode(v, sat))
			}
		}
		// Through a codec: 8 values per row, finite inputs only.
		const dim = 8
		rows := len(xs) / dim
		if rows == 0 {
			return
		}
		for i, x := range xs {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				xs[i] = 1
			}
		}
		fm, err := NewFP8(k, FP8Options{Dynamic: true})
		if err != nil {
			t.Fatal(err)
		}
		name := fm.Name()
		c, err := fm.NewCodec(CodecParams{Dim: dim, Key: true})
		if err != nil {
			t.Fatal(err)
		}
		tile := make([]byte, c.TileBytes(rows))
		c.Encode(tile, 0, xs, rows)
		dec := make([]float32, rows*dim)
		c.Decode(dec, tile, 0, rows)
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: finite input %v decoded to %v", name, xs[i], v)
			}
		}
		var total float64
		for _, v := range dec {
			total += math.Abs(float64(v))
		}
		if total < 1e30 { // float32 sums of larger values may overflow
			checkKernels(t, name, c, tile, dec, dim, rows)
		}
	})
}

// checkKernels compares Scores and Accumulate with dot products on the
// decoded rows, for one query of ones and weights of ones.
func checkKernels(t *testing.T, name string, c Codec, tile []byte, dec []float32, dim, rows int) {
	t.Helper()
	q := make([]float32, dim)
	w := make([]float32, rows)
	for i := range q {
		q[i] = 1
	}
	for i := range w {
		w[i] = 1
	}
	sc := make([]float32, rows)
	c.Scores(sc, rows, q, 1, tile, 0, rows)
	acc := make([]float32, dim)
	c.Accumulate(acc, w, rows, 1, tile, 0, rows)
	var total float64
	for _, v := range dec {
		total += math.Abs(float64(v))
	}
	tol := 1e-5*total + 1e-30
	for j := 0; j < rows; j++ {
		var s float64
		for d := 0; d < dim; d++ {
			s += float64(dec[j*dim+d])
		}
		if math.Abs(float64(sc[j])-s) > tol {
			t.Fatalf("%s: Scores row %d = %v, decoded rows give %v", name, j, sc[j], s)
		}
	}
	for d := 0; d < dim; d++ {
		var s float64
		for j := 0; j < rows; j++ {
			s += float64(dec[j*dim+d])
		}
		if math.Abs(float64(acc[d])-s) > tol {
			t.Fatalf("%s: Accumulate value %d = %v, decoded rows give %v", name, d, acc[d], s)
		}
	}
}
