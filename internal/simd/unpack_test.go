package simd

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// unpackCase is one code-unpacking kernel under test. Values come in units:
// unit values are stored in unitBytes source bytes (one byte per value for
// 8-bit codes, 32 values in 34, 18 or 20 bytes for the GGML blocks).
type unpackCase struct {
	name            string
	unit, unitBytes int
	vec             bool // per-element s and z
	// run calls the exported kernel, twin the generic one.
	run, twin func(dst []float32, src []byte, p unpackParams)
	// ref is value i of src, written out from the format's definition.
	ref func(src []byte, i int, p unpackParams) float32
}

type unpackParams struct {
	scale, bias float32
	s, z        []float32
}

// affine is code*scale + bias with the product rounded first, the
// documented semantics.
func affine(code int, scale, bias float32) float32 {
	return float32(float32(code)*scale) + bias
}

func (p unpackParams) affine(code, i int) float32 { return affine(code, p.scale, p.bias) }
func (p unpackParams) vec(code, i int) float32    { return affine(code, p.s[i], p.z[i]) }

// ggmlHalf returns the little-endian binary16 at b[off:] as float32.
func ggmlHalf(b []byte, off int) float32 {
	return F16ToF32Scalar(binary.LittleEndian.Uint16(b[off:]))
}

// q4Code returns the 4-bit code of value j (< 32) of a GGML Q4 block
// whose 16 code bytes are qs.
func q4Code(qs []byte, j int) int {
	if j < 16 {
		return int(qs[j] & 15)
	}
	return int(qs[j-16] >> 4)
}

// u4RunCode returns code i of the run of 2*len(src) 4-bit codes at src,
// from the layout's definition: blocks of 32 codes (16 bytes), byte k of a
// block holding code k in its low nibble and code k+16 in its high nibble;
// a last block of t < 32 codes holds codes k and k+t/2 in byte k.
func u4RunCode(src []byte, i int) int {
	b := i / 32 * 32
	h := min(32, 2*len(src)-b) / 2
	if k := i - b; k < h {
		return int(src[b/2+k] & 15)
	}
	return int(src[b/2+i-b-h] >> 4)
}

var unpackCases = []unpackCase{
	{"U8ToF32", 1, 1, false,
		func(d []float32, s []byte, p unpackParams) { U8ToF32(d, s, p.scale, p.bias) },
		func(d []float32, s []byte, p unpackParams) { u8ToF32Generic(d, s, p.scale, p.bias) },
		func(s []byte, i int, p unpackParams) float32 { return p.affine(int(s[i]), i) }},
	{"I8ToF32", 1, 1, false,
		func(d []float32, s []byte, p unpackParams) { I8ToF32(d, s, p.scale) },
		func(d []float32, s []byte, p unpackParams) { i8ToF32Generic(d, s, p.scale) },
		func(s []byte, i int, p unpackParams) float32 { return float32(int8(s[i])) * p.scale }},
	{"U4ToF32", 2, 1, false,
		func(d []float32, s []byte, p unpackParams) { U4ToF32(d, s, p.scale, p.bias) },
		func(d []float32, s []byte, p unpackParams) { u4ToF32Generic(d, s, p.scale, p.bias) },
		func(s []byte, i int, p unpackParams) float32 { return p.affine(u4RunCode(s, i), i) }},
	{"U2ToF32", 4, 1, false,
		func(d []float32, s []byte, p unpackParams) { U2ToF32(d, s, p.scale, p.bias) },
		func(d []float32, s []byte, p unpackParams) { u2ToF32Generic(d, s, p.scale, p.bias) },
		func(s []byte, i int, p unpackParams) float32 { return p.affine(int(s[i/4]>>(2*(i%4))&3), i) }},
	{"U8ToF32Vec", 1, 1, true,
		func(d []float32, s []byte, p unpackParams) { U8ToF32Vec(d, s, p.s, p.z) },
		func(d []float32, s []byte, p unpackParams) { u8ToF32VecGeneric(d, s, p.s, p.z) },
		func(s []byte, i int, p unpackParams) float32 { return p.vec(int(s[i]), i) }},
	{"U4ToF32Vec", 2, 1, true,
		func(d []float32, s []byte, p unpackParams) { U4ToF32Vec(d, s, p.s, p.z) },
		func(d []float32, s []byte, p unpackParams) { u4ToF32VecGeneric(d, s, p.s, p.z) },
		func(s []byte, i int, p unpackParams) float32 { return p.vec(u4RunCode(s, i), i) }},
	{"U2ToF32Vec", 4, 1, true,
		func(d []float32, s []byte, p unpackParams) { U2ToF32Vec(d, s, p.s, p.z) },
		func(d []float32, s []byte, p unpackParams) { u2ToF32VecGeneric(d, s, p.s, p.z) },
		func(s []byte, i int, p unpackParams) float32 { return p.vec(int(s[i/4]>>(2*(i%4))&3), i) }},
	{"Q80ToF32", 32, q80BlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { Q80ToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { q80ToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*q80BlockBytes:]
			return ggmlHalf(blk, 0) * float32(int8(blk[2+i%32]))
		}},
	{"Q40ToF32", 32, q40BlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { Q40ToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { q40ToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*q40BlockBytes:]
			return ggmlHalf(blk, 0) * float32(q4Code(blk[2:], i%32)-8)
		}},
	{"Q41ToF32", 32, q41BlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { Q41ToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { q41ToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*q41BlockBytes:]
			return affine(q4Code(blk[4:], i%32), ggmlHalf(blk, 0), ggmlHalf(blk, 2))
		}},
	{"Q50ToF32", 32, q50BlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { Q50ToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { q50ToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*q50BlockBytes:]
			return ggmlHalf(blk, 0) * float32(q5Code(blk[2:6], blk[6:], i%32)-16)
		}},
	{"Q51ToF32", 32, q51BlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { Q51ToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { q51ToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*q51BlockBytes:]
			return affine(q5Code(blk[4:8], blk[8:], i%32), ggmlHalf(blk, 0), ggmlHalf(blk, 2))
		}},
	{"IQ4NLToF32", 32, iq4nlBlockBytes, false,
		func(d []float32, s []byte, p unpackParams) { IQ4NLToF32(d, s) },
		func(d []float32, s []byte, p unpackParams) { iq4nlToF32Generic(d, s) },
		func(s []byte, i int, p unpackParams) float32 {
			blk := s[i/32*iq4nlBlockBytes:]
			return ggmlHalf(blk, 0) * float32(iq4nlTable[q4Code(blk[2:], i%32)])
		}},
	{"E5M2ToF32", 1, 1, false,
		func(d []float32, s []byte, p unpackParams) { E5M2ToF32(d, s, p.scale) },
		func(d []float32, s []byte, p unpackParams) { e5m2ToF32Generic(d, s, p.scale) },
		func(s []byte, i int, p unpackParams) float32 { return fp8Def(s[i], 5, 15) * p.scale }},
	{"E4M3ToF32", 1, 1, false,
		func(d []float32, s []byte, p unpackParams) { E4M3ToF32(d, s, p.scale) },
		func(d []float32, s []byte, p unpackParams) { e4m3ToF32Generic(d, s, p.scale) },
		func(s []byte, i int, p unpackParams) float32 { return fp8Def(s[i], 4, 7) * p.scale }},
}

// randUnpackSrc returns random source bytes for n values of c; the GGML
// blocks get finite binary16 scales (and offsets) of moderate size.
func randUnpackSrc(r *rand.Rand, c unpackCase, n int) []byte {
	src := make([]byte, n/c.unit*c.unitBytes)
	for i := range src {
		src[i] = byte(r.IntN(256))
	}
	if c.unit == 32 {
		halves := 1
		if c.unitBytes == q41BlockBytes || c.unitBytes == q51BlockBytes {
			halves = 2
		}
		for b := 0; b < len(src); b += c.unitBytes {
			for h := 0; h < halves; h++ {
				binary.LittleEndian.PutUint16(src[b+2*h:], F32ToF16Scalar(float32(r.NormFloat64()/16)))
			}
		}
	}
	return src
}

// TestUnpack checks every unpacking kernel bit for bit against its generic
// twin, and the twin against the format's definition (a NaN matching any
// NaN of the same sign), on every length up to 40 values and random lengths
// up to 300 (whole units), at misaligned offsets of dst, src, s and z, with
// guard regions around dst.
func TestUnpack(t *testing.T) { forEachSet(t, testUnpack) }

func testUnpack(t *testing.T) {
	for _, c := range unpackCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t)
			for _, size := range sizes(r) {
				n := size - size%c.unit
				if c.unit == 32 {
					n = 32 * (size % 11) // 0..10 blocks
				}
				for _, off := range offsets {
					src := offsetCopy(randUnpackSrc(r, c, n), (off+1)%8)
					p := unpackParams{scale: float32(r.NormFloat64()), bias: float32(r.NormFloat64())}
					if c.vec {
						p.s = offsetCopy(randF32(r, n), (off+2)%8)
						p.z = offsetCopy(randF32(r, n), (off+3)%8)
					}
					shape := fmt.Sprintf("%s(n=%d, off=%d)", c.name, n, off)
					dst, check := guardedF32(off, n, 16)
					c.run(dst, src, p)
					check(t)
					twin := make([]float32, n)
					c.twin(twin, src, p)
					for i := range dst {
						if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
							t.Fatalf("%s: dst[%d] = %v, generic %v", shape, i, dst[i], twin[i])
						}
						if want := c.ref(src, i, p); !sameValue(twin[i], want) {
							t.Fatalf("%sGeneric: dst[%d] = %v, want %v", shape, i, twin[i], want)
						}
					}
				}
			}
		})
	}
}

// TestUnpackExtremes runs the 8-bit unpackers (U8ToF32Groups too) over
// every code value with scales and biases that make the unfused
// product-then-sum rounding visible (a fused multiply-add would differ in
// the last bit).
func TestUnpackExtremes(t *testing.T) { forEachSet(t, testUnpackExtremes) }

func testUnpackExtremes(t *testing.T) {
	src := make([]byte, 256)
	for i := range src {
		src[i] = byte(i)
	}
	for _, p := range []struct{ scale, bias float32 }{
		{1.0 / 3, -1.0 / 7},
		{0.1, 0.3},
		{-1e-3, 1e3},
		{3.4e38, 0}, // overflows to ±Inf for large codes
		{1e-45, 0},  // subnormal products
	} {
		got, want := make([]float32, 256), make([]float32, 256)
		U8ToF32(got, src, p.scale, p.bias)
		u8ToF32Generic(want, src, p.scale, p.bias)
		// The grouped kernel, with the same scale and bias for every group.
		gg := make([]float32, 256)
		gs, gb := make([]float32, 256/32), make([]float32, 256/32)
		for g := range gs {
			gs[g], gb[g] = p.scale, p.bias
		}
		U8ToF32Groups(gg, src, 32, gs, gb)
		gi, wi := make([]float32, 256), make([]float32, 256)
		I8ToF32(gi, src, p.scale)
		i8ToF32Generic(wi, src, p.scale)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("U8ToF32(code %d, scale %v, bias %v) = %v, want %v", i, p.scale, p.bias, got[i], want[i])
			}
			if math.Float32bits(gg[i]) != math.Float32bits(want[i]) {
				t.Errorf("U8ToF32Groups(code %d, scale %v, bias %v) = %v, want %v", i, p.scale, p.bias, gg[i], want[i])
			}
			if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
				t.Errorf("I8ToF32(code %d, scale %v) = %v, want %v", int8(i), p.scale, gi[i], wi[i])
			}
		}
	}
}

// groupCase is one grouped unpacker under test; perByte codes share a
// source byte.
type groupCase struct {
	name      string
	perByte   int
	run, twin func(dst []float32, src []byte, group int, scale, bias []float32)
	// code is code i of src, from the packing's definition.
	code func(src []byte, i int) int
}

var groupCases = []groupCase{
	{"U8ToF32Groups", 1, U8ToF32Groups, u8ToF32GroupsGeneric,
		func(s []byte, i int) int { return int(s[i]) }},
	{"U4ToF32Groups", 2, U4ToF32Groups, u4ToF32GroupsGeneric, u4RunCode},
	{"U2ToF32Groups", 4, U2ToF32Groups, u2ToF32GroupsGeneric,
		func(s []byte, i int) int { return int(s[i/4] >> (2 * (i % 4)) & 3) }},
}

// TestUnpackGroups checks the grouped unpackers bit for bit against their
// generic twins, and the twins against the definition, for 0 to 16 groups
// of sizes that are multiples of 8 (every loop of the assembly: 4 and 8
// vectors written out, blocks of 8 and 4 vectors, single vectors) and that
// are not (odd ones included, where a group starts inside a byte), at
// misaligned offsets of dst, src, scale and bias, with guard regions around
// dst.
func TestUnpackGroups(t *testing.T) { forEachSet(t, testUnpackGroups) }

func testUnpackGroups(t *testing.T) {
	for _, c := range groupCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t)
			for _, group := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 20, 24, 32, 40, 64, 96, 128, 136, 160} {
				for _, ng := range []int{0, 1, 2, 3, 5, 16} {
					n := group * ng
					if n%c.perByte != 0 {
						continue
					}
					for _, off := range offsets {
						src := make([]byte, n/c.perByte)
						for i := range src {
							src[i] = byte(r.IntN(256))
						}
						src = offsetCopy(src, (off+1)%8)
						scale := offsetCopy(randF32(r, ng), (off+2)%8)
						bias := offsetCopy(randF32(r, ng), (off+3)%8)
						shape := fmt.Sprintf("%s(group=%d, groups=%d, off=%d)", c.name, group, ng, off)
						dst, check := guardedF32(off, n, 16)
						c.run(dst, src, group, scale, bias)
						check(t)
						twin := make([]float32, n)
						c.twin(twin, src, group, scale, bias)
						for i := range dst {
							if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
								t.Fatalf("%s: dst[%d] = %v, generic %v", shape, i, dst[i], twin[i])
							}
							g := i / group
							if want := affine(c.code(src, i), scale[g], bias[g]); math.Float32bits(twin[i]) != math.Float32bits(want) {
								t.Fatalf("%sGeneric: dst[%d] = %v, want %v", shape, i, twin[i], want)
							}
						}
					}
				}
			}
		})
	}
}

func TestUnpackGroupsPanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	b := func(n int) []byte { return make([]byte, n) }
	tests := []panicCase{
		{"U8ToF32Groups/group0", func() { U8ToF32Groups(f(0), b(0), 0, f(0), f(0)) }},
		{"U8ToF32Groups/negative", func() { U8ToF32Groups(f(8), b(8), -8, f(1), f(1)) }},
		{"U8ToF32Groups/src", func() { U8ToF32Groups(f(64), b(63), 32, f(2), f(2)) }},
		{"U8ToF32Groups/partial", func() { U8ToF32Groups(f(48), b(48), 32, f(1), f(1)) }},
		{"U8ToF32Groups/scale", func() { U8ToF32Groups(f(64), b(64), 32, f(1), f(2)) }},
		{"U4ToF32Groups/bias", func() { U4ToF32Groups(f(64), b(32), 32, f(2), f(3)) }},
		{"U4ToF32Groups/src", func() { U4ToF32Groups(f(64), b(64), 32, f(2), f(2)) }},
		{"U2ToF32Groups/src", func() { U2ToF32Groups(f(64), b(15), 32, f(2), f(2)) }},
		{"U2ToF32Groups/partial", func() { U2ToF32Groups(f(64), b(16), 24, f(2), f(2)) }},
	}
	checkPanics(t, "shapes", tests)
}

// lutCase is one table-lookup kernel under test: unit values are packed in
// unitBytes source bytes, and the table has size entries.
type lutCase struct {
	name            string
	unit, unitBytes int
	size            int
	// run calls the exported kernel, twin the generic one, with the first
	// size entries of table.
	run, twin func(dst []float32, src []byte, table *[16]float32)
	// code is code i of src, from the packing's definition.
	code func(src []byte, i int) int
}

var lutCases = []lutCase{
	{"LUT4ToF32", 2, 1, 16,
		func(d []float32, s []byte, t *[16]float32) { LUT4ToF32(d, s, t) },
		func(d []float32, s []byte, t *[16]float32) { lut4ToF32Generic(d, s, t) },
		func(s []byte, i int) int { return int(s[i/2] >> (4 * (i % 2)) & 15) }},
	{"LUT3ToF32", 8, 3, 8,
		func(d []float32, s []byte, t *[16]float32) { LUT3ToF32(d, s, (*[8]float32)(t[:8])) },
		func(d []float32, s []byte, t *[16]float32) { lut3ToF32Generic(d, s, (*[8]float32)(t[:8])) },
		func(s []byte, i int) int {
			// Bit 3i of the stream, little end first, and the two after it.
			c := 0
			for b := 0; b < 3; b++ {
				bit := 3*i + b
				c |= int(s[bit/8]>>(bit%8)&1) << b
			}
			return c
		}},
	{"LUT2ToF32", 4, 1, 4,
		func(d []float32, s []byte, t *[16]float32) { LUT2ToF32(d, s, (*[4]float32)(t[:4])) },
		func(d []float32, s []byte, t *[16]float32) { lut2ToF32Generic(d, s, (*[4]float32)(t[:4])) },
		func(s []byte, i int) int { return int(s[i/4] >> (2 * (i % 4)) & 3) }},
}

// randTable returns a table of random bit patterns (NaNs with payloads,
// infinities and subnormals included) in its first size entries and
// sentinels after them, which no lookup may return.
func randTable(r *rand.Rand, size int) *[16]float32 {
	var t [16]float32
	for i := range t {
		t[i] = sentinel
		if i < size {
			t[i] = math.Float32frombits(r.Uint32())
		}
	}
	return &t
}

// TestLUT checks the table lookups bit for bit against their generic twins,
// and the twins against the packing's definition, on every length up to 40
// values and random lengths up to 300 (whole units), at misaligned offsets
// of dst and src, with guard regions around dst.
func TestLUT(t *testing.T) { forEachSet(t, testLUT) }

func testLUT(t *testing.T) {
	for _, c := range lutCases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t)
			for _, size := range sizes(r) {
				n := size - size%c.unit
				for _, off := range offsets {
					src := make([]byte, n/c.unit*c.unitBytes)
					for i := range src {
						src[i] = byte(r.IntN(256))
					}
					src = offsetCopy(src, (off+1)%8)
					table := randTable(r, c.size)
					shape := fmt.Sprintf("%s(n=%d, off=%d)", c.name, n, off)
					dst, check := guardedF32(off, n, 16)
					c.run(dst, src, table)
					check(t)
					twin := make([]float32, n)
					c.twin(twin, src, table)
					for i := range dst {
						if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
							t.Fatalf("%s: dst[%d] = %#08x, generic %#08x", shape, i, math.Float32bits(dst[i]), math.Float32bits(twin[i]))
						}
						if want := table[c.code(src, i)]; math.Float32bits(twin[i]) != math.Float32bits(want) {
							t.Fatalf("%sGeneric: dst[%d] = %#08x, want %#08x", shape, i, math.Float32bits(twin[i]), math.Float32bits(want))
						}
					}
				}
			}
		})
	}
}

func TestLUTPanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	b := func(n int) []byte { return make([]byte, n) }
	var t16 [16]float32
	var t8 [8]float32
	var t4 [4]float32
	tests := []panicCase{
		{"LUT4ToF32/odd", func() { LUT4ToF32(f(7), b(3), &t16) }},
		{"LUT4ToF32/src", func() { LUT4ToF32(f(8), b(5), &t16) }},
		{"LUT3ToF32/partial", func() { LUT3ToF32(f(12), b(5), &t8) }},
		{"LUT3ToF32/src", func() { LUT3ToF32(f(16), b(5), &t8) }},
		{"LUT2ToF32/partial", func() { LUT2ToF32(f(6), b(2), &t4) }},
		{"LUT2ToF32/src", func() { LUT2ToF32(f(8), b(3), &t4) }},
	}
	checkPanics(t, "shapes", tests)
}
