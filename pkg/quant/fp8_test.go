package quant

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// ocpValue is the value of an fp8 code straight from the OCP bit layout,
// computed independently of the package's tables.
func ocpValue(k FP8Kind, b uint8) float64 {
	mbits, ebits, bias := 3, 4, 7
	if k == E5M2 {
		mbits, ebits, bias = 2, 5, 15
	}
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b>>mbits) & (1<<ebits - 1)
	m := int(b) & (1<<mbits - 1)
	switch {
	case k == E4M3 && e == 15 && m == 7:
		return math.NaN()
	case k == E5M2 && e == 31 && m == 0:
		return math.Inf(int(sign))
	case k == E5M2 && e == 31:
		return math.NaN()
	case e == 0: // subnormal: m/2^mbits · 2^(1−bias)
		return sign * math.Ldexp(float64(m), 1-bias-mbits)
	}
	return sign * math.Ldexp(float64(1<<mbits+m), e-bias-mbits)
}

func TestFP8DecodeAllCodes(t *testing.T) {
	for _, k := range []FP8Kind{E4M3, E5M2} {
		for i := 0; i < 256; i++ {
			b := uint8(i)
			want := ocpValue(k, b)
			got := float64(k.Decode(b))
			if math.IsNaN(want) {
				if !math.IsNaN(got) {
					t.Errorf("%s.Decode(%#02x) = %v, want NaN", k, b, got)
				}
				continue
			}
			if got != want || math.Signbit(got) != math.Signbit(want) {
				t.Errorf("%s.Decode(%#02x) = %v, want %v", k, b, got, want)
			}
		}
	}
	// Spot checks from docs/quant-schemes.md §1.1.
	for _, c := range []struct {
		k    FP8Kind
		b    uint8
		want float64
	}{
		{E4M3, 0x7e, 448}, {E4M3, 0x08, 1.0 / 64}, {E4M3, 0x01, 1.0 / 512}, {E4M3, 0x38, 1},
		{E5M2, 0x7b, 57344}, {E5M2, 0x04, 1.0 / 16384}, {E5M2, 0x01, 1.0 / 65536}, {E5M2, 0x3c, 1},
		{E5M2, 0x7c, math.Inf(1)}, {E5M2, 0xfc, math.Inf(-1)},
	} {
		if got := float64(c.k.Decode(c.b)); got != c.want {
			t.Errorf("%s.Decode(%#02x) = %v, want %v", c.k, c.b, got, c.want)
		}
	}
	if DecodeE4M3(0x38) != 1 || DecodeE5M2(0x3c) != 1 {
		t.Error("DecodeE4M3/DecodeE5M2 disagree with Decode")
	}
}

// TestFP8EncodeBoundaries: codes worked out by hand from the bit layouts.
// E4M3: 1.0 = 0.0111.000 (0x38), 448 = 0.1111.110 (0x7e), the smallest
// normal 2^-6 = 0.0001.000 (0x08), the smallest subnormal 2^-9 = 0x01.
// E5M2: 1.0 = 0.01111.00 (0x3c), 57344 = 0.11110.11 (0x7b), +Inf = 0x7c.
func TestFP8EncodeBoundaries(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name        string
		k           FP8Kind
		x           float32
		sat, nonsat uint8
	}{
		{"zero", E4M3, 0, 0x00, 0x00},
		{"negzero", E4M3, float32(math.Copysign(0, -1)), 0x80, 0x80},
		{"one", E4M3, 1, 0x38, 0x38},
		{"half", E4M3, 0.5, 0x30, 0x30},
		{"-1.5", E4M3, -1.5, 0xbc, 0xbc},
		{"tie 1+1/16 to even 1.0", E4M3, 1.0625, 0x38, 0x38},
		{"tie 1+3/16 to even 1.25", E4M3, 1.1875, 0x3a, 0x3a},
		{"max", E4M3, 448, 0x7e, 0x7e},
		{"464 ties down to 448", E4M3, 464, 0x7e, 0x7e},
		{"465 rounds past max", E4M3, 465, 0x7e, 0x7f},
		{"480", E4M3, 480, 0x7e, 0x7f},
		{"-1e6", E4M3, -1e6, 0xfe, 0xff},
		{"+inf", E4M3, inf, 0x7e, 0x7f},
		{"-inf", E4M3, -inf, 0xfe, 0xff},
		{"nan", E4M3, nan, 0x7f, 0x7f},
		{"-nan", E4M3, -nan, 0xff, 0xff},
		{"min normal", E4M3, 0x1p-6, 0x08, 0x08},
		{"min subnormal", E4M3, 0x1p-9, 0x01, 0x01},
		{"half min subnormal ties to 0", E4M3, 0x1p-10, 0x00, 0x00},
		{"just above half min subnormal", E4M3, 0x1.000002p-10, 0x01, 0x01},
		{"-half min subnormal", E4M3, -0x1p-10, 0x80, 0x80},
		{"1.5 subnormal units tie to 2", E4M3, 3 * 0x1p-10, 0x02, 0x02},
		{"7.5 subnormal units tie to min normal", E4M3, 15 * 0x1p-10, 0x08, 0x08},
		{"largest subnormal", E4M3, 7 * 0x1p-9, 0x07, 0x07},
		{"tiny", E4M3, 1e-30, 0x00, 0x00},
		{"f32 subnormal", E4M3, -1e-40, 0x80, 0x80},

		{"one", E5M2, 1, 0x3c, 0x3c},
		{"tie 1+1/8 to even 1.0", E5M2, 1.125, 0x3c, 0x3c},
		{"tie 1+3/8 to even 1.5", E5M2, 1.375, 0x3e, 0x3e},
		{"max", E5M2, 57344, 0x7b, 0x7b},
		{"61439", E5M2, 61439, 0x7b, 0x7b},
		{"61440 ties up to Inf", E5M2, 61440, 0x7b, 0x7c},
		{"fp16 max", E5M2, 65504, 0x7b, 0x7c},
		{"-1e6", E5M2, -1e6, 0xfb, 0xfc},
		{"+inf", E5M2, inf, 0x7b, 0x7c},
		{"-inf", E5M2, -inf, 0xfb, 0xfc},
		{"nan", E5M2, nan, 0x7f, 0x7f},
		{"-nan", E5M2, -nan, 0xff, 0xff},
		{"min normal", E5M2, 0x1p-14, 0x04, 0x04},
		{"min subnormal", E5M2, 0x1p-16, 0x01, 0x01},
		{"half min subnormal ties to 0", E5M2, 0x1p-17, 0x00, 0x00},
		{"1.5 subnormal units tie to 2", E5M2, 3 * 0x1p-17, 0x02, 0x02},
		{"negzero", E5M2, float32(math.Copysign(0, -1)), 0x80, 0x80},
	}
	for _, tt := range tests {
		if got := tt.k.Encode(tt.x, true); got != tt.sat {
			t.Errorf("%s %s: Encode(%v, sat) = %#02x, want %#02x", tt.k, tt.name, tt.x, got, tt.sat)
		}
		if got := tt.k.Encode(tt.x, false); got != tt.nonsat {
			t.Errorf("%s %s: Encode(%v, nonsat) = %#02x, want %#02x", tt.k, tt.name, tt.x, got, tt.nonsat)
		}
	}
	if EncodeE4M3(448, true) != 0x7e || EncodeE5M2(1, false) != 0x3c {
		t.Error("EncodeE4M3/EncodeE5M2 disagree with Encode")
	}
}

func TestFP8RoundTripCodes(t *testing.T) {
	for _, k := range []FP8Kind{E4M3, E5M2} {
		for i := 0; i < 256; i++ {
			b := uint8(i)
			v := k.Decode(b)
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				continue
			}
			for _, sat := range []bool{true, false} {
				if got := k.Encode(v, sat); got != b {
					t.Errorf("%s: Encode(Decode(%#02x) = %v, sat=%v) = %#02x", k, b, v, sat, got)
				}
			}
		}
	}
}

// fp8Nearest is a slow reference encoder: the nearest code by exhaustive
// search over the finite codes, ties to the even code, with the rounding
// boundary past the largest finite value at the next would-be code (480,
// 65536).
type fp8Ref struct {
	vals  []float64 // positive finite values, ascending
	codes []uint8
}

func newFP8Ref(k FP8Kind) *fp8Ref {
	r := &fp8Ref{}
	for i := 0; i < 128; i++ {
		v := ocpValue(k, uint8(i))
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			r.vals = append(r.vals, v)
			r.codes = append(r.codes, uint8(i))
		}
	}
	next := 480.0
	if k == E5M2 {
		next = 65536
	}
	r.vals = append(r.vals, next) // the overflow "code"
	r.codes = append(r.codes, r.codes[len(r.codes)-1]+1)
	return r
}

func (r *fp8Ref) encode(x float32, k FP8Kind, sat bool) uint8 {
	if math.IsNaN(float64(x)) {
		return 0x7f | signByte(x)
	}
	a := math.Abs(float64(x))
	i := sort.SearchFloat64s(r.vals, a) // first value ≥ a
	var code uint8
	switch {
	case i == len(r.vals):
		code = r.codes[len(r.codes)-1] // beyond the overflow boundary
	case i == 0 || r.vals[i] == a:
		code = r.codes[i]
	default:
		lo, hi := a-r.vals[i-1], r.vals[i]-a
		switch {
		case lo < hi:
			code = r.codes[i-1]
		case hi < lo:
			code = r.codes[i]
		case r.codes[i-1]%2 == 0:
			code = r.codes[i-1]
		default:
			code = r.codes[i]
		}
	}
	if last := r.codes[len(r.codes)-1]; code == last { // overflow
		switch {
		case sat:
			code = last - 1
		case k == E4M3:
			code = 0x7f
		default:
			code = 0x7c
		}
	}
	return code | signByte(x)
}

func signByte(x float32) uint8 {
	if math.Signbit(float64(x)) {
		return 0x80
	}
	return 0
}

// TestFP8EncodeMatchesNearest compares the encoder with the slow reference
// on a million random float32s spread over every exponent.
func TestFP8EncodeMatchesNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	refs := map[FP8Kind]*fp8Ref{E4M3: newFP8Ref(E4M3), E5M2: newFP8Ref(E5M2)}
	n := 1 << 20
	if testing.Short() {
		n = 1 << 16
	}
	for i := 0; i < n; i++ {
		var x float32
		switch i % 4 {
		case 0: // any bit pattern
			x = math.Float32frombits(rng.Uint32())
		case 1: // the fp8 ranges, with random low bits
			x = float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(40)-22))
		case 2: // near codes: a code's value nudged by a few float32 ulps
			v := float32(ocpValue(E4M3, uint8(rng.IntN(126))))
			if i%8 == 2 {
				v = float32(ocpValue(E5M2, uint8(rng.IntN(123))))
			}
			x = math.Float32frombits(math.Float32bits(v) + uint32(rng.IntN(5)) - 2)
		default: // midpoints between neighbouring codes
			k := E4M3
			if i%8 == 3 {
				k = E5M2
			}
			j := rng.IntN(len(refs[k].vals) - 1)
			x = float32((refs[k].vals[j] + refs[k].vals[j+1]) / 2)
		}
		if rng.IntN(2) == 0 {
			x = -x
		}
		for _, k := range []FP8Kind{E4M3, E5M2} {
			for _, sat := range []bool{true, false} {
				if got, want := k.Encode(x, sat), refs[k].encode(x, k, sat); got != want {
					t.Fatalf("%s.Encode(%v (%#08x), sat=%v) = %#02x, reference %#02x", k, x, math.Float32bits(x), sat, got, want)
				}
			}
		}
	}
}
