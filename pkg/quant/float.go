package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/kvqlabs/kvq/internal/simd"
)

// The unquantized baselines. Rows are stored consecutively, little-endian.
var (
	FP32 Format = floatFormat{name: "fp32", bytes: 4}
	FP16 Format = floatFormat{name: "fp16", bytes: 2}
	BF16 Format = floatFormat{name: "bf16", bytes: 2, brain: true}
)

type floatFormat struct {
	name  string
	bytes int
	brain bool
}

func (f floatFormat) Name() string { return f.name }

// Traits implements Format: one float per value, row after row.
func (f floatFormat) Traits(bool) Traits {
	v := DTypeF16
	switch {
	case f.bytes == 4:
		v = DTypeF32
	case f.brain:
		v = DTypeBF16
	}
	return Traits{Family: FamilyFloat, Value: v, Bits: 8 * f.bytes, Block: 1, Flush: 1}
}

func (f floatFormat) NewCodec(p CodecParams) (Codec, error) {
	if p.Dim <= 0 {
		return nil, fmt.Errorf("%w: %s: head size %d", ErrDim, f.name, p.Dim)
	}
	switch {
	case f.bytes == 4:
		return f32Codec{dim: p.Dim}, nil
	case f.brain:
		return u16Codec{dim: p.Dim, brain: true}, nil
	default:
		return u16Codec{dim: p.Dim}, nil
	}
}

// littleEndian reports whether the host stores words little-endian, in which
// case tiles can be viewed in place as []float32 or []uint16.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// asF32 views b as float32s when aligned and little-endian; otherwise ok is false.
func asF32(b []byte) ([]float32, bool) {
	if !littleEndian || len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, len(b) == 0 && littleEndian
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4), true
}

// asU16 views b as uint16s when aligned and little-endian.
func asU16(b []byte) ([]uint16, bool) {
	if !littleEndian || len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, len(b) == 0 && littleEndian
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), true
}

type f32Codec struct{ dim int }

func (c f32Codec) TokenGroup() int        { return 1 }
func (c f32Codec) TileBytes(rows int) int { return rows * c.dim * 4 }
func (c f32Codec) StateBytes() int        { return 0 }

func (c f32Codec) rows(tile []byte, row0, n int) []float32 {
	b := tile[row0*c.dim*4 : (row0+n)*c.dim*4]
	if v, ok := asF32(b); ok {
		return v
	}
	// Portable path for big-endian or unaligned tiles: decode a copy.
	v := make([]float32, n*c.dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func (c f32Codec) Encode(tile []byte, row0 int, src []float32, n int) {
	b := tile[row0*c.dim*4 : (row0+n)*c.dim*4]
	if v, ok := asF32(b); ok {
		copy(v, src[:n*c.dim])
		return
	}
	for i, x := range src[:n*c.dim] {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

func (c f32Codec) Decode(dst []float32, tile []byte, row0, n int) {
	copy(dst[:n*c.dim], c.rows(tile, row0, n))
}

func (c f32Codec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	simd.ScoresF32(dst, ldd, q, nq, c.dim, c.rows(tile, row0, n), n)
}

func (c f32Codec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	simd.AccumulateF32(acc, w, ldw, nq, c.dim, c.rows(tile, row0, n), n)
}

// u16Codec stores fp16 or (brain) bf16 rows.
type u16Codec struct {
	dim   int
	brain bool
}

func (c u16Codec) from(dst []float32, src []uint16) {
	if c.brain {
		simd.BF16ToF32(dst, src)
	} else {
		simd.F16ToF32(dst, src)
	}
}

func (c u16Codec) to(dst []uint16, src []float32) {
	if c.brain {
		simd.F32ToBF16(dst, src)
	} else {
		simd.F32ToF16(dst, src)
	}
}

func (c u16Codec) TokenGroup() int        { return 1 }
func (c u16Codec) TileBytes(rows int) int { return rows * c.dim * 2 }
func (c u16Codec) StateBytes() int        { return 0 }

func (c u16Codec) rows(tile []byte, row0, n int) []uint16 {
	b := tile[row0*c.dim*2 : (row0+n)*c.dim*2]
	if v, ok := asU16(b); ok {
		return v
	}
	v := make([]uint16, n*c.dim)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v
}

func (c u16Codec) Encode(tile []byte, row0 int, src []float32, n int) {
	b := tile[row0*c.dim*2 : (row0+n)*c.dim*2]
	if v, ok := asU16(b); ok {
		c.to(v, src[:n*c.dim])
		return
	}
	v := make([]uint16, n*c.dim)
	c.to(v, src[:n*c.dim])
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
}

func (c u16Codec) Decode(dst []float32, tile []byte, row0, n int) {
	c.from(dst[:n*c.dim], c.rows(tile, row0, n))
}

func (c u16Codec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
}

func (c u16Codec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
}

func (f floatFormat) Describe() (string, []string) {
	switch f.name {
	case "fp32":
		return "32-bit IEEE float (reference)", nil
	case "bf16":
		return "bfloat16 (8-bit exponent, 7-bit mantissa)", nil
	}
	return "IEEE half precision, the usual baseline (vLLM auto)", nil
}
