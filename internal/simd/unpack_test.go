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
		func(s []byte, i int, p unpackParams) float32 { return p.affine(int(s[i/2]>>(4*(i%2))&15), i) }},
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
		func(s []byte, i int, p unpackParams) float32 { return p.vec(int(s[i/2]>>(4*(i%2))&15), i) }},
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
		if c.unitBytes == q41BlockBytes {
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
// twin, and the twin against the format's definition, on every length up to
// 40 values and random lengths up to 300 (whole units), at misaligned
// offsets of dst, src, s and z, with guard regions around dst.
func TestUnpack(t *testing.T) {
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
						if want := c.ref(src, i, p); math.Float32bits(twin[i]) != math.Float32bits(want) {
							t.Fatalf("%sGeneric: dst[%d] = %v, want %v", shape, i, twin[i], want)
						}
					}
				}
			}
		})
	}
}

// TestUnpackExtremes runs the 8-bit unpackers over every code value with
// scales and biases that make the unfused product-then-sum rounding
// visible (a fused multiply-add would differ in the last bit).
func TestUnpackExtremes(t *testing.T) {
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
		gi, wi := make([]float32, 256), make([]float32, 256)
		I8ToF32(gi, src, p.scale)
		i8ToF32Generic(wi, src, p.scale)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("U8ToF32(code %d, scale %v, bias %v) = %v, want %v", i, p.scale, p.bias, got[i], want[i])
			}
			if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
				t.Errorf("I8ToF32(code %d, scale %v) = %v, want %v", int8(i), p.scale, gi[i], wi[i])
			}
		}
	}
}
