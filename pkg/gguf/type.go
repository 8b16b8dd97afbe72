package gguf

import (
	"fmt"
	"math"
)

// Type is a ggml tensor type, with ggml's numeric ids (enum ggml_type in
// ggml.h). Ids that ggml has retired (4, 5, 31-33, 36-38) are unknown.
type Type uint32

// ggml tensor types. The Go names drop ggml's underscores (Q4_0 is Q40);
// String returns ggml's own spelling ("q4_0").
const (
	F32    Type = 0
	F16    Type = 1
	Q40    Type = 2
	Q41    Type = 3
	Q50    Type = 6
	Q51    Type = 7
	Q80    Type = 8
	Q81    Type = 9
	Q2K    Type = 10
	Q3K    Type = 11
	Q4K    Type = 12
	Q5K    Type = 13
	Q6K    Type = 14
	Q8K    Type = 15
	IQ2XXS Type = 16
	IQ2XS  Type = 17
	IQ3XXS Type = 18
	IQ1S   Type = 19
	IQ4NL  Type = 20
	IQ3S   Type = 21
	IQ2S   Type = 22
	IQ4XS  Type = 23
	I8     Type = 24
	I16    Type = 25
	I32    Type = 26
	I64    Type = 27
	F64    Type = 28
	IQ1M   Type = 29
	BF16   Type = 30
	TQ10   Type = 34
	TQ20   Type = 35
	MXFP4  Type = 39
	NVFP4  Type = 40
	Q10    Type = 41
	Q20    Type = 42
)

type typeInfo struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

// qk is QK_K, the super-block size of the k-quants and i-quants.
const qk = 256

// typeInfos is indexed by Type; a zero blockSize marks an unknown id. Sizes
// are sizeof(block_*) in ggml-common.h. (gguf-py lists Q8_1 as 40 bytes, the
// layout before ggml stored its two scales as halves; ggml's 36 is used.)
var typeInfos = [...]typeInfo{
	F32:    {"f32", 1, 4},
	F16:    {"f16", 1, 2},
	Q40:    {"q4_0", 32, 2 + 16},
	Q41:    {"q4_1", 32, 2 + 2 + 16},
	Q50:    {"q5_0", 32, 2 + 4 + 16},
	Q51:    {"q5_1", 32, 2 + 2 + 4 + 16},
	Q80:    {"q8_0", 32, 2 + 32},
	Q81:    {"q8_1", 32, 2 + 2 + 32},
	Q2K:    {"q2_K", qk, 2 + 2 + qk/16 + qk/4},
	Q3K:    {"q3_K", qk, 2 + qk/4 + qk/8 + 12},
	Q4K:    {"q4_K", qk, 2 + 2 + qk/2 + 12},
	Q5K:    {"q5_K", qk, 2 + 2 + qk/2 + qk/8 + 12},
	Q6K:    {"q6_K", qk, 2 + qk/2 + qk/4 + qk/16},
	Q8K:    {"q8_K", qk, 4 + qk + qk/8},
	IQ2XXS: {"iq2_xxs", qk, 2 + qk/4},
	IQ2XS:  {"iq2_xs", qk, 2 + qk/4 + qk/32},
	IQ3XXS: {"iq3_xxs", qk, 2 + qk/4 + qk/8},
	IQ1S:   {"iq1_s", qk, 2 + qk/8 + qk/16},
	IQ4NL:  {"iq4_nl", 32, 2 + 16},
	IQ3S:   {"iq3_s", qk, 2 + qk/4 + qk/8 + qk/32 + 4},
	IQ2S:   {"iq2_s", qk, 2 + qk/4 + qk/16},
	IQ4XS:  {"iq4_xs", qk, 2 + 2 + qk/2 + qk/64},
	I8:     {"i8", 1, 1},
	I16:    {"i16", 1, 2},
	I32:    {"i32", 1, 4},
	I64:    {"i64", 1, 8},
	F64:    {"f64", 1, 8},
	IQ1M:   {"iq1_m", qk, qk/8 + qk/16 + qk/32},
	BF16:   {"bf16", 1, 2},
	TQ10:   {"tq1_0", qk, 2 + 4*13},
	TQ20:   {"tq2_0", qk, 2 + qk/4},
	MXFP4:  {"mxfp4", 32, 1 + 16},
	NVFP4:  {"nvfp4", 64, 4 + 32},
	Q10:    {"q1_0", 128, 2 + 16},
	Q20:    {"q2_0", 64, 2 + 16},
}

func (t Type) info() (typeInfo, bool) {
	if uint64(t) >= uint64(len(typeInfos)) || typeInfos[t].blockSize == 0 {
		return typeInfo{}, false
	}
	return typeInfos[t], true
}

// Known reports whether t is a ggml type this package knows the block layout
// of. BlockSize and TypeSize return 0 for unknown types.
func (t Type) Known() bool {
	_, ok := t.info()
	return ok
}

// String returns ggml's name for t ("f32", "q4_0", "q6_K", "bf16"), or
// "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := t.info(); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of t (1 for plain
// scalar types), or 0 if t is unknown.
func (t Type) BlockSize() int {
	ti, _ := t.info()
	return ti.blockSize
}

// TypeSize returns the number of bytes in one block of t, or 0 if t is
// unknown.
func (t Type) TypeSize() int {
	ti, _ := t.info()
	return ti.typeSize
}

// RowBytes returns the number of bytes that n consecutive elements of type t
// occupy. It fails with ErrUnknownType for an unknown type, and with
// ErrBadShape when n is negative, not a multiple of BlockSize, or the result
// overflows int64.
func (t Type) RowBytes(n int64) (int64, error) {
	ti, ok := t.info()
	if !ok {
		return 0, newError(ErrUnknownType, "tensor type %d", uint32(t))
	}
	bs, ts := int64(ti.blockSize), int64(ti.typeSize)
	if n < 0 || n%bs != 0 {
		return 0, newError(ErrBadShape, "%d elements of %s is not a whole number of %d-element blocks", n, t, bs)
	}
	blocks := n / bs
	if blocks > math.MaxInt64/ts {
		return 0, newError(ErrBadShape, "%d elements of %s overflow int64 bytes", n, t)
	}
	return blocks * ts, nil
}

// tensorBytes returns the number of elements and bytes of a tensor of type t
// with the given dimensions (Dims[0] fastest). No dimensions means a scalar.
func tensorBytes(t Type, dims []uint64) (elems, size int64, err error) {
	elems = 1
	for i, d := range dims {
		if d == 0 {
			return 0, 0, newError(ErrBadShape, "dimension %d is zero", i)
		}
		if d > math.MaxInt64 || int64(d) > math.MaxInt64/elems {
			return 0, 0, newError(ErrBadShape, "element count of dims %v overflows int64", dims)
		}
		elems *= int64(d)
	}
	row := int64(1)
	if len(dims) > 0 {
		row = int64(dims[0])
	}
	rowBytes, err := t.RowBytes(row)
	if err != nil {
		return 0, 0, err
	}
	rows := elems / row
	if rowBytes != 0 && rows > math.MaxInt64/rowBytes {
		return 0, 0, newError(ErrBadShape, "%d elements of %s overflow int64 bytes", elems, t)
	}
	return elems, rows * rowBytes, nil
}
