package quant

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// fill returns a block whose first values are head and the rest f(j).
func fill(head []float32, f func(j int) float32) []float32 {
	x := make([]float32, ggmlBlock)
	for j := range x {
		if j < len(head) {
			x[j] = head[j]
		} else {
			x[j] = f(j)
		}
	}
	return x
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBlockGolden checks the quantizers byte for byte against blocks worked
// out by hand from the block definitions (docs/quant-schemes.md §6.1-6.2).
// fp16 scales are little-endian: 1.0 = 0x3C00 is "00 3c".
func TestBlockGolden(t *testing.T) {
	tests := []struct {
		name string
		t    *ggmlType
		x    []float32
		want string
	}{
		{
			// amax 127 → d = 1 (00 3c), id = 1; q = roundf(x), ties away
			// from zero: 0.5 → 1, −0.5 → −1, 2.5 → 3, −2.5 → −3 (round-half-even
			// would give 2 and −2); 100.4 → 100 (0x64), −100.6 → −101 (0x9b);
			// then j−20 for j = 8..31: −12 (0xf4) .. 11 (0x0b).
			name: "q8_0/rounding",
			t:    &q80Type,
			x:    fill([]float32{127, -127, 0.5, -0.5, 2.5, -2.5, 100.4, -100.6}, func(j int) float32 { return float32(j - 20) }),
			want: "003c 7f81 01ff 03fd 649b f4f5f6f7f8f9fafbfcfdfeff000102030405060708090a0b",
		},
		{
			// amax 254 → d = 2 (00 40), id = 0.5: 254 → 127, 3 → 1.5 → 2,
			// −3 → −1.5 → −2, 5 → 2.5 → 3, zeros → 0.
			name: "q8_0/scale2",
			t:    &q80Type,
			x:    fill([]float32{254, 3, -3, 5}, func(int) float32 { return 0 }),
			want: "0040 7f02fe03" + strings.Repeat("00", 28),
		},
		{
			name: "q8_0/zeros", // d = 0, inverse 0, all codes 0
			t:    &q80Type,
			x:    make([]float32, 32),
			want: strings.Repeat("00", 34),
		},
		{
			// x_j = j: the largest magnitude is 31 → d = 31/−8 = −3.875
			// (fp16 0xc3c0), q_j = min(15, trunc(8.5 − j/3.875)) =
			// 8 8 7 7 7 7 6 6 6 6 5 5 5 5 4 4 | 4 4 3 3 3 3 2 2 2 2 1 1 1 1 0 0;
			// byte j = q_j | q_{j+16}<<4.
			name: "q4_0/ramp",
			t:    &q40Type,
			x:    fill(nil, func(j int) float32 { return float32(j) }),
			want: "c0c3 4848373737372626262615151515 0404",
		},
		{
			// One negative outlier −16 → d = −16/−8 = 2 (00 40), id = 0.5:
			// 1 → trunc(0.5+8.5) = 9, −16 → trunc(−8+8.5) = 0. Byte 5 holds
			// element 5 (0) low and element 21 (9) high: 0x90.
			name: "q4_0/outlier",
			t:    &q40Type,
			x:    fill([]float32{1, 1, 1, 1, 1, -16}, func(int) float32 { return 1 }),
			want: "0040 9999999999909999999999999999 9999",
		},
		{
			// 16 and −16 tie on magnitude: the first wins, d = 16/−8 = −2
			// (00 c0), id = −0.5: 16 → 0, −16 → trunc(16.5) = 16 → clipped to
			// 15 (decodes to −14), zeros → 8.
			name: "q4_0/clip",
			t:    &q40Type,
			x:    fill([]float32{16, -16}, func(int) float32 { return 0 }),
			want: "00c0 808f888888888888888888888888 8888",
		},
		{
			// x_j = −2 + j/4 (j ≤ 30), x_31 = 0.3: min −2, max 5.5 →
			// d = 7.5/15 = 0.5 (00 38), m = −2 (00 c0), id = 2;
			// q_j = trunc(j/2 + 0.5) = 0 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8 |
			// 8 9 9 10 10 11 11 12 12 13 13 14 14 15 15, and 0.3 → trunc(5.1) = 5.
			name: "q4_1/ramp",
			t:    &q41Type,
			x: fill(nil, func(j int) float32 {
				if j == 31 {
					return 0.3
				}
				return -2 + float32(j)/4
			}),
			want: "0038 00c0 809191a2a2b3b3c4c4d5d5e6e6f7f758",
		},
		{
			// x_j = j − 16: the first largest magnitude is −16 → d = 1
			// (00 3c), q_j = trunc(j − 16 + 16.5) = j. Low nibbles: byte j =
			// j | j<<4; high bits: elements 16..31 have bit 4 set →
			// qh = 0xffff0000 → 00 00 ff ff.
			name: "q5_0/ramp",
			t:    &q50Type,
			x:    fill(nil, func(j int) float32 { return float32(j - 16) }),
			want: "003c 0000ffff 00112233445566778899aabbccddeeff",
		},
		{
			// [15, −16, 0...]: d = 1; 15 → 31 (bit 4 set), −16 → 0, 0 → 16
			// (bit 4 set): qh = all bits but bit 1 = 0xfffffffd; qs byte 0 =
			// 31&15 | (16&15)<<4 = 0x0f, the others 0.
			name: "q5_0/high-bits",
			t:    &q50Type,
			x:    fill([]float32{15, -16}, func(int) float32 { return 0 }),
			want: "003c fdffffff 0f" + strings.Repeat("00", 15),
		},
		{
			// x_j = j/2 − 4: min −4 (00 c4), max 11.5 → d = 15.5/31 = 0.5
			// (00 38), q_j = trunc(j + 0.5) = j: nibbles as in q5_0/ramp.
			name: "q5_1/ramp",
			t:    &q51Type,
			x:    fill(nil, func(j int) float32 { return float32(j)/2 - 4 }),
			want: "0038 00c4 0000ffff 00112233445566778899aabbccddeeff",
		},
		{
			// x_j = T[j mod 16]/64: m = −127/64 → d0 = 1/64, every x_j/d0 is a
			// level exactly, so q_j = j mod 16, and least squares keeps
			// d = 1/64 (fp16 0x2400).
			name: "iq4_nl/levels",
			t:    &iq4nlType,
			x:    fill(nil, func(j int) float32 { return float32(iq4nlLevels[j%16]) / 64 }),
			want: "0024 00112233445566778899aabbccddeeff",
		},
		{
			// [−127, 7, 6.9, 120, −115.5, 0...]: d0 = 1. 7 is midway between
			// levels 1 and 13 → the larger, index 9; 6.9 → 1 (index 8); 120 →
			// 113 (index 15, the end); −115.5 is midway between −127 and −104
			// → −104 (index 1); 0 → 1 (index 8). Weighted least squares
			// (w = x²): Σwqx = 615656512, Σwq² = 588314688 (float32) →
			// d = 1.0464748 → fp16 1.046875 = 0x3c30.
			name: "iq4_nl/nearest",
			t:    &iq4nlType,
			x:    fill([]float32{-127, 7, 6.9, 120, -115.5}, func(int) float32 { return 0 }),
			want: "303c 80 89 88 8f 81 88888888888888888888 88",
		},
		{
			name: "iq4_nl/zeros",
			t:    &iq4nlType,
			x:    make([]float32, 32),
			want: strings.Repeat("00", 18),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]byte, tt.t.bytes)
			quantizeRow(tt.t, got, tt.x)
			if want := unhex(t, tt.want); string(got) != string(want) {
				t.Errorf("quantize(%v)\n got %x\nwant %x", tt.x, got, want)
			}
		})
	}
}

// The exported row functions are the same quantizers, row-wise.
func TestBlockRowFunctions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 96)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, c := range []struct {
		t     *ggmlType
		quant func([]byte, []float32)
		deq   func([]float32, []byte)
	}{
		{&q80Type, QuantizeRowQ80, DequantizeRowQ80},
		{&q40Type, QuantizeRowQ40, DequantizeRowQ40},
		{&q41Type, QuantizeRowQ41, DequantizeRowQ41},
		{&q50Type, QuantizeRowQ50, DequantizeRowQ50},
		{&q51Type, QuantizeRowQ51, DequantizeRowQ51},
		{&iq4nlType, QuantizeRowIQ4NL, DequantizeRowIQ4NL},
	} {
		b := make([]byte, 3*c.t.bytes)
		c.quant(b, x)
		for k := 0; k < 3; k++ {
			want := make([]byte, c.t.bytes)
			c.t.quant(want, (*[32]float32)(x[32*k:]))
			if string(b[k*c.t.bytes:(k+1)*c.t.bytes]) != string(want) {
				t.Errorf("%s: block %d of the row differs from the block quantizer", c.t.name, k)
			}
		}
		y := make([]float32, 96)
		c.deq(y, b)
		if err := blockErr(c.t, x, y, b); err != "" {
			t.Errorf("%s: %s", c.t.name, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("QuantizeRowQ40 of 33 values did not panic")
		}
	}()
	QuantizeRowQ40(make([]byte, 36), make([]float32, 33))
}

// blockBound is the largest error the type allows for block x stored as
// blk: half a step (a whole step for the values q4_0/q5_0 clip, and 14 of
// 127 for iq4_nl's widest gap at its ends), plus the fp16 rounding of d and m
// times the largest code, plus float32 slack.
func blockBound(t *ggmlType, x []float32, blk []byte) float64 {
	var amax, lo, hi float64 = 0, math.Inf(1), math.Inf(-1)
	for _, v := range x {
		amax = math.Max(amax, math.Abs(float64(v)))
		lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
	}
	d16 := math.Abs(float64(f16At(blk)))
	slack := 1e-6*amax + 1e-30
	switch t.kind {
	case ggmlQ80:
		d := amax / 127
		return d/2 + 127*math.Abs(d16-d) + slack
	case ggmlQ40, ggmlQ50:
		half := 8.0
		if t.kind == ggmlQ50 {
			half = 16
		}
		d := amax / half
		return d + half*math.Abs(d16-d) + slack
	case ggmlQ41, ggmlQ51:
		levels := 15.0
		if t.kind == ggmlQ51 {
			levels = 31
		}
		d := (hi - lo) / levels
		m16 := float64(f16At(blk[2:]))
		return d/2 + levels*math.Abs(d16-d) + math.Abs(m16-lo) + slack
	default:
		d := amax / 127
		return 14*d + 127*math.Abs(d16-d) + slack
	}
}

// blockErr checks every block of x against its decoded y.
func blockErr(t *ggmlType, x, y []float32, b []byte) string {
	for k := 0; k < len(x)/32; k++ {
		xb, yb, blk := x[32*k:32*k+32], y[32*k:32*k+32], b[k*t.bytes:(k+1)*t.bytes]
		bound := blockBound(t, xb, blk)
		for j := range xb {
			if e := math.Abs(float64(xb[j]) - float64(yb[j])); !(e <= bound) {
				return fmt.Sprintf("block %d value %d: |%v − %v| = %g > %g", k, j, xb[j], yb[j], e, bound)
			}
		}
	}
	return ""
}

// TestBlockRoundTrip checks the error bound on random and adversarial
// blocks, and that finite input never decodes to Inf or NaN.
func TestBlockRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := map[string]func(j int) float32{
		"zeros":      func(int) float32 { return 0 },
		"constant":   func(int) float32 { return 3.25 },
		"negconst":   func(int) float32 { return -0.001 },
		"gauss":      func(int) float32 { return float32(rng.NormFloat64()) },
		"outlier":    func(j int) float32 { return outlier(j == 7, 1000, rng) },
		"negoutlier": func(j int) float32 { return outlier(j == 30, -5e4, rng) },
		"tiny":       func(int) float32 { return float32(rng.NormFloat64() * 1e-7) },
		"subnormal":  func(int) float32 { return float32(rng.NormFloat64() * 1e-40) },
		"fp16max":    func(j int) float32 { return float32(65504 * (2*float64(j%2) - 1)) },
		"mixedsign":  func(j int) float32 { return float32(j%5) - 2 },
		"wide":       func(int) float32 { return float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*3)) },
	}
	for _, tp := range ggmlTypes {
		for name, f := range cases {
			for trial := 0; trial < 20; trial++ {
				x := make([]float32, 64)
				for j := range x {
					x[j] = f(j % 32)
				}
				b := make([]byte, 2*tp.bytes)
				quantizeRow(tp, b, x)
				y := make([]float32, 64)
				dequantizeRow(tp, y, b)
				if err := blockErr(tp, x, y, b); err != "" {
					t.Fatalf("%s %s: %s", tp.name, name, err)
				}
			}
		}
	}
}

func outlier(at bool, v float32, rng *rand.Rand) float32 {
	if at {
		return v
	}
	return float32(rng.NormFloat64())
}

// Beyond the fp16 range ggml's scales overflow to Inf; kvq saturates them,
// so decoding stays finite and codes clamp.
func TestBlockSaturation(t *testing.T) {
	for _, tp := range ggmlTypes {
		for _, big := range []float32{1e7, 3e38, -3e38} {
			x := fill([]float32{big, -big / 2, 1}, func(j int) float32 { return float32(j) })
			b := make([]byte, tp.bytes)
			quantizeRow(tp, b, x)
			y := make([]float32, 32)
			dequantizeRow(tp, y, b)
			for j, v := range y {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s(%g): value %d decodes to %v", tp.name, big, j, v)
				}
			}
			if d := f16At(b); math.Abs(float64(d)) != 65504 {
				t.Errorf("%s(%g): d = %v, want ±65504 (saturated)", tp.name, big, d)
			}
		}
	}
}

// The kernels' decoders (simd's block decoders, U8ToF32Groups) give the
// reference dequantization exactly (q5_0 may give +0 where the reference,
// like ggml, gives −0·d = −0).
func TestBlockDecodeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tp := range ggmlTypes {
		c := &blockCodec{t: tp, dim: 64, nb: 2, rowBytes: 2 * tp.bytes}
		const rows = 70 // more blocks than one U8ToF32Groups chunk
		x := make([]float32, 64*rows)
		for i := range x {
			x[i] = float32(rng.NormFloat64()*math.Exp(rng.NormFloat64())) + 0.5
		}
		tile := make([]byte, rows*c.rowBytes)
		c.Encode(tile, 0, x, rows)
		want := make([]float32, len(x))
		dequantizeRow(tp, want, tile)
		got := make([]float32, len(x))
		c.Decode(got, tile, 0, rows)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: Decode value %d = %v, reference %v", tp.name, i, got[i], want[i])
			}
		}
	}
}

// TestHadamard: the block rotation is orthonormal, its own inverse, and the
// Sylvester matrix H_{2n} = [[H, H], [H, −H]] over √n.
func TestHadamard(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, m := range []int{8, 16, 32, 64, 128, 256, 512} {
		// Explicit matrix, row by row: H[i][j] = (−1)^popcount(i&j)/√m.
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := append([]float32(nil), x...)
		hadamardRotate(y, m)
		var nx, ny float64
		for i := 0; i < m; i++ {
			var s float64
			for j := 0; j < m; j++ {
				sign := 1.0
				if popcount(i&j)%2 == 1 {
					sign = -1
				}
				s += sign * float64(x[j])
			}
			s /= math.Sqrt(float64(m))
			if math.Abs(s-float64(y[i])) > 1e-5*math.Sqrt(float64(m)) {
				t.Fatalf("m=%d: (Hx)[%d] = %v, explicit %v", m, i, y[i], s)
			}
			nx += float64(x[i]) * float64(x[i])
			ny += float64(y[i]) * float64(y[i])
		}
		if math.Abs(nx-ny) > 1e-5*nx {
			t.Errorf("m=%d: |x|² = %v, |Hx|² = %v", m, nx, ny)
		}
		hadamardRotate(y, m) // H·H = I
		for i := range x {
			if math.Abs(float64(x[i]-y[i])) > 1e-5 {
				t.Fatalf("m=%d: H·H·x differs from x at %d: %v vs %v", m, i, y[i], x[i])
			}
		}
	}
}

func popcount(v int) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

func TestHadamardBlock(t *testing.T) {
	tests := []struct {
		dim     int
		key     bool
		want    int
		wantErr bool
	}{
		{32, true, 32, false}, {32, false, 32, false},
		{64, true, 64, false}, {64, false, 64, false},
		{128, true, 128, false}, {128, false, 64, false},
		{192, true, 64, false}, {192, false, 64, false},
		{256, true, 256, false}, {320, true, 64, false},
		{576, true, 64, false}, {512, false, 64, false},
		{96, true, 0, true}, {48, false, 0, true}, {16, true, 0, true}, {0, true, 0, true},
	}
	for _, tt := range tests {
		got, err := hadamardBlock("q4_0:rot", tt.dim, tt.key)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("hadamardBlock(%d, key=%v) = %d, %v; want %d, error %v", tt.dim, tt.key, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrDim) {
			t.Errorf("hadamardBlock(%d) error %v does not wrap ErrDim", tt.dim, err)
		}
	}
}

// With an exact (fp32) inner codec, the rotation leaves attention unchanged
// up to float32 rounding: q·k = Hq·Hk, and Σ w·v = H·Σ w·Hv.
func TestRotationPreservesAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, dim := range []int{32, 64, 128, 256} {
		for _, key := range []bool{true, false} {
			plain := f32Codec{dim: dim}
			c, err := newRotCodec("fp32:rot", f32Codec{dim: dim}, CodecParams{Dim: dim, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			const rows, nq = 37, 3
			x := make([]float32, rows*dim)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			tp, tr := make([]byte, plain.TileBytes(rows)), make([]byte, c.TileBytes(rows))
			plain.Encode(tp, 0, x, rows)
			c.Encode(tr, 0, x, rows)
			dec := make([]float32, rows*dim)
			c.Decode(dec, tr, 0, rows)
			for i := range x {
				if math.Abs(float64(dec[i]-x[i])) > 1e-5 {
					t.Fatalf("dim %d: Decode(Encode(x))[%d] = %v, want %v", dim, i, dec[i], x[i])
				}
			}
			q := x[:nq*dim]
			s1, s2 := make([]float32, nq*rows), make([]float32, nq*rows)
			plain.Scores(s1, rows, q, nq, tp, 0, rows)
			c.Scores(s2, rows, q, nq, tr, 0, rows)
			for i := range s1 {
				if math.Abs(float64(s1[i]-s2[i])) > 1e-4*math.Sqrt(float64(dim)) {
					t.Fatalf("dim %d: rotated score %d = %v, plain %v", dim, i, s2[i], s1[i])
				}
			}
			a1, a2 := make([]float32, nq*dim), make([]float32, nq*dim)
			plain.Accumulate(a1, s1, rows, nq, tp, 0, rows)
			c.Accumulate(a2, s1, rows, nq, tr, 0, rows)
			for i := range a1 {
				if math.Abs(float64(a1[i]-a2[i])) > 1e-3 {
					t.Fatalf("dim %d: rotated accumulate %d = %v, plain %v", dim, i, a2[i], a1[i])
				}
			}
		}
	}
}

// Rotated block formats round-trip within the bound of the rotated rows:
// ‖x − x̂‖₂ = ‖Hx − Q(Hx)‖₂.
func TestRotatedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, tp := range ggmlTypes {
		f := &blockFormat{t: tp, rot: true}
		for _, dim := range []int{32, 64, 128} {
			for _, key := range []bool{true, false} {
				c, err := f.NewCodec(CodecParams{Dim: dim, Key: key})
				if err != nil {
					t.Fatal(err)
				}
				m, _ := hadamardBlock("", dim, key)
				x := make([]float32, dim)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					if i == 5 {
						x[i] = 40 // an outlier channel, what the rotation spreads
					}
				}
				tile := make([]byte, c.TileBytes(1))
				c.Encode(tile, 0, x, 1)
				y := make([]float32, dim)
				c.Decode(y, tile, 0, 1)
				hx := append([]float32(nil), x...)
				hadamardRotate(hx, m)
				inner := make([]byte, dim/32*tp.bytes)
				quantizeRow(tp, inner, hx)
				var bound2, err2 float64
				for k := 0; k < dim/32; k++ {
					b := blockBound(tp, hx[32*k:32*k+32], inner[k*tp.bytes:])
					bound2 += 32 * b * b
				}
				for i := range x {
					err2 += float64(x[i]-y[i]) * float64(x[i]-y[i])
				}
				if err2 > bound2*1.0001 {
					t.Errorf("%s:rot dim %d key %v: ‖x − x̂‖² = %g > %g", tp.name, dim, key, err2, bound2)
				}
			}
		}
	}
}

func TestBlockNewCodec(t *testing.T) {
	r := Formats()
	tests := []struct {
		name    string
		dim     int
		wantErr error
	}{
		{"q4_0", 128, nil}, {"q4_0", 32, nil}, {"q8_0:rot", 192, nil},
		{"q4_0", 80, ErrDim}, {"q5_1", 16, ErrDim}, {"iq4_nl", 0, ErrDim},
		{"q4_0:rot", 96, ErrDim}, {"q8_0:rot", 160, ErrDim},
	}
	for _, tt := range tests {
		_, err := r.MustLookup(tt.name).NewCodec(CodecParams{Dim: tt.dim})
		if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("%s.NewCodec(dim %d) = %v, want %v", tt.name, tt.dim, err, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), tt.name) || !strings.Contains(err.Error(), strconv.Itoa(tt.dim))) {
			t.Errorf("%s.NewCodec(dim %d) error %q should name the format and the head size", tt.name, tt.dim, err)
		}
	}
}

func TestBlockLookup(t *testing.T) {
	r := Formats()
	for _, name := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q8_0:rot", "Q4_0:ROT", "iq4_nl:rot"} {
		f, err := r.Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		if want := strings.ToLower(name); f.Name() != want {
			t.Errorf("Lookup(%q).Name() = %q, want %q", name, f.Name(), want)
		}
		g, err := r.Lookup(f.Name())
		if err != nil || g.Name() != f.Name() {
			t.Errorf("Lookup(%q) does not round-trip: %v, %v", f.Name(), g, err)
		}
		if s, needs := f.(Describer).Describe(); s == "" || len(needs) == 0 {
			t.Errorf("%s: empty description", name)
		}
	}
	for _, name := range []string{"q4_0:rot:rot", "q4_0:g32", "q8_0:"} {
		_, err := r.Lookup(name)
		if !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), "valid: rot") {
			t.Errorf("Lookup(%q) = %v, want an ErrOption listing the valid options", name, err)
		}
	}
	if Q40.Name() != "q4_0" || IQ4NL.Name() != "iq4_nl" || Q51.Name() != "q5_1" {
		t.Error("exported format values have the wrong names")
	}
}

// Tiles may start at any byte offset; kernels must not care.
func TestKernelsUnalignedTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	r := Formats()
	for _, name := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q4_0:rot", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3:rot"} {
		f := r.MustLookup(name)
		for _, key := range []bool{true, false} {
			const dim, rows, nq = 64, 45, 3
			c, err := f.NewCodec(CodecParams{Dim: dim, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, rows*dim)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			q := x[:nq*dim]
			w := make([]float32, nq*rows)
			for i := range w {
				w[i] = float32(rng.Float64())
			}
			var ref []float32
			for _, off := range []int{0, 1, 3, 7} {
				buf := make([]byte, off+c.TileBytes(rows)+5)
				tile := buf[off : off+c.TileBytes(rows)]
				c.Encode(tile, 0, x, rows)
				out := make([]float32, nq*rows+nq*dim+rows*dim)
				c.Scores(out[:nq*rows], rows, q, nq, tile, 0, rows)
				c.Accumulate(out[nq*rows:nq*rows+nq*dim], w, rows, nq, tile, 0, rows)
				c.Decode(out[nq*rows+nq*dim:], tile, 0, rows)
				if ref == nil {
					ref = out
					continue
				}
				for i := range out {
					if out[i] != ref[i] {
						t.Fatalf("%s key=%v: tile at offset %d gives %v at %d, offset 0 gives %v", name, key, off, out[i], i, ref[i])
					}
				}
			}
		}
	}
}
