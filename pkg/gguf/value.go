package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// ValueType is the type of a metadata value, with GGUF's numeric ids.
type ValueType uint32

// Metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12

	// valueInvalid is what the zero Value reports; it is not a GGUF id.
	valueInvalid ValueType = 1<<32 - 1
)

var valueTypeNames = [...]string{
	ValueUint8:   "uint8",
	ValueInt8:    "int8",
	ValueUint16:  "uint16",
	ValueInt16:   "int16",
	ValueUint32:  "uint32",
	ValueInt32:   "int32",
	ValueFloat32: "float32",
	ValueBool:    "bool",
	ValueString:  "string",
	ValueArray:   "array",
	ValueUint64:  "uint64",
	ValueInt64:   "int64",
	ValueFloat64: "float64",
}

// valid reports whether t is a GGUF value type id.
func (t ValueType) valid() bool { return uint64(t) < uint64(len(valueTypeNames)) }

// String returns the type's name ("uint32", "array"), or "ValueType(N)" for
// an unknown id.
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// maxArrayDepth bounds how deeply arrays may nest: a metadata value that is
// an array has depth 1, an array inside it depth 2, and so on.
const maxArrayDepth = 8

// Scalar lists the Go types of GGUF's scalar metadata values.
type Scalar interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64
}

// Value is one metadata value. It holds a scalar of a [Scalar] type, a slice
// of a Scalar type (an array of that type), or a []Value whose elements are
// all arrays (an array of arrays). Build Values with [ValueOf], [ArrayOf] and
// [NestedArray]; the zero Value is invalid.
type Value struct {
	v any
}

// ValueOf returns a scalar Value; its type follows from x's Go type, e.g.
// ValueOf(uint32(32)) is a ValueUint32.
func ValueOf[T Scalar](x T) Value { return Value{v: x} }

// ArrayOf returns an array Value whose elements have x's element type. It
// keeps x without copying it.
func ArrayOf[T Scalar](x []T) Value {
	if x == nil {
		x = []T{}
	}
	return Value{v: x}
}

// NestedArray returns an array of arrays. Every element must itself be an
// array (made by ArrayOf or NestedArray); NestedArray panics otherwise, as
// that is a programming error. The elements are copied into a new slice.
func NestedArray(elems ...Value) Value {
	for i, e := range elems {
		if e.Type() != ValueArray {
			panic(fmt.Sprintf("gguf.NestedArray: element %d is %s, not an array", i, e.Type()))
		}
	}
	return Value{v: append([]Value{}, elems...)}
}

// Type returns the value's type: a scalar type, or ValueArray for arrays.
func (v Value) Type() ValueType {
	switch v.v.(type) {
	case uint8:
		return ValueUint8
	case int8:
		return ValueInt8
	case uint16:
		return ValueUint16
	case int16:
		return ValueInt16
	case uint32:
		return ValueUint32
	case int32:
		return ValueInt32
	case float32:
		return ValueFloat32
	case bool:
		return ValueBool
	case string:
		return ValueString
	case uint64:
		return ValueUint64
	case int64:
		return ValueInt64
	case float64:
		return ValueFloat64
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32,
		[]bool, []string, []uint64, []int64, []float64, []Value:
		return ValueArray
	}
	return valueInvalid
}

// ElemType returns the element type of an array (ValueArray for an array
// of arrays). For a scalar it returns an invalid ValueType.
func (v Value) ElemType() ValueType {
	switch v.v.(type) {
	case []uint8:
		return ValueUint8
	case []int8:
		return ValueInt8
	case []uint16:
		return ValueUint16
	case []int16:
		return ValueInt16
	case []uint32:
		return ValueUint32
	case []int32:
		return ValueInt32
	case []float32:
		return ValueFloat32
	case []bool:
		return ValueBool
	case []string:
		return ValueString
	case []uint64:
		return ValueUint64
	case []int64:
		return ValueInt64
	case []float64:
		return ValueFloat64
	case []Value:
		return ValueArray
	}
	return valueInvalid
}

// Len returns the number of elements of an array, and 0 for a scalar.
func (v Value) Len() int {
	switch x := v.v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// Any returns the value as a Go value: a scalar (uint32, string, ...), a
// typed slice ([]string, []float32, ...) or, for an array of arrays, a
// []Value. Slices are shared with the Value and must not be modified.
func (v Value) Any() any { return v.v }

// String formats the value for people: strings quoted, long arrays
// abbreviated.
func (v Value) String() string {
	switch x := v.v.(type) {
	case nil:
		return "<invalid>"
	case string:
		return strconv.Quote(x)
	case []string:
		return formatArray(x, strconv.Quote)
	case []Value:
		return formatArray(x, Value.String)
	case []uint8:
		return formatArray(x, fmtAny[uint8])
	case []int8:
		return formatArray(x, fmtAny[int8])
	case []uint16:
		return formatArray(x, fmtAny[uint16])
	case []int16:
		return formatArray(x, fmtAny[int16])
	case []uint32:
		return formatArray(x, fmtAny[uint32])
	case []int32:
		return formatArray(x, fmtAny[int32])
	case []float32:
		return formatArray(x, fmtAny[float32])
	case []bool:
		return formatArray(x, fmtAny[bool])
	case []uint64:
		return formatArray(x, fmtAny[uint64])
	case []int64:
		return formatArray(x, fmtAny[int64])
	case []float64:
		return formatArray(x, fmtAny[float64])
	}
	return fmt.Sprint(v.v)
}

func fmtAny[T any](x T) string { return fmt.Sprint(x) }

// formatArray prints at most a few elements of xs.
func formatArray[T any](xs []T, f func(T) string) string {
	const show = 8
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i == show {
			fmt.Fprintf(&b, " ... (%d elements)", len(xs))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f(x))
	}
	b.WriteByte(']')
	return b.String()
}

// describe names v's type for error messages: "string", "array of int32".
func (v Value) describe() string {
	if v.Type() == ValueArray {
		return "array of " + v.ElemType().String()
	}
	if v.v == nil {
		return "the zero Value"
	}
	return v.Type().String()
}

// depth returns how deeply arrays nest in v: 0 for a scalar, 1 for an array
// of scalars, 2 for an array of arrays of scalars, ...
func (v Value) depth() int {
	elems, ok := v.v.([]Value)
	if !ok {
		if v.Type() == ValueArray {
			return 1
		}
		return 0
	}
	d := 1 // an empty array of arrays still holds arrays
	for _, e := range elems {
		d = max(d, e.depth())
	}
	return d + 1
}

// Conversions used by the typed look-ups of File. The errors wrap
// ErrWrongType or ErrOutOfRange and name the value, not the key; File adds the
// key.

func (v Value) toUint() (uint64, error) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint32:
		return uint64(x), nil
	case uint64:
		return x, nil
	}
	i, err := v.toInt()
	if err != nil {
		return 0, newError(ErrWrongType, "is %s, want an integer", v.describe())
	}
	if i < 0 {
		return 0, newError(ErrOutOfRange, "is %d, want a non-negative integer", i)
	}
	return uint64(i), nil
}

func (v Value) toInt() (int64, error) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > 1<<63-1 {
			return 0, newError(ErrOutOfRange, "is %d, which does not fit in int64", x)
		}
		return int64(x), nil
	}
	return 0, newError(ErrWrongType, "is %s, want an integer", v.describe())
}

func (v Value) toFloat() (float64, error) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	if i, err := v.toInt(); err == nil {
		return float64(i), nil
	}
	if u, ok := v.v.(uint64); ok {
		return float64(u), nil
	}
	return 0, newError(ErrWrongType, "is %s, want a number", v.describe())
}

func (v Value) toInt32s() ([]int32, error) {
	switch x := v.v.(type) {
	case []int32:
		return append([]int32(nil), x...), nil
	case []int8:
		return convertInts(x)
	case []uint8:
		return convertInts(x)
	case []int16:
		return convertInts(x)
	case []uint16:
		return convertInts(x)
	case []uint32:
		return convertInts(x)
	case []int64:
		return convertInts(x)
	case []uint64:
		return convertInts(x)
	}
	return nil, newError(ErrWrongType, "is %s, want an array of integers", v.describe())
}

func convertInts[T uint8 | int8 | uint16 | int16 | uint32 | int64 | uint64](xs []T) ([]int32, error) {
	out := make([]int32, len(xs))
	for i, x := range xs {
		if int32(x) < 0 != (x < 0) || T(int32(x)) != x {
			return nil, newError(ErrOutOfRange, "has element %d = %d, which does not fit in int32", i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}
