package simd

import (
	"math"
	"testing"
)

func isNaN16(h uint16) bool   { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
func isNaNBF(h uint16) bool   { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }
func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// TestF16RoundTripExhaustive widens all 65536 halves and narrows them back,
// through the scalar helpers and the slice kernels: every non-NaN half must
// come back unchanged, and every NaN as a NaN (the quiet bit set).
func TestF16RoundTripExhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	wide := make([]float32, len(src))
	back := make([]uint16, len(src))
	F16ToF32(wide, src)
	F32ToF16(back, wide)
	for i, h := range src {
		s := F32ToF16Scalar(F16ToF32Scalar(h))
		switch {
		case isNaN16(h):
			if !isNaN16(s) || !isNaN16(back[i]) || !math.IsNaN(float64(wide[i])) {
				t.Errorf("round trip of NaN %#04x = scalar %#04x, slice %#04x, want NaN", h, s, back[i])
			}
			if s != h|0x200 {
				t.Errorf("round trip of NaN %#04x = %#04x, want quiet NaN %#04x with sign and payload kept", h, s, h|0x200)
			}
		case s != h || back[i] != h:
			t.Errorf("round trip of %#04x = scalar %#04x, slice %#04x, want it unchanged", h, s, back[i])
		}
	}
}

func TestBF16RoundTripExhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	wide := make([]float32, len(src))
	back := make([]uint16, len(src))
	BF16ToF32(wide, src)
	F32ToBF16(back, wide)
	for i, h := range src {
		s := F32ToBF16Scalar(BF16ToF32Scalar(h))
		switch {
		case isNaNBF(h):
			if !isNaNBF(s) || !isNaNBF(back[i]) || !math.IsNaN(float64(wide[i])) {
				t.Errorf("round trip of NaN %#04x = scalar %#04x, slice %#04x, want NaN", h, s, back[i])
			}
		case s != h || back[i] != h:
			t.Errorf("round trip of %#04x = scalar %#04x, slice %#04x, want it unchanged", h, s, back[i])
		}
	}
}

func TestF32ToF16Cases(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"tie down to even", f32(0x3f80_1000), 0x3c00},   // 1 + 2^-11
		{"tie up to even", f32(0x3f80_3000), 0x3c02},     // 1 + 3*2^-11
		{"just above tie", f32(0x3f80_1001), 0x3c01},     // rounds up
		{"negative tie", f32(0xbf80_1000), 0xbc00},       // -(1 + 2^-11)
		{"max half", 65504, 0x7bff},                      //
		{"below overflow tie", f32(0x477f_efff), 0x7bff}, // 65519.996
		{"overflow tie to Inf", 65520, 0x7c00},           // tie between 65504 and 65536
		{"overflow", 1e10, 0x7c00},                       //
		{"negative overflow", -70000, 0xfc00},            //
		{"Inf", float32(math.Inf(1)), 0x7c00},            //
		{"-Inf", float32(math.Inf(-1)), 0xfc00},          //
		{"smallest normal", 0x1p-14, 0x0400},             //
		{"smallest subnormal", 0x1p-24, 0x0001},          //
		{"half smallest subnormal ties to 0", 0x1p-25, 0x0000},
		{"just above half smallest subnormal", f32(0x3300_0001), 0x0001},
		{"1.5 smallest subnormal ties to 2", 0x3p-25, 0x0002},
		{"2.5 smallest subnormal ties to 2", 0x5p-25, 0x0002},
		{"largest subnormal", 0x3ffp-24, 0x03ff},
		{"subnormal tie into normal", 0x7ffp-25, 0x0400},     // 1023.5 * 2^-24
		{"float32 subnormal", f32(0x0000_0001), 0x0000},      //
		{"negative tiny", -0x1p-30, 0x8000},                  //
		{"quiet NaN", f32(0x7fc0_0000), 0x7e00},              //
		{"signalling NaN quieted", f32(0x7f80_2000), 0x7e01}, // payload bit 13 kept
		{"NaN low payload only", f32(0x7f80_0001), 0x7e00},   // must not become Inf
		{"negative NaN", f32(0xffc0_0000), 0xfe00},           //
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := F32ToF16Scalar(tt.in); got != tt.want {
				t.Errorf("F32ToF16Scalar(%#08x) = %#04x, want %#04x", math.Float32bits(tt.in), got, tt.want)
			}
			// Through the slice kernel too, at every lane position.
			src := make([]float32, 19)
			dst := make([]uint16, 19)
			for i := range src {
				src[i] = tt.in
			}
			F32ToF16(dst, src)
			for i, got := range dst {
				if got != tt.want {
					t.Errorf("F32ToF16: lane %d = %#04x, want %#04x", i, got, tt.want)
					break
				}
			}
		})
	}
}

func TestF32ToBF16Cases(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"one", 1, 0x3f80},
		{"tie down to even", f32(0x3f80_8000), 0x3f80}, // 1 + 2^-8
		{"tie up to even", f32(0x3f81_8000), 0x3f82},   // 1 + 3*2^-8
		{"just above tie", f32(0x3f80_8001), 0x3f81},   //
		{"max float to Inf", math.MaxFloat32, 0x7f80},  //
		{"largest bf16", f32(0x7f7f_0000), 0x7f7f},     //
		{"-Inf", float32(math.Inf(-1)), 0xff80},        //
		{"subnormal tie", f32(0x0000_8000), 0x0000},    //
		{"subnormal up", f32(0x0001_8000), 0x0002},     //
		{"quiet NaN", f32(0x7fc0_0000), 0x7fc0},        //
		{"NaN low payload only", f32(0x7f80_0001), 0x7fc0},
		{"NaN that would carry", f32(0x7fff_ffff), 0x7fff},
		{"negative NaN", f32(0xff80_0001), 0xffc0}, //
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := F32ToBF16Scalar(tt.in); got != tt.want {
				t.Errorf("F32ToBF16Scalar(%#08x) = %#04x, want %#04x", math.Float32bits(tt.in), got, tt.want)
			}
			src := make([]float32, 19)
			dst := make([]uint16, 19)
			for i := range src {
				src[i] = tt.in
			}
			F32ToBF16(dst, src)
			for i, got := range dst {
				if got != tt.want {
					t.Errorf("F32ToBF16: lane %d = %#04x, want %#04x", i, got, tt.want)
					break
				}
			}
		})
	}
}

// refF32ToF16 is a slow, independent rounding in float64 (exact for every
// float32): scale |f| so that the binary16 unit in the last place is 1, round
// to an even integer, and re-encode.
func refF32ToF16(f float32) uint16 {
	v := float64(f)
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	switch {
	case math.IsNaN(v):
		return sign | 0x7e00 | uint16(math.Float32bits(f)>>13&0x3ff)
	case v >= 65520: // ties to even at the top round up to 2^16
		return sign | 0x7c00
	case v < 0x1p-14: // subnormal range: unit 2^-24
		return sign | uint16(math.RoundToEven(v*0x1p24))
	}
	_, e := math.Frexp(v) // v = m * 2^e, 0.5 <= m < 1
	e--                   // now 1 <= v/2^e < 2
	m := math.RoundToEven(math.Ldexp(v, 10-e))
	if m == 2048 {
		m, e = 1024, e+1
	}
	if e+15 >= 31 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}

// refF32ToBF16 rounds in float64 to 8 significant bits, with the float32
// exponent range (bfloat16 subnormals share float32's: unit 2^-133).
func refF32ToBF16(f float32) uint16 {
	v := float64(f)
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	switch {
	case math.IsNaN(v):
		return uint16(math.Float32bits(f)>>16) | 0x40
	case math.IsInf(v, 0):
		return sign | 0x7f80
	case v < 0x1p-126:
		return sign | uint16(math.RoundToEven(v*0x1p133))
	}
	_, e := math.Frexp(v)
	e--
	m := math.RoundToEven(math.Ldexp(v, 7-e))
	if m == 256 {
		m, e = 128, e+1
	}
	if e+127 >= 255 {
		return sign | 0x7f80
	}
	return sign | uint16(e+127)<<7 | uint16(m-128)
}

// TestF32ToHalfReference compares the scalar and slice narrowing with the
// float64 references on a few million float32 bit patterns: uniformly random
// ones and ones concentrated near the binary16 range, where rounding is
// interesting.
func TestF32ToHalfReference(t *testing.T) {
	r := newRand(t)
	const n = 1 << 22
	src := make([]float32, n)
	for i := range src {
		b := r.Uint32()
		if i%2 == 1 {
			// exponents 100..150 (2^-27 .. 2^23), random sign and mantissa
			b = b&0x807f_ffff | uint32(100+r.IntN(51))<<23
		}
		src[i] = math.Float32frombits(b)
	}
	half := make([]uint16, n)
	bf := make([]uint16, n)
	F32ToF16(half, src)
	F32ToBF16(bf, src)
	bad := 0
	for i, f := range src {
		if want := refF32ToF16(f); half[i] != want || F32ToF16Scalar(f) != want {
			t.Errorf("F32ToF16(%#08x) = slice %#04x, scalar %#04x, want %#04x", math.Float32bits(f), half[i], F32ToF16Scalar(f), want)
			bad++
		}
		if want := refF32ToBF16(f); bf[i] != want || F32ToBF16Scalar(f) != want {
			t.Errorf("F32ToBF16(%#08x) = slice %#04x, scalar %#04x, want %#04x", math.Float32bits(f), bf[i], F32ToBF16Scalar(f), want)
			bad++
		}
		if bad > 10 {
			t.Fatal("too many errors")
		}
	}
}
