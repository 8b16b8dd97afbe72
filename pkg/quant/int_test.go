package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache/cachetest"
)

var intFormats = []string{
	"int8", "int8:g32", "int8:sym", "int4", "int4:g32", "int4:sym", "int4:g32:channel", "int4:g16:channel:sym",
	"int2", "int2:g32", "int2:g32:channel", "int2:row",
	"kivi2", "kivi4", "kivi2:g32:r64", "quanto4", "quanto2", "quanto4:g32:r32:channel",
}

func TestIntegerFormatsThroughCache(t *testing.T) {
	reg := quant.Formats()
	for _, name := range intFormats {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		// Tolerance: packed kernels and Decode differ only by float32
		// summation order.
		cachetest.Run(t, f, cachetest.Options{Dims: []int{64, 128}, Tol: 2e-5, Windows: true})
	}
}

// TestIntegerShortBlocks runs the 4-bit formats through the cache suite at
// head sizes that are not a multiple of 32 (stories260K's 8, and 48), whose
// rows end in a short block of codes.
func TestIntegerShortBlocks(t *testing.T) {
	reg := quant.Formats()
	for _, name := range []string{"int4", "int4:g16", "int4:sym", "int4:g16:channel", "kivi4:g16:r32", "quanto4:g16:r16"} {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cachetest.Run(t, f, cachetest.Options{Dims: []int{8, 48}, Tol: 2e-5, Windows: true})
	}
}

// TestInt4Layout pins the tile layout of a one-row tile from its
// definition: the fp16 scale and zero, then the codes, a run of head_dim
// codes in blocks of 32 (16 bytes), byte k of a block holding code k in its
// low nibble and code k+16 in its high nibble, a last block of t < 32 codes
// holding codes k and k+t/2. The rows are integers from 0 to 15 with both
// ends present, so with one group per row the scale is 1 (fp16 0x3c00), the
// zero 0 and each code is its value.
func TestInt4Layout(t *testing.T) {
	f, err := quant.Formats().Lookup("int4:row")
	if err != nil {
		t.Fatal(err)
	}
	for _, dim := range []int{8, 48, 64, 128} {
		x := make([]float32, dim)
		for i := range x {
			x[i] = float32(i * 15 / (dim - 1))
		}
		if dim == 8 {
			copy(x, []float32{0, 1, 2, 3, 12, 13, 14, 15})
		}
		c, err := f.NewCodec(quant.CodecParams{Dim: dim})
		if err != nil {
			t.Fatal(err)
		}
		tile := make([]byte, c.TileBytes(1))
		c.Encode(tile, 0, x, 1)
		want := make([]byte, 4+dim/2)
		want[1] = 0x3c // scale 1.0, little-endian fp16; zero 0
		for b := 0; b < dim; b += 32 {
			h := min(32, dim-b) / 2
			for k := 0; k < h; k++ {
				want[4+b/2+k] = byte(x[b+k]) | byte(x[b+h+k])<<4
			}
		}
		if string(tile) != string(want) {
			t.Errorf("dim %d: tile % x, want % x", dim, tile, want)
		}
		back := make([]float32, dim)
		c.Decode(back, tile, 0, 1)
		for i := range x {
			if back[i] != x[i] {
				t.Fatalf("dim %d: decoded[%d] = %v, want %v", dim, i, back[i], x[i])
			}
		}
	}
}

func TestIntegerNamesRoundTrip(t *testing.T) {
	reg := quant.Formats()
	for _, name := range intFormats {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		g, err := reg.Lookup(f.Name())
		if err != nil || g.Name() != f.Name() {
			t.Errorf("Lookup(%q).Name() = %q, which looks up as %v, %v", name, f.Name(), g, err)
		}
	}
	for _, bad := range []string{"int4:g0", "int4:gx", "int4:bogus", "int8:channel:row", "kivi2:r100", "kivi2:sym", "int3"} {
		if _, err := reg.Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) succeeded, want an error", bad)
		}
	}
}

// stepBound returns, for each value of a row set, half the quantization step
// of its group, recomputed from the data: the theoretical bound is s/2 with
// s = (max−min)/(2^b−1) (asymmetric) or absmax/(2^(b−1)−1) (symmetric), where
// s is rounded up to fp16, plus float32 rounding.
func checkBound(t *testing.T, name string, f quant.Format, dim int, rows [][]float32) {
	t.Helper()
	c, err := f.NewCodec(quant.CodecParams{Dim: dim, Key: true})
	if err != nil {
		t.Fatal(err)
	}
	g := c.TokenGroup()
	n := (len(rows) + g - 1) / g * g
	src := make([]float32, n*dim)
	for i, r := range rows {
		copy(src[i*dim:], r)
	}
	for i := len(rows); i < n; i++ { // pad with copies
		copy(src[i*dim:], rows[i%len(rows)])
	}
	tile := make([]byte, c.TileBytes(n))
	c.Encode(tile, 0, src, n)
	dec := make([]float32, n*dim)
	c.Decode(dec, tile, 0, n)
	bits, group, channel, sym := describeInt(f)
	for i := 0; i < n; i++ {
		for d := 0; d < dim; d++ {
			// Group of element (i, d).
			var vals []float32
			if channel {
				g0 := i / group * group
				for t := g0; t < g0+group; t++ {
					vals = append(vals, src[t*dim+d])
				}
			} else {
				gs := group
				if gs == 0 || gs > dim {
					gs = dim
				}
				g0 := d / gs * gs
				vals = src[i*dim+g0 : i*dim+g0+gs]
			}
			step := theoreticalStep(vals, bits, sym)
			x, y := float64(src[i*dim+d]), float64(dec[i*dim+d])
			bound := step/2*(1+1.0/1024) + 1e-6*math.Max(1, math.Abs(x)) // fp16 rounding of s, float32 arithmetic
			if math.IsNaN(y) || math.Abs(x-y) > bound {
				t.Fatalf("%s %s: element (%d,%d) = %v decodes to %v, error %g > bound %g", f.Name(), name, i, d, x, y, math.Abs(x-y), bound)
			}
		}
	}
}

func theoreticalStep(vals []float32, bits int, sym bool) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
	}
	if sym {
		return math.Max(math.Abs(lo), math.Abs(hi)) / float64(int(1)<<(bits-1)-1)
	}
	// z is rounded down to fp16, which can widen the range by one fp16 ulp of lo.
	return (hi - lo + math.Abs(lo)/1024) / float64(int(1)<<bits-1)
}

// describeInt recovers a test format's parameters from its name.
func describeInt(f quant.Format) (bits, group int, channel, sym bool) {
	p := quant.IntParams(f)
	return p.Bits, p.Group, p.Channel, p.Sym
}

func TestIntegerErrorBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 64
	gauss := func(n int) [][]float32 {
		r := make([][]float32, n)
		for i := range r {
			r[i] = make([]float32, dim)
			for d := range r[i] {
				r[i][d] = float32(rng.NormFloat64() * 3)
			}
		}
		return r
	}
	fill := func(n int, fn func(i, d int) float32) [][]float32 {
		r := make([][]float32, n)
		for i := range r {
			r[i] = make([]float32, dim)
			for d := range r[i] {
				r[i][d] = fn(i, d)
			}
		}
		return r
	}
	cases := map[string][][]float32{
		"random":   gauss(64),
		"zeros":    fill(64, func(int, int) float32 { return 0 }),
		"constant": fill(64, func(int, int) float32 { return 1.2345 }),
		"outlier": fill(64, func(i, d int) float32 {
			if i == 5 && d == 7 {
				return 3000
			}
			return float32(math.Sin(float64(i*dim + d)))
		}),
		"negative": fill(64, func(i, d int) float32 { return -5 - float32(d%7) }),
		"tiny":     fill(64, func(i, d int) float32 { return float32(d-32) * 1e-6 }),
	}
	reg := quant.Formats()
	for _, name := range []string{"int8", "int8:g32:sym", "int4", "int4:g32", "int4:sym", "int4:g32:channel", "int4:g16:channel:sym", "int2", "int2:g32:channel", "int2:row"} {
		f := reg.MustLookup(name)
		for cname, rows := range cases {
			checkBound(t, cname, f, dim, rows)
		}
	}
}

func FuzzIntegerRoundTrip(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, uint8(0))
	f.Add([]byte{0xff, 0x7f, 0x80, 0x00, 0x12, 0x34, 0x56, 0x78}, uint8(3))
	names := []string{"int8", "int4", "int4:g32:channel", "int2:sym", "kivi2", "quanto2"}
	reg := quant.Formats()
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		fm := reg.MustLookup(names[int(which)%len(names)])
		for _, key := range []bool{true, false} {
			c, err := fm.NewCodec(quant.CodecParams{Dim: 32, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			n := c.TokenGroup()
			src := make([]float32, n*32)
			for i := range src {
				if len(data) >= 4 {
					b := data[(4*i)%(len(data)-3):]
					v := math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						v = 1
					}
					src[i] = v
				}
			}
			tile := make([]byte, c.TileBytes(n))
			c.Encode(tile, 0, src, n)
			dec := make([]float32, len(src))
			c.Decode(dec, tile, 0, n)
			for i, v := range dec {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: finite input %v decoded to %v", fm.Name(), src[i], v)
				}
			}
		}
	})
}
