package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when the file has no
// general.alignment key.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that sets the tensor data alignment.
const AlignmentKey = "general.alignment"

// maxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const maxDims = 4

// readBufSize is the size of the parser's read buffer (less for smaller files).
const readBufSize = 64 << 10

// maxPrealloc caps the capacity allocated up front from a count read from the
// file. Counts are checked against the file size, but a large file can still
// claim billions of entries; slices grow beyond this only as entries are
// actually read, so memory stays proportional to the bytes consumed.
const maxPrealloc = 4096

// Parse reads the header, metadata and tensor infos of the GGUF file that r
// holds; size is the file's length in bytes. It does not read tensor data,
// but checks that every tensor's data lies inside the file.
//
// r is read sequentially through a small buffer, from offset 0 to the end of
// the tensor infos. Malformed contents give an error wrapping a sentinel
// (ErrBadMagic, ErrUnsupportedVersion, ErrTruncated, ...) inside a
// *FormatError; a failing r gives its error, wrapped.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative file size %d", size)
	}
	p := &parser{ra: r, size: size, buf: make([]byte, min(size, readBufSize))}
	return p.parse()
}

// parser reads the file sequentially. Unread buffered data is buf[r:w],
// which starts at file offset bufOff+r.
type parser struct {
	ra     io.ReaderAt
	size   int64
	buf    []byte
	bufOff int64
	r, w   int
}

func (p *parser) pos() int64       { return p.bufOff + int64(p.r) }
func (p *parser) remaining() int64 { return p.size - p.pos() }

// fits reports whether n items of at least per bytes each fit in the rest of
// the file (and in an int, so that they can be allocated).
func (p *parser) fits(n uint64, per int) bool {
	return n <= uint64(min(p.remaining(), math.MaxInt))/uint64(per)
}

// fill makes at least n bytes available in buf[r:w]. n must not exceed
// len(buf).
func (p *parser) fill(n int, field string) error {
	if p.w-p.r >= n {
		return nil
	}
	if int64(n) > p.remaining() {
		return formatErr(p.pos(), field, ErrTruncated, "need %d bytes, %d remain", n, p.remaining())
	}
	p.w = copy(p.buf, p.buf[p.r:p.w])
	p.bufOff += int64(p.r)
	p.r = 0
	end := int(min(int64(len(p.buf)), p.size-p.bufOff))
	m, err := p.ra.ReadAt(p.buf[p.w:end], p.bufOff+int64(p.w))
	if m < 0 || m > end-p.w {
		return fmt.Errorf("gguf: reading %s at offset %d: ReadAt returned %d for a %d-byte read", field, p.bufOff+int64(p.w), m, end-p.w)
	}
	p.w += m
	if p.w >= n {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return formatErr(p.bufOff+int64(p.w), field, ErrTruncated,
			"the reader ended before the declared file size %d", p.size)
	}
	return fmt.Errorf("gguf: reading %s at offset %d: %w", field, p.bufOff+int64(p.w), err)
}

// next returns the next n bytes (n <= 8) from the buffer, valid until the
// next read.
func (p *parser) next(n int, field string) ([]byte, error) {
	if err := p.fill(n, field); err != nil {
		return nil, err
	}
	b := p.buf[p.r : p.r+n]
	p.r += n
	return b, nil
}

func (p *parser) u32(field string) (uint32, error) {
	b, err := p.next(4, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(field string) (uint64, error) {
	b, err := p.next(8, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// bytes reads the next n bytes into a new slice that grows as they arrive.
func (p *parser) bytes(n int, field string) ([]byte, error) {
	b := make([]byte, 0, min(n, readBufSize))
	for len(b) < n {
		if err := p.fill(1, field); err != nil {
			return nil, err
		}
		k := min(p.w-p.r, n-len(b))
		b = append(b, p.buf[p.r:p.r+k]...)
		p.r += k
	}
	return b, nil
}

func (p *parser) str(field string) (string, error) {
	off := p.pos()
	n, err := p.u64(field)
	if err != nil {
		return "", err
	}
	if !p.fits(n, 1) {
		return "", formatErr(off, field, ErrTruncated,
			"string length %d exceeds the %d bytes remaining", n, p.remaining())
	}
	var b strings.Builder
	b.Grow(int(min(n, readBufSize)))
	for n > 0 {
		if err := p.fill(1, field); err != nil {
			return "", err
		}
		chunk := p.buf[p.r:min(p.w, p.r+int(min(n, math.MaxInt32)))]
		b.Write(chunk)
		p.r += len(chunk)
		n -= uint64(len(chunk))
	}
	return b.String(), nil
}

func (p *parser) valueType(field string) (ValueType, error) {
	off := p.pos()
	t, err := p.u32(field)
	if err != nil {
		return 0, err
	}
	if !ValueType(t).valid() {
		return 0, formatErr(off, field, ErrUnknownType, "metadata value type %d", t)
	}
	return ValueType(t), nil
}

func (p *parser) parse() (*File, error) {
	if err := p.header(); err != nil {
		return nil, err
	}
	f := &File{}
	off := p.pos()
	version, err := p.u32("header.version")
	if err != nil {
		return nil, err
	}
	if err := checkVersion(version); err != nil {
		return nil, formatErr(off, "header.version", ErrUnsupportedVersion, "%v", err)
	}
	f.Version = version
	nTensorsOff := p.pos()
	nTensors, err := p.u64("header.tensor_count")
	if err != nil {
		return nil, err
	}
	nKVOff := p.pos()
	nKV, err := p.u64("header.metadata_kv_count")
	if err != nil {
		return nil, err
	}
	// The smallest key/value is an empty key (8), a type (4) and a uint8 (1);
	// the smallest tensor info an empty name (8), n_dims (4), type (4) and
	// offset (8).
	const minKV, minTensor = 13, 24
	if !p.fits(nKV, minKV) {
		return nil, formatErr(nKVOff, "header.metadata_kv_count", ErrTruncated,
			"%d key/value pairs need at least %d bytes each, %d remain", nKV, minKV, p.remaining())
	}
	if !p.fits(nTensors, minTensor) {
		return nil, formatErr(nTensorsOff, "header.tensor_count", ErrTruncated,
			"%d tensor infos need at least %d bytes each, %d remain", nTensors, minTensor, p.remaining())
	}
	if err := p.metadata(f, int(nKV)); err != nil {
		return nil, err
	}
	if err := p.tensorInfos(f, int(nTensors)); err != nil {
		return nil, err
	}
	return f, nil
}

func (p *parser) header() error {
	n := int(min(p.size, int64(len(Magic))))
	b, err := p.bytes(n, "header.magic")
	if err != nil {
		return err
	}
	if string(b) != Magic[:n] {
		return formatErr(0, "header.magic", ErrBadMagic, "got %q, want %q", b, Magic)
	}
	if n < len(Magic) {
		return formatErr(0, "header.magic", ErrTruncated, "file is %d bytes long", p.size)
	}
	return nil
}

func checkVersion(v uint32) error {
	switch {
	case v == 2 || v == 3:
		return nil
	case v == 1:
		return errors.New("version 1 (it used 32-bit counts and lengths); only versions 2 and 3 are supported")
	case v&0xffff == 0 && (v>>24 == 2 || v>>24 == 3):
		return fmt.Errorf("version field %#x: big-endian GGUF files are not supported", v)
	}
	return fmt.Errorf("version %d; only versions 2 and 3 are supported", v)
}

func (p *parser) metadata(f *File, n int) error {
	f.Alignment = DefaultAlignment
	f.KV = make([]KV, 0, min(n, maxPrealloc))
	seen := make(map[string]struct{}, min(n, maxPrealloc))
	for i := range n {
		keyOff := p.pos()
		key, err := p.str(fmt.Sprintf("metadata[%d] key", i))
		if err != nil {
			return err
		}
		field := "metadata " + strconv.Quote(key)
		if _, dup := seen[key]; dup {
			return formatErr(keyOff, field, ErrDuplicate, "key %q appears twice", key)
		}
		seen[key] = struct{}{}
		t, err := p.valueType(field + " type")
		if err != nil {
			return err
		}
		valOff := p.pos()
		v, err := p.value(t, field, 0)
		if err != nil {
			return err
		}
		if key == AlignmentKey {
			a, err := alignmentOf(v)
			if err != nil {
				return formatErr(valOff, field, ErrAlignment, "%v", err)
			}
			f.Alignment = a
		}
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	return nil
}

// alignmentOf checks a general.alignment value: a uint32 power of two.
func alignmentOf(v Value) (int64, error) {
	a, ok := v.v.(uint32)
	if !ok {
		return 0, fmt.Errorf("%s is %s, want uint32", AlignmentKey, v.describe())
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("%s is %d, want a power of two", AlignmentKey, a)
	}
	return int64(a), nil
}

// value reads a value of type t; depth is the array nesting depth of the
// value's container (0 for a metadata value).
func (p *parser) value(t ValueType, field string, depth int) (Value, error) {
	if t == ValueArray {
		return p.array(field, depth+1)
	}
	if t == ValueString {
		s, err := p.str(field)
		return Value{v: s}, err
	}
	off := p.pos()
	b, err := p.next(elemSize(t), field)
	if err != nil {
		return Value{}, err
	}
	if t == ValueBool && b[0] > 1 {
		return Value{}, formatErr(off, field, ErrCorrupt, "bool byte is %d, want 0 or 1", b[0])
	}
	return scalarFrom(t, b), nil
}

// elemSize is the encoded size of a value of type t, or the smallest
// encoded size for strings (an empty one) and arrays (an empty one).
func elemSize(t ValueType) int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueArray:
		return 12
	}
	return 8
}

func scalarFrom(t ValueType, b []byte) Value {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return Value{v: b[0]}
	case ValueInt8:
		return Value{v: int8(b[0])}
	case ValueUint16:
		return Value{v: le.Uint16(b)}
	case ValueInt16:
		return Value{v: int16(le.Uint16(b))}
	case ValueUint32:
		return Value{v: le.Uint32(b)}
	case ValueInt32:
		return Value{v: int32(le.Uint32(b))}
	case ValueFloat32:
		return Value{v: math.Float32frombits(le.Uint32(b))}
	case ValueBool:
		return Value{v: b[0] == 1}
	case ValueUint64:
		return Value{v: le.Uint64(b)}
	case ValueInt64:
		return Value{v: int64(le.Uint64(b))}
	case ValueFloat64:
		return Value{v: math.Float64frombits(le.Uint64(b))}
	}
	panic("gguf: scalarFrom called with " + t.String()) // unreachable: callers pass scalar types
}

// array reads an array's element type, length and elements; depth is the
// array's own nesting depth, 1 for a metadata value.
func (p *parser) array(field string, depth int) (Value, error) {
	typeOff := p.pos()
	et, err := p.valueType(field + " array type")
	if err != nil {
		return Value{}, err
	}
	if et == ValueArray && depth >= maxArrayDepth {
		return Value{}, formatErr(typeOff, field, ErrCorrupt, "arrays nested more than %d deep", maxArrayDepth)
	}
	lenOff := p.pos()
	n64, err := p.u64(field + " array length")
	if err != nil {
		return Value{}, err
	}
	es := elemSize(et)
	if !p.fits(n64, es) {
		return Value{}, formatErr(lenOff, field, ErrTruncated,
			"array of %d %s needs at least %d bytes per element, %d bytes remain", n64, et, es, p.remaining())
	}
	n := int(n64)
	le := binary.LittleEndian
	switch et {
	case ValueUint8:
		s, err := p.bytes(n, field)
		return Value{v: s}, err
	case ValueInt8:
		return fixedArray(p, n, 1, field, func(b []byte) int8 { return int8(b[0]) })
	case ValueBool:
		off := p.pos()
		raw, err := p.bytes(n, field)
		if err != nil {
			return Value{}, err
		}
		s := make([]bool, n)
		for i, c := range raw {
			if c > 1 {
				return Value{}, formatErr(off+int64(i), field, ErrCorrupt, "bool element %d is %d, want 0 or 1", i, c)
			}
			s[i] = c == 1
		}
		return Value{v: s}, nil
	case ValueUint16:
		return fixedArray(p, n, 2, field, le.Uint16)
	case ValueInt16:
		return fixedArray(p, n, 2, field, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case ValueUint32:
		return fixedArray(p, n, 4, field, le.Uint32)
	case ValueInt32:
		return fixedArray(p, n, 4, field, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case ValueFloat32:
		return fixedArray(p, n, 4, field, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case ValueUint64:
		return fixedArray(p, n, 8, field, le.Uint64)
	case ValueInt64:
		return fixedArray(p, n, 8, field, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case ValueFloat64:
		return fixedArray(p, n, 8, field, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	case ValueString:
		s := make([]string, 0, min(n, maxPrealloc))
		for range n {
			x, err := p.str(field)
			if err != nil {
				return Value{}, err
			}
			s = append(s, x)
		}
		return Value{v: s}, nil
	}
	// et == ValueArray
	s := make([]Value, 0, min(n, maxPrealloc))
	for range n {
		x, err := p.array(field, depth+1)
		if err != nil {
			return Value{}, err
		}
		s = append(s, x)
	}
	return Value{v: s}, nil
}

// fixedArray decodes n elements of size bytes each straight from the buffer.
func fixedArray[T any](p *parser, n, size int, field string, dec func([]byte) T) (Value, error) {
	s := make([]T, 0, min(n, readBufSize/size))
	for len(s) < n {
		if err := p.fill(size, field); err != nil {
			return Value{}, err
		}
		k := min((p.w-p.r)/size, n-len(s))
		b := p.buf[p.r : p.r+k*size]
		for j := range k {
			s = append(s, dec(b[j*size:]))
		}
		p.r += k * size
	}
	return Value{v: s}, nil
}

func (p *parser) tensorInfos(f *File, n int) error {
	f.Tensors = make([]TensorInfo, 0, min(n, maxPrealloc))
	offFields := make([]int64, 0, min(n, maxPrealloc)) // where each tensor's offset field is, for errors
	rel := make([]uint64, 0, min(n, maxPrealloc))      // offsets relative to the data section
	seen := make(map[string]struct{}, min(n, maxPrealloc))
	for i := range n {
		var t TensorInfo
		nameOff := p.pos()
		name, err := p.str(fmt.Sprintf("tensor[%d] name", i))
		if err != nil {
			return err
		}
		field := "tensor " + strconv.Quote(name)
		if _, dup := seen[name]; dup {
			return formatErr(nameOff, field, ErrDuplicate, "tensor name %q appears twice", name)
		}
		seen[name] = struct{}{}
		t.Name = name

		dimsOff := p.pos()
		nd, err := p.u32(field + " n_dims")
		if err != nil {
			return err
		}
		if nd > maxDims {
			return formatErr(dimsOff, field+" n_dims", ErrBadShape, "%d dimensions, at most %d allowed", nd, maxDims)
		}
		t.Dims = make([]uint64, nd)
		for j := range t.Dims {
			if t.Dims[j], err = p.u64(field + " dims"); err != nil {
				return err
			}
		}
		typeOff := p.pos()
		typ, err := p.u32(field + " type")
		if err != nil {
			return err
		}
		t.Type = Type(typ)
		if !t.Type.Known() {
			return formatErr(typeOff, field+" type", ErrUnknownType, "ggml tensor type %d", typ)
		}
		if _, t.Size, err = tensorBytes(t.Type, t.Dims); err != nil {
			de := asDetail(err)
			return formatErr(dimsOff, field+" dims", de.sentinel, "dims %v of %s: %s", t.Dims, t.Type, de.msg)
		}
		offFields = append(offFields, p.pos())
		r, err := p.u64(field + " offset")
		if err != nil {
			return err
		}
		rel = append(rel, r)
		f.Tensors = append(f.Tensors, t)
	}

	pos := p.pos()
	if pos > math.MaxInt64-f.Alignment {
		return formatErr(pos, "tensor data", ErrTruncated, "no room for the data section")
	}
	f.DataOffset = alignUp(pos, f.Alignment)
	dataLen := p.size - f.DataOffset // may be negative when nothing follows the infos
	for i := range f.Tensors {
		t := &f.Tensors[i]
		field := "tensor " + strconv.Quote(t.Name) + " offset"
		if rel[i]%uint64(f.Alignment) != 0 {
			return formatErr(offFields[i], field, ErrAlignment, "offset %d is not a multiple of the alignment %d", rel[i], f.Alignment)
		}
		if dataLen < 0 || rel[i] > uint64(dataLen) || t.Size > dataLen-int64(rel[i]) {
			return formatErr(offFields[i], field, ErrTruncated,
				"%d bytes at offset %d into the data section (which starts at %d) run past the end of the %d-byte file",
				t.Size, rel[i], f.DataOffset, p.size)
		}
		t.Offset = f.DataOffset + int64(rel[i])
	}

	// Tensor data must not overlap.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset)
	})
	for k := 1; k < n; k++ {
		a, b := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if a.Offset+a.Size > b.Offset {
			return formatErr(offFields[order[k]], "tensor "+strconv.Quote(b.Name)+" offset", ErrCorrupt,
				"data [%d, %d) overlaps tensor %q at [%d, %d)", b.Offset, b.Offset+b.Size, a.Name, a.Offset, a.Offset+a.Size)
		}
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }
