package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Writer builds a safetensors file. It is meant for tests and small
// fixtures: it keeps references to the tensor data until WriteTo.
//
// Add records the first error (an unknown dtype, a duplicate name, data that
// does not match the shape, ...) and returns it; later calls are then ignored
// and WriteTo returns that error. Every file a Writer writes without error is
// accepted by Parse.
//
// WriteTo lays the tensors out by decreasing element size, and in the order
// they were added within one size, so that every tensor's data is aligned to
// its element size; the header is padded with spaces to a multiple of 8
// bytes, as the reference implementation does.
type Writer struct {
	meta    map[string]string
	tensors []wtensor
	names   map[string]struct{}
	err     error
}

type wtensor struct {
	name  string
	dtype DType
	shape []int64
	data  []byte
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{names: make(map[string]struct{})}
}

// Add adds a tensor. data must hold exactly the tensor's bytes: its elements,
// row-major, little-endian, densely packed for sub-byte dtypes. An empty
// shape is a scalar. The name must be valid UTF-8 and not "__metadata__".
func (w *Writer) Add(name string, dtype DType, shape []int64, data []byte) error {
	if w.err != nil {
		return w.err
	}
	w.err = w.add(name, dtype, shape, data)
	return w.err
}

func (w *Writer) add(name string, dtype DType, shape []int64, data []byte) error {
	switch {
	case name == metadataKey:
		return argError(ErrHeader, "tensor name %q is reserved", name)
	case !utf8.ValidString(name):
		return argError(ErrHeader, "tensor name %q is not valid UTF-8", name)
	case !dtype.Known():
		return argError(ErrDType, "tensor %q: unknown dtype %q", name, dtype)
	}
	if _, dup := w.names[name]; dup {
		return argError(ErrDuplicate, "tensor %q added twice", name)
	}
	size, msg := byteSize(dtype, shape)
	if msg != "" {
		return argError(ErrShape, "tensor %q: %s", name, msg)
	}
	if int64(len(data)) != size {
		return argError(ErrShape, "tensor %q: %d bytes of data, but %s %v needs %d", name, len(data), dtype, shape, size)
	}
	w.names[name] = struct{}{}
	w.tensors = append(w.tensors, wtensor{name, dtype, slices.Clone(shape), data})
	return nil
}

// SetMetadata sets a "__metadata__" key; setting a key again replaces its
// value. A file gets a "__metadata__" object only if SetMetadata was called.
// Keys and values must be valid UTF-8.
func (w *Writer) SetMetadata(key, value string) {
	if w.err != nil {
		return
	}
	if !utf8.ValidString(key) || !utf8.ValidString(value) {
		w.err = argError(ErrMetadata, "metadata %q: %q is not valid UTF-8", key, value)
		return
	}
	if w.meta == nil {
		w.meta = make(map[string]string)
	}
	w.meta[key] = value
}

// WriteTo writes the file to dst and returns the number of bytes written.
func (w *Writer) WriteTo(dst io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	order := slices.Clone(w.tensors)
	slices.SortStableFunc(order, func(a, b wtensor) int {
		ba, _ := a.dtype.Bits()
		bb, _ := b.dtype.Bits()
		return bb - ba
	})

	hdr := []byte{'{'}
	if w.meta != nil {
		hdr = appendString(hdr, metadataKey)
		hdr = append(hdr, ":{"...)
		for i, k := range slices.Sorted(maps.Keys(w.meta)) {
			if i > 0 {
				hdr = append(hdr, ',')
			}
			hdr = appendString(hdr, k)
			hdr = append(hdr, ':')
			hdr = appendString(hdr, w.meta[k])
		}
		hdr = append(hdr, '}')
	}
	var at int64
	for i, t := range order {
		if i > 0 || w.meta != nil {
			hdr = append(hdr, ',')
		}
		hdr = appendString(hdr, t.name)
		hdr = append(hdr, `:{"dtype":`...)
		hdr = appendString(hdr, string(t.dtype))
		hdr = append(hdr, `,"shape":[`...)
		for j, d := range t.shape {
			if j > 0 {
				hdr = append(hdr, ',')
			}
			hdr = strconv.AppendInt(hdr, d, 10)
		}
		hdr = append(hdr, `],"data_offsets":[`...)
		hdr = strconv.AppendInt(hdr, at, 10)
		hdr = append(hdr, ',')
		at += int64(len(t.data))
		hdr = strconv.AppendInt(hdr, at, 10)
		hdr = append(hdr, "]}"...)
	}
	hdr = append(hdr, '}')
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	if len(hdr) > MaxHeaderSize {
		return 0, argError(ErrHeader, "the header would be %d bytes, above MaxHeaderSize", len(hdr))
	}

	var total int64
	write := func(p []byte) error {
		n, err := dst.Write(p)
		total += int64(n)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		return err
	}
	if err := write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))); err != nil {
		return total, err
	}
	if err := write(hdr); err != nil {
		return total, err
	}
	for _, t := range order {
		if err := write(t.data); err != nil {
			return total, err
		}
	}
	return total, nil
}

// appendString appends s as a JSON string. s is valid UTF-8.
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}
