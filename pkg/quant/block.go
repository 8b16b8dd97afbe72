package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/internal/simd"
)

// llama.cpp (GGML) block types, docs/quant-schemes.md §6. Every block covers
// 32 consecutive values of a row and starts with its little-endian fp16 scale d:
//
//	q8_0    34 B  d, int8 qs[32]                    x̂ = d·q
//	q4_0    18 B  d, u8 qs[16]                      x̂ = d·(q−8)
//	q4_1    20 B  d, fp16 m, u8 qs[16]              x̂ = d·q + m
//	q5_0    22 B  d, u8 qh[4], u8 qs[16]            x̂ = d·(q−16)
//	q5_1    24 B  d, fp16 m, u8 qh[4], u8 qs[16]    x̂ = d·q + m
//	iq4_nl  18 B  d, u8 qs[16]                      x̂ = d·T[q]
//
// Nibbles: byte j of qs holds element j in its low nibble and element j+16 in
// its high nibble. q5: qh is a little-endian uint32 whose bit j is bit 4 of
// element j (and bit j+16 that of element j+16). T is the fixed iq4_nl table
// (iq4nlLevels). (In llama.cpp itself a quantized V cache needs flash
// attention, -fa; kvq's attention reads every layout.)
//
// The quantizers reproduce ggml's reference ones (quantize_row_*_ref) byte for
// byte, in float32 arithmetic: d is computed in float32 and stored as fp16
// (round to nearest even), codes use the float32 inverse id = 1/d (0 when d
// is 0), so an all-zero block stores d = 0:
//
//   - q8_0: d = max|x|/127, q = roundf(x·id), ties away from zero;
//   - q4_0: m = the element of largest |x| (the first one on ties), d = m/−8,
//     q = min(15, trunc(x·id + 8.5)); q5_0: d = m/−16, q = min(31, trunc(x·id + 16.5));
//   - q4_1: d = (max−min)/15, m = min, q = min(15, trunc((x−min)·id + 0.5));
//     q5_1: d = (max−min)/31, q = trunc((x−min)·id + 0.5), at most 31.
//
// One deviation, for inputs beyond the fp16 range only: where ggml's d or m
// would overflow fp16 to ±Inf (|d| ≥ 65520, so |x| beyond about 8.3e6 for
// q8_0 and 5.2e5 for q4_0), kvq stores ±65504 instead and clamps the codes
// (computed with the saturated d), so decoding never yields Inf or NaN from
// finite input. NaN inputs are skipped when choosing the scale and get some
// in-range code.
//
// For iq4_nl, ggml's quantizers differ by path (the CPU one searches several
// scales, the CUDA copy kernels use a fast variant) and are not bit-exact
// across backends, so kvq defines its own, the reference quantizer of
// docs/quant-schemes.md §6.2: see QuantizeRowIQ4NL. Any iq4_nl block decodes the same everywhere.

// ggmlBlock is the number of values per block.
const ggmlBlock = 32

// ggmlKind names a block type in the kernels' switches.
type ggmlKind uint8

const (
	ggmlQ80 ggmlKind = iota
	ggmlQ40
	ggmlQ41
	ggmlQ50
	ggmlQ51
	ggmlIQ4NL
)

// ggmlType describes one block type.
type ggmlType struct {
	kind    ggmlKind
	name    string
	bytes   int  // per block
	bits    int  // per value
	hasMin  bool // q4_1, q5_1: blocks carry an fp16 minimum m at bytes 2..3
	quant   func(dst []byte, x *[ggmlBlock]float32)
	dequant func(dst *[ggmlBlock]float32, src []byte)
	summary string
}

var (
	q80Type = ggmlType{kind: ggmlQ80, name: "q8_0", bytes: 34, bits: 8, quant: quantQ80, dequant: dequantQ80,
		summary: "llama.cpp q8_0: blocks of 32 values, fp16 scale + int8 codes"}
	q40Type = ggmlType{kind: ggmlQ40, name: "q4_0", bytes: 18, bits: 4, quant: quantQ40, dequant: dequantQ40,
		summary: "llama.cpp q4_0: blocks of 32 values, fp16 scale + 4-bit codes"}
	q41Type = ggmlType{kind: ggmlQ41, name: "q4_1", bytes: 20, bits: 4, hasMin: true, quant: quantQ41, dequant: dequantQ41,
		summary: "llama.cpp q4_1: blocks of 32 values, fp16 scale and minimum + 4-bit codes"}
	q50Type = ggmlType{kind: ggmlQ50, name: "q5_0", bytes: 22, bits: 5, quant: quantQ50, dequant: dequantQ50,
		summary: "llama.cpp q5_0: blocks of 32 values, fp16 scale + 5-bit codes"}
	q51Type = ggmlType{kind: ggmlQ51, name: "q5_1", bytes: 24, bits: 5, hasMin: true, quant: quantQ51, dequant: dequantQ51,
		summary: "llama.cpp q5_1: blocks of 32 values, fp16 scale and minimum + 5-bit codes"}
	iq4nlType = ggmlType{kind: ggmlIQ4NL, name: "iq4_nl", bytes: 18, bits: 4, quant: quantIQ4NL, dequant: dequantIQ4NL,
		summary: "llama.cpp iq4_nl: blocks of 32 values, fp16 scale + 4-bit indices into a fixed non-linear table"}
)

// direct reports whether internal/simd decodes the type from the tile
// (Q80ToF32, Q40ToF32, Q41ToF32); the others are repacked first.
func (t *ggmlType) direct() bool {
	return t.kind == ggmlQ80 || t.kind == ggmlQ40 || t.kind == ggmlQ41
}

// iq4nlLevels is GGML's kvalues_iq4nl.
var iq4nlLevels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// Reference row conversions. len(src) must be a multiple of 32 and dst must
// hold len(src)/32 blocks (values); they panic otherwise, a programmer error.

// QuantizeRowQ80 writes len(src)/32 q8_0 blocks (34 bytes each) to dst.
func QuantizeRowQ80(dst []byte, src []float32) { quantizeRow(&q80Type, dst, src) }

// DequantizeRowQ80 decodes len(dst)/32 q8_0 blocks from src.
func DequantizeRowQ80(dst []float32, src []byte) { dequantizeRow(&q80Type, dst, src) }

// QuantizeRowQ40 writes len(src)/32 q4_0 blocks (18 bytes each) to dst.
func QuantizeRowQ40(dst []byte, src []float32) { quantizeRow(&q40Type, dst, src) }

// DequantizeRowQ40 decodes len(dst)/32 q4_0 blocks from src.
func DequantizeRowQ40(dst []float32, src []byte) { dequantizeRow(&q40Type, dst, src) }

// QuantizeRowQ41 writes len(src)/32 q4_1 blocks (20 bytes each) to dst.
func QuantizeRowQ41(dst []byte, src []float32) { quantizeRow(&q41Type, dst, src) }

// DequantizeRowQ41 decodes len(dst)/32 q4_1 blocks from src.
func DequantizeRowQ41(dst []float32, src []byte) { dequantizeRow(&q41Type, dst, src) }

// QuantizeRowQ50 writes len(src)/32 q5_0 blocks (22 bytes each) to dst.
func QuantizeRowQ50(dst []byte, src []float32) { quantizeRow(&q50Type, dst, src) }

// DequantizeRowQ50 decodes len(dst)/32 q5_0 blocks from src.
func DequantizeRowQ50(dst []float32, src []byte) { dequantizeRow(&q50Type, dst, src) }

// QuantizeRowQ51 writes len(src)/32 q5_1 blocks (24 bytes each) to dst.
func QuantizeRowQ51(dst []byte, src []float32) { quantizeRow(&q51Type, dst, src) }

// DequantizeRowQ51 decodes len(dst)/32 q5_1 blocks from src.
func DequantizeRowQ51(dst []float32, src []byte) { dequantizeRow(&q51Type, dst, src) }

// QuantizeRowIQ4NL writes len(src)/32 iq4_nl blocks (18 bytes each) to dst
// with kvq's reference quantizer (docs/quant-schemes.md §6.2). Per block:
//
//  1. m is the element of largest |x| (the first on ties). If |m| < 1e-15
//     the block is all zero codes with d = 0 (fp16 d would underflow anyway).
//  2. d0 = m/T[0] = −m/127, so that m lands exactly on level T[0].
//  3. Each x_j takes the index of the level of T nearest to x_j·(1/d0),
//     float32; a value exactly between two levels takes the larger one, and
//     values beyond the ends take the end levels.
//  4. With weights w_j = x_j², d = Σ w·T[q]·x / Σ w·T[q]² (the weighted
//     least-squares scale for those indices), summed in float32 for
//     j = 0..31 in order; if Σ w·T[q]² is 0 or d is not finite, d = d0. The
//     indices are not re-picked.
//  5. d is stored as fp16 (saturating at ±65504, as for the other types).
func QuantizeRowIQ4NL(dst []byte, src []float32) { quantizeRow(&iq4nlType, dst, src) }

// DequantizeRowIQ4NL decodes len(dst)/32 iq4_nl blocks from src.
func DequantizeRowIQ4NL(dst []float32, src []byte) { dequantizeRow(&iq4nlType, dst, src) }

func quantizeRow(t *ggmlType, dst []byte, src []float32) {
	nb := ggmlBlocks(t, len(src))
	dst = dst[:nb*t.bytes]
	for b := 0; b < nb; b++ {
		t.quant(dst[b*t.bytes:(b+1)*t.bytes], (*[ggmlBlock]float32)(src[b*ggmlBlock:]))
	}
}

func dequantizeRow(t *ggmlType, dst []float32, src []byte) {
	nb := ggmlBlocks(t, len(dst))
	src = src[:nb*t.bytes]
	for b := 0; b < nb; b++ {
		t.dequant((*[ggmlBlock]float32)(dst[b*ggmlBlock:]), src[b*t.bytes:(b+1)*t.bytes])
	}
}

func ggmlBlocks(t *ggmlType, n int) int {
	if n%ggmlBlock != 0 {
		panic(fmt.Sprintf("quant: %s row of %d values is not a multiple of %d", t.name, n, ggmlBlock))
	}
	return n / ggmlBlock
}

// ggmlScale returns d as stored (fp16 bits) and the float32 d to quantize
// with: d itself, or ±65504 where fp16 would overflow.
func ggmlScale(d float32) (uint16, float32) {
	h := simd.F32ToF16Scalar(d)
	if h&0x7fff == 0x7c00 { // ±Inf: saturate
		h ^= 0x7c00 ^ 0x7bff
		d = float32(math.Copysign(65504, float64(d)))
	}
	return h, d
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncCode is C's (int)v for a v in [0, hi+1.5], clamped to [0, hi];
// anything else (NaN included) clamps too.
func truncCode(v float32, hi uint8) uint8 {
	switch {
	case !(v >= 0):
		return 0
	case v >= float32(hi):
		return hi
	}
	return uint8(v)
}

func abs32f(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// signedMax returns the element of largest magnitude (the first on ties;
// NaNs are skipped) and its magnitude.
func signedMax(x *[ggmlBlock]float32) (m, amax float32) {
	for _, v := range x {
		if a := abs32f(v); a > amax {
			amax, m = a, v
		}
	}
	return m, amax
}

// minMax32 returns the block's minimum and maximum (NaNs skipped; 0, 0 for a
// block of NaNs).
func minMax32(x *[ggmlBlock]float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	if hi < lo {
		return 0, 0
	}
	return lo, hi
}

func putF16Bits(b []byte, h uint16) { binary.LittleEndian.PutUint16(b, h) }
func f16At(b []byte) float32        { return simd.F16ToF32Scalar(binary.LittleEndian.Uint16(b)) }

func quantQ80(dst []byte, x *[ggmlBlock]float32) {
	_, amax := signedMax(x)
	h, d := ggmlScale(amax / 127)
	id := inv(d)
	putF16Bits(dst, h)
	qs := dst[2:34]
	for j, v := range x {
		r := math.Round(float64(v * id)) // roundf: ties away from zero
		switch {
		case r > 127:
			r = 127
		case r < -127:
			r = -127
		case r != r: // NaN input
			r = 0
		}
		qs[j] = byte(int8(r))
	}
}

func dequantQ80(dst *[ggmlBlock]float32, src []byte) {
	d := f16At(src)
	for j, c := range src[2:34] {
		dst[j] = float32(int8(c)) * d
	}
}

// quantSymNibbles is q4_0 (levels 16) and q5_0 (levels 32): d = m/−(levels/2).
func quantSymNibbles(x *[ggmlBlock]float32, levels int) (h uint16, q [ggmlBlock]uint8) {
	m, _ := signedMax(x)
	h, d := ggmlScale(m / -float32(levels/2))
	id := inv(d)
	half := float32(levels/2) + 0.5
	for j, v := range x {
		q[j] = truncCode(float32(v*id)+half, uint8(levels-1))
	}
	return h, q
}

// quantAsymNibbles is q4_1 (levels 16) and q5_1 (levels 32).
func quantAsymNibbles(x *[ggmlBlock]float32, levels int) (h, hm uint16, q [ggmlBlock]uint8) {
	lo, hi := minMax32(x)
	h, d := ggmlScale((hi - lo) / float32(levels-1))
	hm, _ = ggmlScale(lo) // the codes use the float32 minimum, as ggml's do
	id := inv(d)
	for j, v := range x {
		t := v - lo
		q[j] = truncCode(float32(t*id)+0.5, uint8(levels-1))
	}
	return h, hm, q
}

func putNibbles(qs []byte, q *[ggmlBlock]uint8) {
	for j := 0; j < 16; j++ {
		qs[j] = q[j]&0x0f | q[j+16]<<4
	}
}

func putHighBits(qh []byte, q *[ggmlBlock]uint8) {
	var bits uint32
	for j, c := range q {
		bits |= uint32(c>>4&1) << j
	}
	binary.LittleEndian.PutUint32(qh, bits)
}

func quantQ40(dst []byte, x *[ggmlBlock]float32) {
	h, q := quantSymNibbles(x, 16)
	putF16Bits(dst, h)
	putNibbles(dst[2:18], &q)
}

func quantQ50(dst []byte, x *[ggmlBlock]float32) {
	h, q := quantSymNibbles(x, 32)
	putF16Bits(dst, h)
	putHighBits(dst[2:6], &q)
	putNibbles(dst[6:22], &q)
}

func quantQ41(dst []byte, x *[ggmlBlock]float32) {
	h, hm, q := quantAsymNibbles(x, 16)
	putF16Bits(dst, h)
	putF16Bits(dst[2:], hm)
	putNibbles(dst[4:20], &q)
}

func quantQ51(dst []byte, x *[ggmlBlock]float32) {
	h, hm, q := quantAsymNibbles(x, 32)
	putF16Bits(dst, h)
	putF16Bits(dst[2:], hm)
	putHighBits(dst[4:8], &q)
	putNibbles(dst[8:24], &q)
}

// nibbleCodes returns the 32 codes of a qs[16] array plus optional high bits.
func nibbleCodes(qs []byte, qh uint32) (q [ggmlBlock]uint8) {
	qs = qs[:16]
	for j, b := range qs {
		q[j] = b&0x0f | uint8(qh>>j&1)<<4
		q[j+16] = b>>4 | uint8(qh>>(j+16)&1)<<4
	}
	return q
}

func dequantQ40(dst *[ggmlBlock]float32, src []byte) {
	d := f16At(src)
	for j, c := range nibbleCodes(src[2:18], 0) {
		dst[j] = float32(int(c)-8) * d
	}
}

func dequantQ50(dst *[ggmlBlock]float32, src []byte) {
	d := f16At(src)
	for j, c := range nibbleCodes(src[6:22], binary.LittleEndian.Uint32(src[2:6])) {
		dst[j] = float32(int(c)-16) * d
	}
}

func dequantQ41(dst *[ggmlBlock]float32, src []byte) {
	d, m := f16At(src), f16At(src[2:])
	for j, c := range nibbleCodes(src[4:20], 0) {
		dst[j] = float32(float32(c)*d) + m
	}
}

func dequantQ51(dst *[ggmlBlock]float32, src []byte) {
	d, m := f16At(src), f16At(src[2:])
	for j, c := range nibbleCodes(src[8:24], binary.LittleEndian.Uint32(src[4:8])) {
		dst[j] = float32(float32(c)*d) + m
	}
}

// iq4nlNearest returns the index of the level nearest to v (ties to the
// larger level; NaN gives 0).
func iq4nlNearest(v float32) uint8 {
	var idx uint8
	for k := 1; k < 16; k++ {
		mid := float32(int(iq4nlLevels[k-1])+int(iq4nlLevels[k])) / 2
		if v >= mid {
			idx = uint8(k)
		}
	}
	return idx
}

func quantIQ4NL(dst []byte, x *[ggmlBlock]float32) {
	m, amax := signedMax(x)
	qs := dst[2:18]
	if amax < 1e-15 {
		putF16Bits(dst, 0)
		clear(qs)
		return
	}
	d0 := m / float32(iq4nlLevels[0])
	id := 1 / d0
	var q [ggmlBlock]uint8
	var sumqx, sumq2 float32
	for j, v := range x {
		q[j] = iq4nlNearest(float32(v * id))
		l := float32(iq4nlLevels[q[j]])
		w := float32(v * v)
		wl := float32(w * l)
		sumqx += float32(wl * v)
		sumq2 += float32(wl * l)
	}
	d := d0
	if sumq2 > 0 {
		if ls := sumqx / sumq2; abs32f(ls) <= math.MaxFloat32 {
			d = ls
		}
	}
	h, _ := ggmlScale(d)
	putF16Bits(dst, h)
	putNibbles(qs, &q)
}

func dequantIQ4NL(dst *[ggmlBlock]float32, src []byte) {
	d := f16At(src)
	for j, c := range nibbleCodes(src[2:18], 0) {
		dst[j] = float32(iq4nlLevels[c]) * d
	}
}

// Unpacking for the kernels' decoders (block_format.go), eight codes per
// word (SWAR).
