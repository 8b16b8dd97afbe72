package simd

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The definitions below are written from the format specifications (OCP
// 8-bit floating point, GGML's block layouts), independently of the twins
// in generic.go; TestUnpack and the tests in this file check the twins
// against them. Values are computed in float64, where every product and
// sum here is exact or, for float32 sums, rounded innocuously (53 >= 2*24+2
// bits), then rounded to float32 once.

// fp8Def returns the value of the OCP 8-bit float code c with ebits
// exponent bits of bias bias and 7-ebits mantissa bits. E5M2 (ebits 5) is
// IEEE-like: the top exponent is ±Inf with mantissa 0 and NaN otherwise.
// E4M3FN (ebits 4) has no infinities; S.1111.111 is its only NaN.
func fp8Def(c byte, ebits, bias int) float32 {
	mbits := 7 - ebits
	e := int(c>>mbits) & (1<<ebits - 1)
	m := int(c) & (1<<mbits - 1)
	var v float64
	switch {
	case ebits == 5 && e == 31 && m == 0:
		v = math.Inf(1)
	case ebits == 5 && e == 31, ebits == 4 && e == 15 && m == 7:
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(float64(m), 1-bias-mbits)
	default:
		v = math.Ldexp(float64(1<<mbits+m), e-bias-mbits)
	}
	if c&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// halfDef returns the value of the IEEE binary16 with bits h.
func halfDef(h uint16) float64 {
	e, m := int(h>>10&31), int(h&1023)
	var v float64
	switch {
	case e == 31 && m == 0:
		v = math.Inf(1)
	case e == 31:
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(float64(m), -24)
	default:
		v = math.Ldexp(float64(1024+m), e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// q5Code returns the 5-bit code of value j (< 32) of a GGML Q5 block: its
// nibble in qs (low nibbles for j < 16, high ones for the rest) with bit j
// of the little-endian uint32 qh on top.
func q5Code(qh, qs []byte, j int) int {
	return q4Code(qs, j) | int(binary.LittleEndian.Uint32(qh)>>j&1)<<4
}

// iq4nlTable is GGML's kvalues_iq4nl (ggml-common.h).
var iq4nlTable = [16]int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// blockDef returns value i of the GGML blocks in src of the kind named by
// the decoder name, from the definitions.
func blockDef(name string, src []byte, i int) float32 {
	j := i % 32
	switch name {
	case "Q50ToF32":
		blk := src[i/32*q50BlockBytes:]
		d := halfDef(binary.LittleEndian.Uint16(blk))
		return float32(d * float64(q5Code(blk[2:6], blk[6:], j)-16))
	case "Q51ToF32":
		blk := src[i/32*q51BlockBytes:]
		d := halfDef(binary.LittleEndian.Uint16(blk))
		m := halfDef(binary.LittleEndian.Uint16(blk[2:]))
		p := float32(d * float64(q5Code(blk[4:8], blk[8:], j)))
		return float32(float64(p) + m)
	case "IQ4NLToF32":
		blk := src[i/32*iq4nlBlockBytes:]
		d := halfDef(binary.LittleEndian.Uint16(blk))
		return float32(d * float64(iq4nlTable[q4Code(blk[2:], j)]))
	}
	panic("blockDef: " + name)
}

// sameValue reports whether got is want: the same bits, or NaNs of the same
// sign.
func sameValue(got, want float32) bool {
	if got != got || want != want {
		return got != got && want != want && math.Signbit(float64(got)) == math.Signbit(float64(want))
	}
	return math.Float32bits(got) == math.Float32bits(want)
}

// fp8Scales are the scales TestFP8Codes tries: ordinary ones, float32
// subnormals (products underflow), huge ones (products overflow; from
// 2^120, 256*scale overflows and E4M3ToF32 takes the generic path), zeros,
// infinities and NaNs.
var fp8Scales = []float32{
	1, -1, 0.5, 1.0 / 3, -0.1, 1e-3, 0x1p-126, -1e-40, 1e-45, 1e30, 0x1p119,
	0x1p120, -3e38, math.MaxFloat32, 0, float32(math.Copysign(0, -1)),
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.Float32frombits(0xff80_0001), // a negative signalling NaN
}

// fp8Kinds are the 8-bit float decoders, with their exponent widths and
// biases.
var fp8Kinds = []struct {
	name        string
	ebits, bias int
	run, twin   func(dst []float32, src []byte, scale float32)
}{
	{"E5M2ToF32", 5, 15, E5M2ToF32, e5m2ToF32Generic},
	{"E4M3ToF32", 4, 7, E4M3ToF32, e4m3ToF32Generic},
}

// TestFP8Codes runs every code through the 8-bit float decoders, for each
// scale of fp8Scales, at misaligned offsets and with tails of 0 to 7
// values, and checks them bit for bit against the twins (NaN payloads
// included) and the twins against fp8Def(code)*scale rounded once: the same
// bits; for a NaN code, a NaN with the code's sign whatever scale is; for
// other NaN products (a NaN scale, 0*Inf), any NaN.
func TestFP8Codes(t *testing.T) { forEachSet(t, testFP8Codes) }

func testFP8Codes(t *testing.T) {
	for _, k := range fp8Kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, scale := range fp8Scales {
				for _, off := range offsets {
					// Every code once, starting at code off; n-off values
					// leave tails of 0 to 7.
					codes := make([]byte, 256)
					for i := range codes {
						codes[i] = byte(i + off)
					}
					n := 256 - off
					src := offsetCopy(codes[:n], (off+1)%8)
					dst, check := guardedF32(off, n, 16)
					k.run(dst, src, scale)
					check(t)
					twin := make([]float32, n)
					k.twin(twin, src, scale)
					for i, c := range src {
						call := fmt.Sprintf("%s(code %#02x, scale %v)", k.name, c, scale)
						if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
							t.Fatalf("%s = %v (%#08x), generic %v (%#08x)", call, dst[i], math.Float32bits(dst[i]), twin[i], math.Float32bits(twin[i]))
						}
						v := fp8Def(c, k.ebits, k.bias)
						want := float32(float64(v) * float64(scale))
						var ok bool
						switch {
						case v != v: // the code's NaN, whatever scale is
							ok = sameValue(twin[i], v)
						case want != want: // a NaN scale, or 0*Inf: any NaN
							ok = twin[i] != twin[i]
						default:
							ok = math.Float32bits(twin[i]) == math.Float32bits(want)
						}
						if !ok {
							t.Fatalf("%sGeneric = %v (%#08x), want %v", call, twin[i], math.Float32bits(twin[i]), want)
						}
					}
				}
			}
		})
	}
}

// TestFP8Values pins a few codes of each format to their values.
func TestFP8Values(t *testing.T) { forEachSet(t, testFP8Values) }

func testFP8Values(t *testing.T) {
	tests := []struct {
		name string
		f    func(dst []float32, src []byte, scale float32)
		code byte
		want float32
	}{
		{"E5M2ToF32", E5M2ToF32, 0x01, 0x1p-16},
		{"E5M2ToF32", E5M2ToF32, 0x04, 0x1p-14},
		{"E5M2ToF32", E5M2ToF32, 0x3c, 1},
		{"E5M2ToF32", E5M2ToF32, 0xc2, -3},
		{"E5M2ToF32", E5M2ToF32, 0x7b, 57344},
		{"E5M2ToF32", E5M2ToF32, 0xfb, -57344},
		{"E5M2ToF32", E5M2ToF32, 0x7c, float32(math.Inf(1))},
		{"E5M2ToF32", E5M2ToF32, 0xfc, float32(math.Inf(-1))},
		{"E5M2ToF32", E5M2ToF32, 0x80, float32(math.Copysign(0, -1))},
		{"E4M3ToF32", E4M3ToF32, 0x01, 0x1p-9},
		{"E4M3ToF32", E4M3ToF32, 0x07, 7 * 0x1p-9},
		{"E4M3ToF32", E4M3ToF32, 0x08, 0x1p-6},
		{"E4M3ToF32", E4M3ToF32, 0x38, 1},
		{"E4M3ToF32", E4M3ToF32, 0xc4, -3},
		{"E4M3ToF32", E4M3ToF32, 0x7e, 448},
		{"E4M3ToF32", E4M3ToF32, 0xfe, -448},
		{"E4M3ToF32", E4M3ToF32, 0x78, 256},
		{"E4M3ToF32", E4M3ToF32, 0x80, float32(math.Copysign(0, -1))},
	}
	for _, tt := range tests {
		// The code at index 9 of 16 runs through the vector loop.
		src := make([]byte, 16)
		src[9] = tt.code
		dst := make([]float32, 16)
		tt.f(dst, src, 1)
		if math.Float32bits(dst[9]) != math.Float32bits(tt.want) {
			t.Errorf("%s(%#02x, 1) = %v, want %v", tt.name, tt.code, dst[9], tt.want)
		}
	}
	// The E4M3 NaNs are the quiet NaN with the code's sign, as pkg/quant's
	// DecodeE4M3 gives them.
	src := []byte{0x7f, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0x7f}
	dst := make([]float32, len(src))
	E4M3ToF32(dst, src, -2)
	for i, v := range dst {
		if want := uint32(src[i]&0x80)<<24 | 0x7fc0_0000; math.Float32bits(v) != want {
			t.Errorf("E4M3ToF32(%#02x, -2) = %#08x, want %#08x", src[i], math.Float32bits(v), want)
		}
	}
}

// specialHalves are binary16 scales (and Q5_1 offsets) at the edges:
// zeros, subnormals, the smallest normal, the largest finite values,
// infinities and NaNs (a signalling one too).
var specialHalves = []uint16{
	0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xb555,
	0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xfe00,
}

// randBlockHalf returns a binary16 from specialHalves half of the time,
// otherwise any finite binary16.
func randBlockHalf(r *rand.Rand) uint16 {
	if r.IntN(2) == 0 {
		return specialHalves[r.IntN(len(specialHalves))]
	}
	for {
		if h := uint16(r.IntN(1 << 16)); h&0x7c00 != 0x7c00 {
			return h
		}
	}
}

// blockCases are the block decoders TestBlockDecodeEdges runs.
var blockCases = []struct {
	name       string
	blockBytes int
	halves     int // d, and m for Q5_1
	run, twin  func(dst []float32, src []byte)
}{
	{"Q50ToF32", q50BlockBytes, 1, Q50ToF32, q50ToF32Generic},
	{"Q51ToF32", q51BlockBytes, 2, Q51ToF32, q51ToF32Generic},
	{"IQ4NLToF32", iq4nlBlockBytes, 1, IQ4NLToF32, iq4nlToF32Generic},
}

// TestBlockDecodeEdges checks the Q5_0, Q5_1 and IQ4_NL decoders on odd
// numbers of random blocks whose scales and offsets include subnormal,
// largest, infinite and NaN binary16 values, at misaligned offsets with
// guard regions around dst: against their twins bit for bit (a NaN matching
// any NaN: with NaN d and m, which NaN a sum returns is not specified), and
// the twins against the definitions.
func TestBlockDecodeEdges(t *testing.T) { forEachSet(t, testBlockDecodeEdges) }

func testBlockDecodeEdges(t *testing.T) {
	for _, c := range blockCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t)
			for _, nb := range []int{1, 3, 5, 7, 9, 13, 31} {
				for _, off := range offsets {
					src := make([]byte, nb*c.blockBytes)
					for i := range src {
						src[i] = byte(r.IntN(256))
					}
					for b := 0; b < nb; b++ {
						for h := 0; h < c.halves; h++ {
							binary.LittleEndian.PutUint16(src[b*c.blockBytes+2*h:], randBlockHalf(r))
						}
					}
					src = offsetCopy(src, (off+2)%8)
					n := 32 * nb
					dst, check := guardedF32(off, n, 16)
					c.run(dst, src)
					check(t)
					twin := make([]float32, n)
					c.twin(twin, src)
					for i := range dst {
						blk := src[i/32*c.blockBytes:]
						call := fmt.Sprintf("%s(blocks=%d, off=%d): dst[%d] (d %#04x, m %#04x)", c.name, nb, off, i,
							binary.LittleEndian.Uint16(blk), binary.LittleEndian.Uint16(blk[2:]))
						if dst[i] == dst[i] || twin[i] == twin[i] {
							if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
								t.Fatalf("%s = %v, generic %v", call, dst[i], twin[i])
							}
						}
						want := blockDef(c.name, src, i)
						if twin[i] != twin[i] || want != want {
							if twin[i] == twin[i] || want == want {
								t.Fatalf("%sGeneric = %v, want %v", call, twin[i], want)
							}
						} else if math.Float32bits(twin[i]) != math.Float32bits(want) {
							t.Fatalf("%sGeneric = %v, want %v", call, twin[i], want)
						}
					}
				}
			}
		})
	}
}

// TestDecodePanics checks that the decoders reject mismatched lengths.
func TestDecodePanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	b := func(n int) []byte { return make([]byte, n) }
	tests := []panicCase{
		{"E5M2ToF32", func() { E5M2ToF32(f(9), b(8), 1) }},
		{"E4M3ToF32", func() { E4M3ToF32(f(8), b(9), 1) }},
		{"Q50ToF32/partial", func() { Q50ToF32(f(48), b(22)) }},
		{"Q50ToF32/src", func() { Q50ToF32(f(64), b(43)) }},
		{"Q51ToF32/src", func() { Q51ToF32(f(32), b(22)) }},
		{"IQ4NLToF32/src", func() { IQ4NLToF32(f(32), b(20)) }},
		{"IQ4NLToF32/partial", func() { IQ4NLToF32(f(16), b(9)) }},
	}
	checkPanics(t, "lengths", tests)
}
