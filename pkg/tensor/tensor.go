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
)

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
	case Q80:
		return "Q8_0"
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
	case Q80:
		return n / Q80BlockSize * Q80BlockBytes
	}
	panic("tensor: unknown dtype " + d.String())
}

// ErrShape reports a weight whose size disagrees with its declared shape.
var ErrShape = errors.New("tensor: shape mismatch")

// Weight is a row-major [Rows][Cols] matrix (PyTorch Linear layout: out × in).
// Exactly one of F32, U16 (F16 or BF16 bits) or Raw (Q8_0 blocks) is set,
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
	case Q80:
		if w.Cols%Q80BlockSize != 0 {
			return fmt.Errorf("%w: %s: Q8_0 row length %d is not a multiple of %d", ErrShape, w.Name, w.Cols, Q80BlockSize)
		}
		got, want = len(w.Raw), w.Rows*w.DType.RowBytes(w.Cols)
	default:
		return fmt.Errorf("%w: %s: unknown dtype %v", ErrShape, w.Name, w.DType)
	}
	if got != want {
		return fmt.Errorf("%w: %s [%d %d] %v holds %d elements or bytes, want %d", ErrShape, w.Name, w.Rows, w.Cols, w.DType, got, want)
	}
	return nil
}
