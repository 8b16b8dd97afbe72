package gguf

import (
	"encoding/binary"
	"math"
)

// Block layouts of the quantized types this package decodes, as ggml defines
// them (ggml-common.h). Offsets are bytes from the start of a block; fp16 is
// a little-endian IEEE half; "nibble j" of a 32-value group means byte j's
// low nibble for values 0..15 and its high nibble for values 16..31.
//
//	q4_0    18 B  d fp16, qs[16]                        x = d·(q−8)
//	q4_1    20 B  d, m fp16, qs[16]                     x = d·q + m
//	q5_0    22 B  d, qh u32, qs[16]                     x = d·(q−16), bit 4 of value j is bit j of qh
//	q5_1    24 B  d, m, qh u32, qs[16]                  x = d·q + m
//	q8_0    34 B  d, int8 qs[32]                        x = d·q
//	iq4_nl  18 B  d, qs[16]                             x = d·kvalues[q]
//	mxfp4   17 B  e E8M0, qs[16]                        x = 2^(e−128)·e2m1x2[q]
//
// The k-quants and iq4_xs cover super-blocks of 256 values:
//
//	q2_K    84 B  scales[16], qs[64], d, dmin          16 groups of 16; scales[g] = sc | mn<<4;
//	              x = d·sc·q − dmin·mn, q 2-bit
//	q3_K   110 B  hmask[32], qs[64], scales[12], d    16 groups of 16, 6-bit signed scales (−32);
//	              x = d·(s−32)·(q − 4·!hbit), q 2-bit plus a high bit
//	q4_K   144 B  d, dmin, scales[12], qs[128]        8 groups of 32, 6-bit scale and min
//	              (get_scale_min_k4); x = d·sc·q − dmin·m
//	q5_K   176 B  d, dmin, scales[12], qh[32], qs[128] as q4_K with a fifth bit from qh
//	q6_K   210 B  ql[128], qh[64], int8 scales[16], d 16 groups of 16; x = d·sc·(q−32)
//	iq4_xs 136 B  d, scales_h u16, scales_l[4], qs[128] 8 groups of 32 with 6-bit scales (−32)
//	q8_K   292 B  d float32, int8 qs[256], int16 bsums[16] (activations only)
//
// Where the 2-bit and 6-bit codes of a 128-value half sit (q2_K, q3_K, q6_K)
// follows ggml: byte l of a 32-byte run holds values l, l+32, l+64 and l+96
// in its bit pairs 0-1, 2-3, 4-5 and 6-7.
//
// Every decoder reproduces ggml's dequantize_row_* bit for bit: the same
// float32 products in the same order, each rounded (explicit float32
// conversions keep Go from fusing a multiply and an add).

// kvaluesIQ4NL is ggml's kvalues_iq4nl, the iq4_nl and iq4_xs levels.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is ggml's kvalues_mxfp4: the e2m1 values doubled (the block
// scale is halved to match).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// Decodable reports whether DequantizeRow (and QuantizeRow) handle t: f32,
// f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K,
// q8_K, iq4_nl, iq4_xs and mxfp4.
func (t Type) Decodable() bool {
	switch t {
	case F32, F16, BF16, Q40, Q41, Q50, Q51, Q80, Q2K, Q3K, Q4K, Q5K, Q6K, Q8K, IQ4NL, IQ4XS, MXFP4:
		return true
	}
	return false
}

// DequantizeRow decodes len(dst) values of type t from src into dst, as
// ggml's to_float does. len(dst) must be a multiple of t.BlockSize() and src
// must hold at least t.RowBytes(len(dst)) bytes; it panics otherwise, or if
// t is not Decodable (programmer errors).
func DequantizeRow(t Type, dst []float32, src []byte) {
	if !t.Decodable() {
		panic("gguf: DequantizeRow of " + t.String())
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(dst)%bs != 0 || len(src) < len(dst)/bs*ts {
		panic("gguf: DequantizeRow: " + t.String() + " row size mismatch")
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
		return
	}
	dec := decoders[t]
	for b := 0; b < len(dst)/bs; b++ {
		dec(dst[b*bs:(b+1)*bs], src[b*ts:(b+1)*ts])
	}
}

// decoders holds one block decoder per quantized type.
var decoders = map[Type]func(dst []float32, b []byte){
	Q40: dequantQ40, Q41: dequantQ41, Q50: dequantQ50, Q51: dequantQ51, Q80: dequantQ80,
	Q2K: dequantQ2K, Q3K: dequantQ3K, Q4K: dequantQ4K, Q5K: dequantQ5K, Q6K: dequantQ6K, Q8K: dequantQ8K,
	IQ4NL: dequantIQ4NL, IQ4XS: dequantIQ4XS, MXFP4: dequantMXFP4,
}

// BlockDecoder returns the function that decodes one block of t (BlockSize
// values from TypeSize bytes), for callers that walk a row block by block;
// nil for the scalar types and for types that are not Decodable.
func BlockDecoder(t Type) func(dst []float32, block []byte) { return decoders[t] }

func half(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func dequantQ40(y []float32, b []byte) {
	d, qs := half(b), b[2:18]
	for j, q := range qs {
		y[j] = float32(int(q&15)-8) * d
		y[j+16] = float32(int(q>>4)-8) * d
	}
}

func dequantQ41(y []float32, b []byte) {
	d, m, qs := half(b), half(b[2:]), b[4:20]
	for j, q := range qs {
		y[j] = float32(float32(q&15)*d) + m
		y[j+16] = float32(float32(q>>4)*d) + m
	}
}

func dequantQ50(y []float32, b []byte) {
	d, qh, qs := half(b), binary.LittleEndian.Uint32(b[2:]), b[6:22]
	for j, q := range qs {
		h0 := int(qh>>j&1) << 4
		h1 := int(qh>>(j+16)&1) << 4
		y[j] = float32(int(q&15)|h0-16) * d
		y[j+16] = float32(int(q>>4)|h1-16) * d
	}
}

func dequantQ51(y []float32, b []byte) {
	d, m, qh, qs := half(b), half(b[2:]), binary.LittleEndian.Uint32(b[4:]), b[8:24]
	for j, q := range qs {
		h0 := int(qh>>j&1) << 4
		h1 := int(qh>>(j+16)&1) << 4
		y[j] = float32(float32(int(q&15)|h0)*d) + m
		y[j+16] = float32(float32(int(q>>4)|h1)*d) + m
	}
}

func dequantQ80(y []float32, b []byte) {
	d := half(b)
	for j, q := range b[2:34] {
		y[j] = float32(int8(q)) * d
	}
}

func dequantMXFP4(y []float32, b []byte) {
	d := e8m0Half(b[0])
	for j, q := range b[1:17] {
		y[j] = float32(kvaluesMXFP4[q&15]) * d
		y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
	}
}

// e8m0Half is ggml_e8m0_to_fp32_half: 2^(e−128) as a float32 (subnormal
// for e < 2).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantIQ4NL(y []float32, b []byte) {
	d := half(b)
	for j, q := range b[2:18] {
		y[j] = d * float32(kvaluesIQ4NL[q&15])
		y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
	}
}

func dequantQ2K(y []float32, b []byte) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := half(b[80:]), half(b[82:])
	is := 0
	for n := 0; n < 2; n++ {
		q := qs[32*n : 32*n+32]
		for j := 0; j < 4; j++ {
			shift := uint(2 * j)
			for h := 0; h < 2; h++ {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
				out := y[128*n+32*j+16*h:]
				for l := 0; l < 16; l++ {
					out[l] = float32(dl*float32(q[16*h+l]>>shift&3)) - ml
				}
			}
		}
	}
}

// q3KScale returns the 6-bit scale of group j (0..15) of a q3_K block's
// 12 scale bytes, minus 32: its low 4 bits are a nibble of bytes 0..7, its
// high 2 bits a bit pair of bytes 8..11.
func q3KScale(s []byte, j int) int {
	lo := s[j%8] >> (4 * uint(j/8)) & 15
	hi := s[8+j%4] >> (2 * uint(j/4)) & 3
	return int(lo|hi<<4) - 32
}

func dequantQ3K(y []float32, b []byte) {
	hmask, qs, scales := b[0:32], b[32:96], b[96:108]
	d := half(b[108:])
	is := 0
	m := uint8(1)
	for n := 0; n < 2; n++ {
		q := qs[32*n : 32*n+32]
		for j := 0; j < 4; j++ {
			shift := uint(2 * j)
			for h := 0; h < 2; h++ {
				dl := d * float32(q3KScale(scales, is))
				is++
				out := y[128*n+32*j+16*h:]
				for l := 0; l < 16; l++ {
					v := int(q[16*h+l] >> shift & 3)
					if hmask[16*h+l]&m == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
			m <<= 1
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of group
// j (0..7) of a q4_K or q5_K block's 12 scale bytes.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4K(y []float32, b []byte) {
	d, dmin, scales, qs := half(b), half(b[2:]), b[4:16], b[16:144]
	for g := 0; g < 4; g++ {
		q := qs[32*g : 32*g+32]
		sc, m := scaleMinK4(2*g, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*g+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		out := y[64*g:]
		for l, c := range q {
			out[l] = float32(d1*float32(c&15)) - m1
			out[l+32] = float32(d2*float32(c>>4)) - m2
		}
	}
}

func dequantQ5K(y []float32, b []byte) {
	d, dmin, scales, qh, qs := half(b), half(b[2:]), b[4:16], b[16:48], b[48:176]
	for g := 0; g < 4; g++ {
		q := qs[32*g : 32*g+32]
		sc, m := scaleMinK4(2*g, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*g+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		u1, u2 := uint(2*g), uint(2*g+1)
		out := y[64*g:]
		for l, c := range q {
			out[l] = float32(d1*float32(c&15|(qh[l]>>u1&1)<<4)) - m1
			out[l+32] = float32(d2*float32(c>>4|(qh[l]>>u2&1)<<4)) - m2
		}
	}
}

func dequantQ6K(y []float32, b []byte) {
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := half(b[208:])
	for n := 0; n < 2; n++ {
		l4, h2, s := ql[64*n:], qh[32*n:], sc[8*n:]
		out := y[128*n:]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(l4[l]&15|(h2[l]&3)<<4) - 32
			q2 := int(l4[l+32]&15|(h2[l]>>2&3)<<4) - 32
			q3 := int(l4[l]>>4|(h2[l]>>4&3)<<4) - 32
			q4 := int(l4[l+32]>>4|(h2[l]>>6&3)<<4) - 32
			out[l] = float32(d*float32(int8(s[is]))) * float32(q1)
			out[l+32] = float32(d*float32(int8(s[is+2]))) * float32(q2)
			out[l+64] = float32(d*float32(int8(s[is+4]))) * float32(q3)
			out[l+96] = float32(d*float32(int8(s[is+6]))) * float32(q4)
		}
	}
}

func dequantIQ4XS(y []float32, b []byte) {
	d := half(b)
	sh := binary.LittleEndian.Uint16(b[2:])
	sl, qs := b[4:8], b[8:136]
	for ib := 0; ib < 8; ib++ {
		ls := int(sl[ib/2]>>(4*uint(ib%2))&15) | int(sh>>(2*uint(ib))&3)<<4
		dl := d * float32(ls-32)
		q, out := qs[16*ib:16*ib+16], y[32*ib:]
		for j, c := range q {
			out[j] = dl * float32(kvaluesIQ4NL[c&15])
			out[j+16] = dl * float32(kvaluesIQ4NL[c>>4])
		}
	}
}

func dequantQ8K(y []float32, b []byte) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	for j, q := range b[4:260] {
		y[j] = d * float32(int8(q))
	}
}

// F16ToF32 converts IEEE binary16 bits to float32 (exactly).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 31
	man := uint32(h) & 1023
	switch {
	case exp == 31:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: man·2^−24, exact in float32
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 converts a float32 to IEEE binary16 bits, rounding to nearest
// even as ggml's GGML_FP32_TO_FP16 does on the CPU: values beyond the half
// range become ±Inf, NaN becomes a quiet NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign // rounds to zero (below half the smallest subnormal)
		}
		// subnormal: shift the mantissa with its implicit bit
		m := man | 1<<23
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rem > halfway || (rem == halfway && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to Inf: that is the rounding
	}
	return sign | uint16(h)
}
