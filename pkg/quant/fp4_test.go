package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
)

// TestE2M1Rounding pins both E2M1 roundings on hand-computed values: every
// midpoint (ties to even for nvfp4, away from zero for SGLang), saturation,
// signs and zeros; then checks the encoders against the search reference on
// a dense grid around every midpoint.
func TestE2M1Rounding(t *testing.T) {
	next := func(x float32) float32 { return math.Nextafter32(x, 100) }
	for _, tc := range []struct {
		x        float32
		even, up uint8
	}{
		{0, 0x0, 0x0},
		{float32(math.Copysign(0, -1)), 0x8, 0x0},
		{0.25, 0x0, 0x1}, // 0 | 0.5
		{next(0.25), 0x1, 0x1},
		{0.5, 0x1, 0x1},
		{0.75, 0x2, 0x2}, // 0.5 | 1: to even goes up
		{1.25, 0x2, 0x3}, // 1 | 1.5
		{1.75, 0x4, 0x4}, // 1.5 | 2
		{2.5, 0x4, 0x5},  // 2 | 3
		{3.5, 0x6, 0x6},  // 3 | 4
		{5, 0x6, 0x7},    // 4 | 6
		{next(5), 0x7, 0x7},
		{6, 0x7, 0x7},
		{1e30, 0x7, 0x7}, // saturates
		{float32(math.Inf(1)), 0x7, 0x7},
		{-0.1, 0x8, 0x8}, // rounds to −0
		{-2.5, 0xC, 0xD},
		{-5, 0xE, 0xF},
		{-7, 0xF, 0xF},
	} {
		if got := EncodeE2M1(tc.x); got != tc.even {
			t.Errorf("EncodeE2M1(%v) = %#x, want %#x", tc.x, got, tc.even)
		}
		if got := EncodeE2M1Up(tc.x); got != tc.up {
			t.Errorf("EncodeE2M1Up(%v) = %#x, want %#x", tc.x, got, tc.up)
		}
	}
	for c := range 16 {
		v := DecodeE2M1(uint8(c))
		if EncodeE2M1(v) != uint8(c) && !(c == 8) || EncodeE2M1Up(v) != uint8(c) && c != 8 {
			t.Errorf("code %#x → %v does not encode back", c, v)
		}
	}
	for _, b := range e2m1Bounds {
		for _, s := range []float32{1, -1} {
			x := s * b
			for range 40 {
				x = math.Nextafter32(x, float32(math.Inf(-1)))
			}
			for range 80 {
				if got, want := EncodeE2M1(x), refE2M1(float64(x), false); got != want {
					t.Fatalf("EncodeE2M1(%v) = %#x, reference %#x", x, got, want)
				}
				if got, want := EncodeE2M1Up(x), refE2M1(float64(x), true); got != want {
					t.Fatalf("EncodeE2M1Up(%v) = %#x, reference %#x", x, got, want)
				}
				x = math.Nextafter32(x, float32(math.Inf(1)))
			}
		}
	}
}

// TestRefE4M3 checks the search reference of E4M3 scale rounding against the
// bit-level encoder on every float32 in [0, 500] with a short mantissa, and
// on hand-computed ties and saturation.
func TestRefE4M3(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want uint8
	}{{1, 0x38}, {1.0625, 0x38}, {1.1875, 0x3A}, {448, 0x7E}, {464, 0x7E}, {1000, 0x7E}, {0.0009765625, 0}, {0.0009765626, 1}} {
		if got := refE4M3(tc.v); got != tc.want {
			t.Errorf("refE4M3(%v) = %#x, want %#x", tc.v, got, tc.want)
		}
	}
	for b := uint32(0); b < 0x43fa0000; b += 1 << 12 {
		x := math.Float32frombits(b)
		if got, want := refE4M3(float64(x)), EncodeE4M3(x, true); got != want {
			t.Fatalf("refE4M3(%v) = %#x, EncodeE4M3 %#x", x, got, want)
		}
	}
}

// fp4Row encodes one row with format f (dim a multiple of 16) and returns
// the stored bytes and the decoded values.
func fp4Row(t *testing.T, f Format, x []float32) ([]byte, []float32) {
	t.Helper()
	c, err := f.NewCodec(CodecParams{Dim: len(x)})
	if err != nil {
		t.Fatal(err)
	}
	tile := make([]byte, c.TileBytes(1))
	c.Encode(tile, 0, x, 1)
	dec := make([]float32, len(x))
	c.Decode(dec, tile, 0, 1)
	return tile, dec
}

// TestFP4Blocks pins whole blocks computed by hand: scales (E4M3 with its
// rounding and saturation, powers of two), codes and nibble order.
func TestFP4Blocks(t *testing.T) {
	block := func(vals ...float32) []float32 {
		x := make([]float32, 16)
		copy(x, vals)
		return x
	}
	for _, tc := range []struct {
		name  string
		f     Format
		x     []float32
		codes []byte // the 8 code bytes
		scale byte
		dec   []float32 // the first decoded values
	}{
		// amax 6: sf = 6·fp32(1/6) = 1 → E4M3 0x38; 6→7, 3→5, −1.5→0xB, 0.25→0 (tie, even), 0.75→2 (tie, even).
		{"nvfp4 unit scale", NVFP4, block(6, 3, -1.5, 0.25, 0.75, 1.25, 2.5, 5), []byte{0x57, 0x0B, 0x22, 0x64, 0, 0, 0, 0}, 0x38,
			[]float32{6, 3, -1.5, 0, 1, 1, 2, 4}},
		// amax 6.375: sf = 1.0625, halfway between E4M3 1 and 1.125 → 1 (even); 6.375 saturates to 6.
		{"nvfp4 scale tie", NVFP4, block(6.375, -1), []byte{0xA7, 0, 0, 0, 0, 0, 0, 0}, 0x38, []float32{6, -1}},
		// amax 6000: sf = 1000 saturates to 448; 6000/448 → 6 (2688), −896/448 = −2, 1120/448 = 2.5 → 2 (896).
		{"nvfp4 scale saturation", NVFP4, block(6000, -896, 1120), []byte{0xC7, 0x04, 0, 0, 0, 0, 0, 0}, 0x7E, []float32{2688, -896, 896}},
		// amax 1e-4: sf = 1.67e-5, below half E4M3's smallest subnormal → 0, every code 0.
		{"nvfp4 underflow", NVFP4, block(1e-4, -5e-5), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, 0, []float32{0, 0}},
		// amax 6 → e = 0 (byte 127); 2.5 → 3 (tie up), 0.25 → 0.5.
		{"fp4_e2m1 unit", FP4E2M1, block(6, 2.5, 0.25, -5), []byte{0x57, 0xF1, 0, 0, 0, 0, 0, 0}, 127, []float32{6, 3, 0.5, -6}},
		// amax 7 → 7/6 → e = 1 (byte 128): 7/2 = 3.5 → 4 (8); amax 12 → 2 exactly → e = 1.
		{"fp4_e2m1 exponent", FP4E2M1, block(7, 12), []byte{0x76, 0, 0, 0, 0, 0, 0, 0}, 128, []float32{8, 12}},
		// all zeros: clamp 1e-10 → e = −33 (byte 94).
		{"fp4_e2m1 zeros", FP4E2M1, block(), []byte{0, 0, 0, 0, 0, 0, 0, 0}, 94, []float32{0, 0}},
	} {
		tile, dec := fp4Row(t, tc.f, tc.x)
		if got := tile[:8]; string(got) != string(tc.codes) || tile[8] != tc.scale {
			t.Errorf("%s: codes % x scale %#x, want % x scale %#x", tc.name, got, tile[8], tc.codes, tc.scale)
		}
		for i, want := range tc.dec {
			if dec[i] != want {
				t.Errorf("%s: decoded[%d] = %v, want %v", tc.name, i, dec[i], want)
			}
		}
	}
}

// fp4TestRows returns rows of dim values from several distributions:
// Gaussian with outlier channels, tiny and huge magnitudes, exact E2M1
// midpoints, zeros and negative zeros.
func fp4TestRows(r *rand.Rand, rows, dim int) []float32 {
	x := make([]float32, rows*dim)
	for i := range x {
		row, ch := i/dim, i%dim
		switch row % 6 {
		case 0:
			x[i] = float32(r.NormFloat64())
			if ch%37 == 5 {
				x[i] *= 40
			}
		case 1:
			x[i] = float32(r.NormFloat64() * 1e-4)
		case 2:
			x[i] = float32(r.NormFloat64() * 3e4)
		case 3: // midpoints of the unit-scale grid: ties
			x[i] = e2m1Bounds[r.IntN(7)] * float32(1-2*r.IntN(2))
			if ch%16 == 0 {
				x[i] = 6
			}
		case 4:
			if r.IntN(3) == 0 {
				x[i] = float32(math.Copysign(0, -1))
			}
		default:
			x[i] = float32(math.Ldexp(r.Float64()-0.5, r.IntN(60)-30))
		}
	}
	return x
}

// TestFP4ReferenceCodec checks the fast codecs against the float64 reference
// codecs byte for byte and value for value, at several head sizes.
func TestFP4ReferenceCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 5))
	for _, f := range []*fp4Format{NVFP4.(*fp4Format), FP4E2M1.(*fp4Format)} {
		for _, dim := range []int{16, 64, 128, 256, 576} {
			const rows = 30
			x := fp4TestRows(r, rows, dim)
			c, err := f.NewCodec(CodecParams{Dim: dim})
			if err != nil {
				t.Fatal(err)
			}
			tile := make([]byte, c.TileBytes(rows))
			c.Encode(tile, 0, x, rows)
			dec := make([]float32, rows*dim)
			c.Decode(dec, tile, 0, rows)
			rb := c.TileBytes(1)
			ref := make([]byte, rb)
			refDec := make([]float64, dim)
			for row := range rows {
				clear(ref)
				if f.mx {
					refMXFP4Row(ref, x[row*dim:(row+1)*dim])
				} else {
					refNVFP4Row(ref, x[row*dim:(row+1)*dim], 1)
				}
				if got := tile[row*rb : (row+1)*rb]; string(got) != string(ref) {
					t.Fatalf("%s d%d row %d: codec % x\nreference % x", f.Name(), dim, row, got, ref)
				}
				refFP4DecodeRow(refDec, ref, f.mx, 1)
				for i, want := range refDec {
					if got := dec[row*dim+i]; float64(got) != want {
						t.Fatalf("%s d%d row %d [%d]: decoded %v, reference %v", f.Name(), dim, row, i, got, want)
					}
				}
			}
		}
	}
}

// TestFP4Attention checks Scores and Accumulate on packed rows against
// float64 attention over the reference decoder's rows, for one to five
// queries (decode and prefill) on runs of rows at odd offsets.
func TestFP4Attention(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 6))
	for _, f := range []*fp4Format{NVFP4.(*fp4Format), FP4E2M1.(*fp4Format)} {
		for _, dim := range []int{64, 128} {
			const capRows = 45
			c, err := f.NewCodec(CodecParams{Dim: dim})
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, capRows*dim)
			for i := range x {
				x[i] = float32(r.NormFloat64() * (1 + 20*float64(i%dim/60)))
			}
			tile := make([]byte, c.TileBytes(capRows))
			c.Encode(tile, 0, x, capRows)
			rb := c.TileBytes(1)
			ref := make([]float64, capRows*dim)
			for row := range capRows {
				refFP4DecodeRow(ref[row*dim:(row+1)*dim], tile[row*rb:(row+1)*rb], f.mx, 1)
			}
			for _, nq := range []int{1, 2, 3, 5} {
				for _, span := range [][2]int{{0, capRows}, {7, 13}, {44, 1}} {
					row0, n := span[0], span[1]
					name := fmt.Sprintf("%s d%d nq%d rows %d+%d", f.Name(), dim, nq, row0, n)
					q := make([]float32, nq*dim)
					for i := range q {
						q[i] = float32(r.NormFloat64())
					}
					ldd := n + 3
					sc := make([]float32, nq*ldd)
					c.Scores(sc, ldd, q, nq, tile, row0, n)
					w := make([]float32, nq*ldd)
					for i := range w {
						w[i] = float32(r.Float64())
					}
					acc := make([]float32, nq*dim)
					c.Accumulate(acc, w, ldd, nq, tile, row0, n)
					for i := range nq {
						for j := range n {
							var want, mag float64
							for d := range dim {
								p := float64(q[i*dim+d]) * ref[(row0+j)*dim+d]
								want, mag = want+p, mag+math.Abs(p)
							}
							if got := float64(sc[i*ldd+j]); math.Abs(got-want) > 1e-5*mag+1e-30 {
								t.Fatalf("%s: score[%d][%d] = %v, float64 reference %v", name, i, j, got, want)
							}
						}
						for d := range dim {
							var want, mag float64
							for j := range n {
								p := float64(w[i*ldd+j]) * ref[(row0+j)*dim+d]
								want, mag = want+p, mag+math.Abs(p)
							}
							if got := float64(acc[i*dim+d]); math.Abs(got-want) > 1e-5*mag+1e-30 {
								t.Fatalf("%s: acc[%d][%d] = %v, float64 reference %v", name, i, d, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestFP4Bytes pins the byte math at head sizes 64, 128 and 576 (vLLM's
// packed_head_size = head_size/2 + head_size/16), the state bytes (nvfp4's
// fp32 tensor scale, once per layer side), and refuses head sizes that are
// not multiples of 16, as vLLM's cache writer does.
func TestFP4Bytes(t *testing.T) {
	for _, f := range []Format{NVFP4, FP4E2M1} {
		for _, tc := range []struct{ dim, row int }{{64, 36}, {128, 72}, {576, 324}} {
			c, err := f.NewCodec(CodecParams{Dim: tc.dim})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.TileBytes(16); got != 16*tc.row {
				t.Errorf("%s d%d: 16 rows take %d bytes, want %d", f.Name(), tc.dim, got, 16*tc.row)
			}
			if got := DescribeFormat(f, tc.dim).Bits; got != 4.5 {
				t.Errorf("%s d%d: %g bits per value, want 4.5", f.Name(), tc.dim, got)
			}
		}
		for head, want := range []int{4, 0} {
			c, _ := f.NewCodec(CodecParams{Dim: 128, Head: head})
			if f == FP4E2M1 {
				want = 0
			}
			if got := c.StateBytes(); got != want {
				t.Errorf("%s head %d: state %d bytes, want %d", f.Name(), head, got, want)
			}
		}
		if _, err := f.NewCodec(CodecParams{Dim: 72}); err == nil {
			t.Errorf("%s accepts head size 72", f.Name())
		}
	}
	reg := Formats()
	for _, name := range []string{"nvfp4", "NVFP4", "fp4_e2m1", "fp4-e2m1"} {
		if _, err := reg.Lookup(name); err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
		}
	}
	if _, err := reg.Lookup("nvfp4:rot"); err == nil {
		t.Error("nvfp4 takes an option")
	}
}

// TestNVFP4Dynamic checks nvfp4:dynamic: the tensor scale is set from the
// first nonzero data at amax/(448·6) and frozen, shared by a layer side's
// heads, counted once (head 0's 4 bytes); later rows encode as the reference
// codec does at that scale; Fresh forgets it; PrimeFP8Scales sets it from a
// whole batch.
func TestNVFP4Dynamic(t *testing.T) {
	f, err := Formats().Lookup("nvfp4:dynamic")
	if err != nil {
		t.Fatal(err)
	}
	if tr := f.Traits(true); !tr.Dynamic || tr.TensorScale != DTypeF32 || f.Name() != "nvfp4:dynamic" {
		t.Fatalf("nvfp4:dynamic: name %q, traits %+v", f.Name(), tr)
	}
	const dim = 32
	c0, _ := f.NewCodec(CodecParams{Dim: dim, Layer: 1, Head: 0})
	c1, _ := f.NewCodec(CodecParams{Dim: dim, Layer: 1, Head: 1})
	if c0.StateBytes() != 4 || c1.StateBytes() != 0 {
		t.Errorf("state bytes %d, %d; want 4 for head 0 only", c0.StateBytes(), c1.StateBytes())
	}
	tile := make([]byte, c0.TileBytes(3))
	c0.Encode(tile, 0, make([]float32, dim), 1) // zeros leave the scale unset
	// amax 5376: sg = 5376/2688 = 2; the block's scale 5376/6/2 = 448 (0x7E).
	x := make([]float32, dim)
	x[0], x[1], x[2] = 5376, -2688, 1344
	c0.Encode(tile, 1, x, 1)
	if got := c1.(*fp4Codec).tensorScale(); got != 2 {
		t.Fatalf("tensor scale seen by head 1 = %v, want 2", got)
	}
	row := tile[c0.TileBytes(1) : 2*c0.TileBytes(1)]
	if row[dim/2] != 0x7E || row[0] != 0xD7 || row[1] != 0x03 {
		t.Errorf("row % x: want codes d7 03 and scale 0x7e", row)
	}
	dec := make([]float32, 3*dim)
	c0.Decode(dec, tile, 0, 3)
	if dec[0] != 0 || dec[dim] != 5376 || dec[dim+1] != -2688 || dec[dim+2] != 1344 {
		t.Errorf("decoded %v, %v %v %v; want 0, 5376 -2688 1344", dec[0], dec[dim], dec[dim+1], dec[dim+2])
	}
	// Later rows: the frozen scale, as the reference codec encodes them.
	r := rand.New(rand.NewPCG(42, 7))
	y := fp4TestRows(r, 1, dim)
	c0.Encode(tile, 2, y, 1)
	ref := make([]byte, c0.TileBytes(1))
	refNVFP4Row(ref, y, 2)
	if got := tile[2*len(ref):]; string(got) != string(ref) {
		t.Errorf("row at the frozen scale: % x, reference % x", got, ref)
	}
	if g := f.(Stateful).Fresh(); g == f || g.Name() != f.Name() {
		t.Errorf("Fresh() = %v (%q), want a new nvfp4:dynamic", g, g.Name())
	} else {
		PrimeFP8Scales(g, 0, false, 2, dim, append(make([]float32, dim), x...))
		c, _ := g.NewCodec(CodecParams{Dim: dim, Layer: 0, Key: false, Head: 1})
		if got := c.(*fp4Codec).tensorScale(); got != 2 {
			t.Errorf("after PrimeFP8Scales the tensor scale is %v, want 2", got)
		}
	}
}

// TestFP4DecodeTwin checks the simd decode (the table-lookup kernel, then
// the block scales) against its Go twin, bit for bit, on every kernel set
// this CPU has, for both formats, every code and scale byte (raw tiles of
// random bytes, so NaN and Inf scales too) and encoded rows.
func TestFP4DecodeTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 8))
	sets := []struct {
		name  string
		force func() func()
	}{{"default", func() func() { return func() {} }}, {"generic", simd.ForceGeneric}, {"avx2", simd.ForceAVX2}}
	for _, set := range sets {
		restore := set.force()
		for _, f := range []*fp4Format{NVFP4.(*fp4Format), FP4E2M1.(*fp4Format)} {
			for _, dim := range []int{16, 128, 576} {
				c, _ := f.NewCodec(CodecParams{Dim: dim})
				const rows = 12
				tile := make([]byte, c.TileBytes(rows))
				for i := range tile {
					tile[i] = byte(r.Uint32())
				}
				c.Encode(tile, 0, fp4TestRows(r, rows/2, dim), rows/2)
				fc := c.(*fp4Codec)
				got, want := make([]float32, rows*dim), make([]float32, rows*dim)
				fc.Decode(got, tile, 0, rows)
				fc.decodeGo(want, tile, 0, rows)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%s %s d%d [%d]: simd decode %v, Go twin %v", set.name, f.Name(), dim, i, got[i], want[i])
					}
				}
			}
		}
		restore()
	}
}
