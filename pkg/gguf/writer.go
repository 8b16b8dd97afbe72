package gguf

import (
	"encoding/binary"
	"io"
	"math"
	"slices"
)

// Writer builds a GGUF file, writing metadata and tensors in the order they
// were added and laying the data out as llama.cpp does. It is meant for tests
// and small fixtures; it keeps references to the tensor data until WriteTo.
//
// The Add methods record the first error (a duplicate key, a bad alignment, a
// tensor whose data does not match its shape, ...); later calls are then
// ignored and WriteTo returns that error. AddTensor also returns it. Every
// file a Writer writes without error is accepted by Parse.
type Writer struct {
	version uint32
	align   int64
	kv      []KV
	keys    map[string]struct{}
	tensors []TensorInfo // Offset unset: WriteTo lays the data out
	data    [][]byte
	names   map[string]struct{}
	err     error
}

// NewWriter returns a Writer for GGUF version 2 or 3 (the two are identical
// for little-endian files). Any other version makes WriteTo fail with
// ErrUnsupportedVersion.
func NewWriter(version uint32) *Writer {
	w := &Writer{
		version: version,
		align:   DefaultAlignment,
		keys:    make(map[string]struct{}),
		names:   make(map[string]struct{}),
	}
	if err := checkVersion(version); err != nil {
		w.err = newError(ErrUnsupportedVersion, "%v", err)
	}
	return w
}

// AddKV adds a metadata key/value pair. Setting general.alignment (a uint32
// power of two) changes the alignment of the tensor data.
func (w *Writer) AddKV(key string, v Value) {
	if w.err != nil {
		return
	}
	w.err = w.addKV(key, v)
}

func (w *Writer) addKV(key string, v Value) error {
	if _, dup := w.keys[key]; dup {
		return newError(ErrDuplicate, "metadata key %q added twice", key)
	}
	if v.v == nil {
		return newError(ErrWrongType, "metadata key %q has the zero Value", key)
	}
	if d := v.depth(); d > maxArrayDepth {
		return newError(ErrCorrupt, "metadata key %q: arrays nested %d deep, at most %d allowed", key, d, maxArrayDepth)
	}
	if key == AlignmentKey {
		a, err := alignmentOf(v)
		if err != nil {
			return newError(ErrAlignment, "%v", err)
		}
		w.align = a
	}
	w.keys[key] = struct{}{}
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

// AddString adds a string value.
func (w *Writer) AddString(key, s string) { w.AddKV(key, ValueOf(s)) }

// AddUint32 adds a uint32 value.
func (w *Writer) AddUint32(key string, x uint32) { w.AddKV(key, ValueOf(x)) }

// AddUint64 adds a uint64 value.
func (w *Writer) AddUint64(key string, x uint64) { w.AddKV(key, ValueOf(x)) }

// AddInt32 adds an int32 value.
func (w *Writer) AddInt32(key string, x int32) { w.AddKV(key, ValueOf(x)) }

// AddFloat32 adds a float32 value.
func (w *Writer) AddFloat32(key string, x float32) { w.AddKV(key, ValueOf(x)) }

// AddBool adds a bool value.
func (w *Writer) AddBool(key string, x bool) { w.AddKV(key, ValueOf(x)) }

// AddStrings adds an array of strings.
func (w *Writer) AddStrings(key string, x []string) { w.AddKV(key, ArrayOf(x)) }

// AddFloat32s adds an array of float32.
func (w *Writer) AddFloat32s(key string, x []float32) { w.AddKV(key, ArrayOf(x)) }

// AddInt32s adds an array of int32.
func (w *Writer) AddInt32s(key string, x []int32) { w.AddKV(key, ArrayOf(x)) }

// AddTensor adds a tensor of type typ with dimensions dims (ggml order,
// dims[0] fastest) whose encoded data is data; len(data) must be exactly the
// tensor's size. The data is not copied and must not change before WriteTo.
func (w *Writer) AddTensor(name string, typ Type, dims []uint64, data []byte) error {
	if w.err != nil {
		return w.err
	}
	w.err = w.addTensor(name, typ, dims, data)
	return w.err
}

// AddTensorF32 adds a tensor of type typ made from float32 values (ggml
// order, dims[0] fastest): f32, f16 and bf16 are converted, the block types
// quantized row by row with QuantizeRow, byte for byte as llama-quantize
// does without an importance matrix. It fails with ErrUnknownType for a
// type QuantizeRow does not write, and ErrBadShape when len(vals) is not
// the dims' element count or a row is not a whole number of blocks.
func (w *Writer) AddTensorF32(name string, typ Type, dims []uint64, vals []float32) error {
	if w.err != nil {
		return w.err
	}
	if !typ.Decodable() {
		w.err = newError(ErrUnknownType, "tensor %q: kvq does not quantize to %s", name, typ)
		return w.err
	}
	elems, size, err := tensorBytes(typ, dims)
	if err != nil {
		de := asDetail(err)
		w.err = newError(de.sentinel, "tensor %q: %s", name, de.msg)
		return w.err
	}
	if int64(len(vals)) != elems {
		w.err = newError(ErrBadShape, "tensor %q: %d values, dims %v hold %d", name, len(vals), dims, elems)
		return w.err
	}
	data := make([]byte, size)
	row := int64(1)
	if len(dims) > 0 {
		row = int64(dims[0])
	}
	rb := size / (elems / row)
	for r := int64(0); r < elems/row; r++ {
		QuantizeRow(typ, data[r*rb:(r+1)*rb], vals[r*row:(r+1)*row])
	}
	return w.AddTensor(name, typ, dims, data)
}

func (w *Writer) addTensor(name string, typ Type, dims []uint64, data []byte) error {
	if _, dup := w.names[name]; dup {
		return newError(ErrDuplicate, "tensor %q added twice", name)
	}
	if len(dims) > maxDims {
		return newError(ErrBadShape, "tensor %q has %d dimensions, at most %d allowed", name, len(dims), maxDims)
	}
	_, size, err := tensorBytes(typ, dims)
	if err != nil {
		de := asDetail(err)
		return newError(de.sentinel, "tensor %q: %s", name, de.msg)
	}
	if int64(len(data)) != size {
		return newError(ErrBadShape, "tensor %q: data is %d bytes, dims %v of %s need %d", name, len(data), dims, typ, size)
	}
	w.names[name] = struct{}{}
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: slices.Clone(dims), Type: typ, Size: size})
	w.data = append(w.data, data)
	return nil
}

// WriteTo writes the file to dst: header, metadata, tensor infos, padding to
// the alignment, then each tensor's data padded to the alignment.
func (w *Writer) WriteTo(dst io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	le := binary.LittleEndian
	b := []byte(Magic)
	b = le.AppendUint32(b, w.version)
	b = le.AppendUint64(b, uint64(len(w.tensors)))
	b = le.AppendUint64(b, uint64(len(w.kv)))
	for _, kv := range w.kv {
		b = appendString(b, kv.Key)
		b = le.AppendUint32(b, uint32(kv.Value.Type()))
		b = appendValue(b, kv.Value)
	}
	var rel int64
	for _, t := range w.tensors {
		b = appendString(b, t.Name)
		b = le.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, uint32(t.Type))
		b = le.AppendUint64(b, uint64(rel))
		rel += alignUp(t.Size, w.align)
	}
	b = append(b, make([]byte, alignUp(int64(len(b)), w.align)-int64(len(b)))...)

	n, err := dst.Write(b)
	total := int64(n)
	if err != nil {
		return total, err
	}
	var zeros []byte
	for i, t := range w.tensors {
		n, err := dst.Write(w.data[i])
		total += int64(n)
		if err != nil {
			return total, err
		}
		for pad := alignUp(t.Size, w.align) - t.Size; pad > 0; {
			if zeros == nil {
				zeros = make([]byte, min(w.align, 1<<16))
			}
			n, err := dst.Write(zeros[:min(pad, int64(len(zeros)))])
			total += int64(n)
			pad -= int64(n)
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue appends v's encoding without its type id. v must be valid.
func appendValue(b []byte, v Value) []byte {
	le := binary.LittleEndian
	switch x := v.v.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case uint16:
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case string:
		return appendString(b, x)
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	}
	// An array: element type, length, elements.
	b = le.AppendUint32(b, uint32(v.ElemType()))
	b = le.AppendUint64(b, uint64(v.Len()))
	switch x := v.v.(type) {
	case []uint8:
		return append(b, x...)
	case []int8:
		return appendEach(b, x, func(b []byte, e int8) []byte { return append(b, byte(e)) })
	case []uint16:
		return appendEach(b, x, le.AppendUint16)
	case []int16:
		return appendEach(b, x, func(b []byte, e int16) []byte { return le.AppendUint16(b, uint16(e)) })
	case []uint32:
		return appendEach(b, x, le.AppendUint32)
	case []int32:
		return appendEach(b, x, func(b []byte, e int32) []byte { return le.AppendUint32(b, uint32(e)) })
	case []float32:
		return appendEach(b, x, func(b []byte, e float32) []byte { return le.AppendUint32(b, math.Float32bits(e)) })
	case []bool:
		return appendEach(b, x, func(b []byte, e bool) []byte { return appendValue(b, Value{v: e}) })
	case []string:
		return appendEach(b, x, appendString)
	case []uint64:
		return appendEach(b, x, le.AppendUint64)
	case []int64:
		return appendEach(b, x, func(b []byte, e int64) []byte { return le.AppendUint64(b, uint64(e)) })
	case []float64:
		return appendEach(b, x, func(b []byte, e float64) []byte { return le.AppendUint64(b, math.Float64bits(e)) })
	case []Value:
		return appendEach(b, x, appendValue)
	}
	panic("gguf: appendValue called with " + v.describe()) // unreachable: addKV rejects the zero Value
}

func appendEach[T any](b []byte, xs []T, f func([]byte, T) []byte) []byte {
	for _, x := range xs {
		b = f(b, x)
	}
	return b
}
