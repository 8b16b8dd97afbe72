package safetensors

import (
	"fmt"
	"math"
)

// DType is the element type of a tensor, spelled as in the file ("F32",
// "BF16", "F8_E4M3", ...).
type DType string

// The dtypes of the safetensors format. Sub-byte dtypes (F4, F6E2M3, F6E3M2)
// pack their elements densely, so a tensor of them must hold a whole number
// of bytes.
const (
	Bool   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	F8E8M0 DType = "F8_E8M0" // unsigned 8-bit exponent, the scale type of MX formats
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	C64    DType = "C64" // complex64: two F32
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
	F4     DType = "F4"      // 4-bit float, E2M1
	F6E2M3 DType = "F6_E2M3" // 6-bit float
	F6E3M2 DType = "F6_E3M2" // 6-bit float
)

// DTypes returns every dtype the package knows, ordered by element size and
// then name.
func DTypes() []DType {
	return []DType{
		F4, F6E2M3, F6E3M2,
		Bool, F8E4M3, F8E5M2, F8E8M0, I8, U8,
		BF16, F16, I16, U16,
		F32, I32, U32,
		C64, F64, I64, U64,
	}
}

// Bits returns the size of one element in bits, and false for an unknown
// dtype.
func (d DType) Bits() (int, bool) {
	switch d {
	case F4:
		return 4, true
	case F6E2M3, F6E3M2:
		return 6, true
	case Bool, U8, I8, F8E5M2, F8E4M3, F8E8M0:
		return 8, true
	case I16, U16, F16, BF16:
		return 16, true
	case I32, U32, F32:
		return 32, true
	case C64, F64, I64, U64:
		return 64, true
	}
	return 0, false
}

// Size returns the size of one element in bytes. It returns false for an
// unknown dtype and for the sub-byte dtypes (F4, F6E2M3, F6E3M2), whose
// elements are not whole bytes; use Bits for those.
func (d DType) Size() (int, bool) {
	b, ok := d.Bits()
	if !ok || b%8 != 0 {
		return 0, false
	}
	return b / 8, true
}

// Known reports whether d is a dtype of the safetensors format.
func (d DType) Known() bool {
	_, ok := d.Bits()
	return ok
}

// byteSize returns the bytes held by a tensor of dtype d and the given shape.
// d must be known. It fails, with a message that callers wrap in ErrShape,
// for a negative dimension, an element or bit count that overflows int64, or
// a bit count that is not a whole number of bytes. A zero dimension makes the
// size 0 whatever the other dimensions are.
func byteSize(d DType, shape []int64) (int64, string) {
	bits, _ := d.Bits()
	for i, n := range shape {
		if n < 0 {
			return 0, fmt.Sprintf("dimension %d is negative (%d)", i, n)
		}
		if n == 0 {
			return 0, ""
		}
	}
	elems := int64(1)
	for _, n := range shape {
		if elems > math.MaxInt64/n {
			return 0, fmt.Sprintf("the element count of shape %v overflows int64", shape)
		}
		elems *= n
	}
	if elems > math.MaxInt64/int64(bits) {
		return 0, fmt.Sprintf("the %d elements of shape %v are more than 2^63 bits", elems, shape)
	}
	nbits := elems * int64(bits)
	if nbits%8 != 0 {
		return 0, fmt.Sprintf("%d elements of %s are %d bits, not a whole number of bytes", elems, d, nbits)
	}
	return nbits / 8, ""
}
