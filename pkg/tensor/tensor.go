// Package tensor holds the small vocabulary that the runtime and its compute
// backends share: weight dtypes and a weight matrix descriptor. The
// interface the backends implement is pkg/runtime/backend's Backend.
//
// The package knows nothing about model files, caches or devices. A Weight
// views memory owned by someone else (usually a memory-mapped model file);
// it never copies or frees it.
package tensor

import (
	"errors"
	"fmt"
)

// DType is the storage type of a weight matrix.
type DType int

// Weight storage types.
const (
	F32  DType = iota // float32
	F16               // IEEE binary16
	BF16              // bfloat16
	Q80               // GGML Q8_0: blocks of 32 int8 codes with one fp16 scale (34 bytes)

	// Packed GGML block types (pkg/gguf's block layouts), stored in Raw
	// like Q80. The CPU backend multiplies them a row at a time.
	Q40   // GGML Q4_0: 32 values in 18 bytes
	Q41   // GGML Q4_1: 32 values in 20 bytes
	Q50   // GGML Q5_0: 32 values in 22 bytes
	Q51   // GGML Q5_1: 32 values in 24 bytes
	Q2K   // GGML Q2_K: 256 values in 84 bytes
	Q3K   // GGML Q3_K: 256 values in 110 bytes
	Q4K   // GGML Q4_K: 256 values in 144 bytes
	Q5K   // GGML Q5_K: 256 values in 176 bytes
	Q6K   // GGML Q6_K: 256 values in 210 bytes
	IQ4NL // GGML IQ4_NL: 32 values in 18 bytes
	IQ4XS // GGML IQ4_XS: 256 values in 136 bytes
	MXFP4 // GGML MXFP4: 32 values in 17 bytes
)

// blocks gives the packed types' ggml names, values per block and bytes
// per block.
var blocks = map[DType]struct {
	name          string
	values, bytes int
}{
	Q80: {"Q8_0", Q80BlockSize, Q80BlockBytes},
	Q40: {"Q4_0", 32, 18}, Q41: {"Q4_1", 32, 20}, Q50: {"Q5_0", 32, 22}, Q51: {"Q5_1", 32, 24},
	Q2K: {"Q2_K", 256, 84}, Q3K: {"Q3_K", 256, 110}, Q4K: {"Q4_K", 256, 144}, Q5K: {"Q5_K", 256, 176}, Q6K: {"Q6_K", 256, 210},
	IQ4NL: {"IQ4_NL", 32, 18}, IQ4XS: {"IQ4_XS", 256, 136}, MXFP4: {"MXFP4", 32, 17},
}

// Packed reports whether d is a GGML block type (Q8_0 and the types after
// it), stored in Weight.Raw.
func (d DType) Packed() bool {
	_, ok := blocks[d]
	return ok
}

// Block returns the values and bytes of one block of a packed dtype (1 and
// the element size for F32, F16 and BF16).
func (d DType) Block() (values, bytes int) {
	switch d {
	case F32:
		return 1, 4
	case F16, BF16:
		return 1, 2
	}
	b, ok := blocks[d]
	if !ok {
		panic("tensor: unknown dtype " + d.String())
	}
	return b.values, b.bytes
}

// Q80BlockSize is the number of values in one Q8_0 block and Q80BlockBytes its size.
const (
	Q80BlockSize  = 32
	Q80BlockBytes = 34
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	}
	if b, ok := blocks[d]; ok {
		return b.name
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// RowBytes returns the bytes one row of n values takes in this dtype.
func (d DType) RowBytes(n int) int {
	switch d {
	case F32:
		return 4 * n
	case F16, BF16:
		return 2 * n
	}
	if b, ok := blocks[d]; ok {
		return n / b.values * b.bytes
	}
	panic("tensor: unknown dtype " + d.String())
}

// ErrShape reports a weight whose size disagrees with its declared shape.
var ErrShape = errors.New("tensor: shape mismatch")

// Weight is a row-major [Rows][Cols] matrix (PyTorch Linear layout: out × in).
// Exactly one of F32, U16 (F16 or BF16 bits) or Raw (Q8_0 and the other
// packed block types) is set,
// according to DType.
type Weight struct {
	Name       string
	DType      DType
	Rows, Cols int
	F32        []float32
	U16        []uint16
	Raw        []byte
}

// Bytes returns the storage size of the weight.
func (w *Weight) Bytes() int64 { return int64(w.Rows) * int64(w.DType.RowBytes(w.Cols)) }

// Validate checks that the data slice matches the shape.
func (w *Weight) Validate() error {
	if w.Rows <= 0 || w.Cols <= 0 {
		return fmt.Errorf("%w: %s has shape [%d %d]", ErrShape, w.Name, w.Rows, w.Cols)
	}
	n := w.Rows * w.Cols
	var got, want int
	switch w.DType {
	case F32:
		got, want = len(w.F32), n
	case F16, BF16:
		got, want = len(w.U16), n
	default:
		b, ok := blocks[w.DType]
		if !ok {
			return fmt.Errorf("%w: %s: unknown dtype %v", ErrShape, w.Name, w.DType)
		}
		if w.Cols%b.values != 0 {
			return fmt.Errorf("%w: %s: %s row length %d is not a multiple of %d", ErrShape, w.Name, b.name, w.Cols, b.values)
		}
		got, want = len(w.Raw), w.Rows*w.DType.RowBytes(w.Cols)
	}
	if got != want {
		return fmt.Errorf("%w: %s [%d %d] %v holds %d elements or bytes, want %d", ErrShape, w.Name, w.Rows, w.Cols, w.DType, got, want)
	}
	return nil
}
