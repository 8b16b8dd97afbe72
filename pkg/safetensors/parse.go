package safetensors

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxHeaderSize is the largest header length Parse accepts, in bytes: the
// limit of the reference implementation. Real headers are far smaller, a few
// hundred bytes per tensor.
const MaxHeaderSize = 100_000_000

// metadataKey is the header key of the string metadata.
const metadataKey = "__metadata__"

// Parse reads and validates the header of the safetensors file that r holds;
// size is the file's length in bytes. It does not read tensor data, but checks
// that the tensors' data regions exactly tile the rest of the file.
//
// Parse reads the 8-byte header length and then the header, with two ReadAt
// calls. Malformed contents give a *FormatError wrapping a sentinel error
// (ErrHeader, ErrTruncated, ErrJSON, ...); a failing r gives its error,
// wrapped.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("safetensors: negative file size %d", size)
	}
	if size < 8 {
		return nil, errorf(0, "", ErrTruncated, "the file is %d bytes, too short for the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := readFull(r, lenBuf[:], 0, size, "header length"); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n > MaxHeaderSize:
		return nil, errorf(0, "", ErrHeader, "header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	case n > uint64(size-8):
		return nil, errorf(0, "", ErrTruncated, "header length %d exceeds the %d bytes after it", n, size-8)
	case n < 2:
		return nil, errorf(0, "", ErrHeader, "header length %d is too short for a JSON object", n)
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8, size, "header"); err != nil {
		return nil, err
	}
	return parseHeader(hdr, size)
}

// readFull reads len(p) bytes at off, which the caller has checked lie
// inside the declared size.
func readFull(r io.ReaderAt, p []byte, off, size int64, what string) error {
	m, err := r.ReadAt(p, off)
	switch {
	case m < 0 || m > len(p):
		return fmt.Errorf("safetensors: reading the %s at offset %d: ReadAt returned %d for a %d-byte read", what, off, m, len(p))
	case m == len(p):
		return nil
	case err == nil || errors.Is(err, io.EOF):
		return errorf(off+int64(m), "", ErrTruncated, "the reader ended in the %s, before the declared file size %d", what, size)
	}
	return fmt.Errorf("safetensors: reading the %s at offset %d: %w", what, off+int64(m), err)
}

// entry is a tensor being parsed, with the header position of its
// data_offsets for error messages.
type entry struct {
	TensorInfo
	begin, end int64 // data_offsets
	offsetsPos int
}

// parseHeader validates the JSON header hdr of a file of the given size.
func parseHeader(hdr []byte, size int64) (*File, error) {
	const base = 8 // file offset of hdr[0]
	if hdr[0] != '{' {
		r := &jsonReader{src: hdr, base: base}
		return nil, r.errAt(0, "", ErrHeader, "the header starts with %q, want a JSON object", hdr[0])
	}
	r, err := newJSONReader(hdr, base)
	if err != nil {
		return nil, err
	}
	if _, _, err := r.next(); err != nil { // '{'
		return nil, err
	}
	f := &File{DataOffset: base + int64(len(hdr))}
	var entries []entry
	seen := make(map[string]bool)
	for {
		name, p, ok, err := r.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if seen[name] {
			if name == metadataKey {
				return nil, r.errAt(p, "", ErrDuplicate, "%s given twice", metadataKey)
			}
			return nil, r.errAt(p, name, ErrDuplicate, "the name is given twice")
		}
		seen[name] = true
		if name == metadataKey {
			if f.Metadata, err = r.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		e, err := r.tensor(name)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if err := layOut(r, entries, size-f.DataOffset); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, len(entries))
	for i, e := range entries {
		f.Tensors[i] = e.TensorInfo
		f.Tensors[i].Offset = f.DataOffset + e.begin
	}
	return f, nil
}

// metadata reads the value of "__metadata__": an object of strings, or null.
func (r *jsonReader) metadata() (map[string]string, error) {
	tok, p, err := r.next()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, r.errAt(p, "", ErrMetadata, "%s is %s, want an object of strings", metadataKey, describe(tok))
	}
	m := make(map[string]string)
	for {
		key, p, ok, err := r.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			return m, nil
		}
		if _, dup := m[key]; dup {
			return nil, r.errAt(p, "", ErrDuplicate, "%s key %q given twice", metadataKey, key)
		}
		tok, p, err := r.next()
		if err != nil {
			return nil, err
		}
		s, isString := tok.(string)
		if !isString {
			return nil, r.errAt(p, "", ErrMetadata, "%s[%q] is %s, want a string", metadataKey, key, describe(tok))
		}
		m[key] = s
	}
}

// tensor reads the entry of the tensor called name and checks that its
// dtype, shape and data_offsets agree; layOut checks the offsets against the
// other tensors.
func (r *jsonReader) tensor(name string) (entry, error) {
	e := entry{TensorInfo: TensorInfo{Name: name}, offsetsPos: -1}
	tok, start, err := r.next()
	if err != nil {
		return e, err
	}
	if tok != json.Delim('{') {
		return e, r.errAt(start, name, ErrHeader, "the entry is %s, want an object with dtype, shape and data_offsets", describe(tok))
	}
	var haveDType, haveShape bool
	seen := make(map[string]bool, 3)
	for {
		key, p, ok, err := r.key()
		if err != nil {
			return e, err
		}
		if !ok {
			break
		}
		if seen[key] {
			return e, r.errAt(p, name, ErrDuplicate, "key %q given twice", key)
		}
		seen[key] = true
		tok, p, err := r.next()
		if err != nil {
			return e, err
		}
		switch key {
		case "dtype":
			s, isString := tok.(string)
			if !isString {
				return e, r.errAt(p, name, ErrDType, "dtype is %s, want a string", describe(tok))
			}
			if !DType(s).Known() {
				return e, r.errAt(p, name, ErrDType, "unknown dtype %q", s)
			}
			e.DType, haveDType = DType(s), true
		case "shape":
			if e.Shape, err = r.ints(tok, p, name, ErrShape, "shape", -1); err != nil {
				return e, err
			}
			if e.Shape == nil {
				e.Shape = []int64{}
			}
			haveShape = true
		case "data_offsets":
			offs, err := r.ints(tok, p, name, ErrOffsets, "data_offsets", 2)
			if err != nil {
				return e, err
			}
			e.begin, e.end, e.offsetsPos = offs[0], offs[1], p
		default: // unknown keys are allowed, as in the reference implementation
			if err := r.skip(tok); err != nil {
				return e, err
			}
		}
	}
	switch {
	case !haveDType:
		return e, r.errAt(start, name, ErrDType, "the entry has no dtype")
	case !haveShape:
		return e, r.errAt(start, name, ErrShape, "the entry has no shape")
	case e.offsetsPos < 0:
		return e, r.errAt(start, name, ErrOffsets, "the entry has no data_offsets")
	}
	size, msg := byteSize(e.DType, e.Shape)
	if msg != "" {
		return e, r.errAt(start, name, ErrShape, "%s", msg)
	}
	if e.end < e.begin {
		return e, r.errAt(e.offsetsPos, name, ErrOffsets, "data_offsets [%d, %d] end before they begin", e.begin, e.end)
	}
	if e.end-e.begin != size {
		return e, r.errAt(e.offsetsPos, name, ErrOffsets, "data_offsets [%d, %d] span %d bytes, but %s %v needs %d",
			e.begin, e.end, e.end-e.begin, e.DType, e.Shape, size)
	}
	e.Size = size
	return e, nil
}

// ints reads an array of non-negative integers whose first token, at p, was
// tok. want is the required length, or -1 for any.
func (r *jsonReader) ints(tok json.Token, p int, name string, sentinel error, field string, want int) ([]int64, error) {
	if tok != json.Delim('[') {
		return nil, r.errAt(p, name, sentinel, "%s is %s, want an array of integers", field, describe(tok))
	}
	var out []int64
	for r.more() {
		tok, p, err := r.next()
		if err != nil {
			return nil, err
		}
		if want >= 0 && len(out) == want {
			return nil, r.errAt(p, name, sentinel, "%s has more than %d elements", field, want)
		}
		n, msg := int64Of(tok)
		if msg != "" {
			return nil, r.errAt(p, name, sentinel, "%s[%d] is %s", field, len(out), msg)
		}
		out = append(out, n)
	}
	if _, _, err := r.next(); err != nil { // ']'
		return nil, err
	}
	if want >= 0 && len(out) != want {
		return nil, r.errAt(p, name, sentinel, "%s has length %d, want %d", field, len(out), want)
	}
	return out, nil
}

// layOut sorts entries by data offset and checks that their regions follow
// one another from 0 to dataSize without gaps or overlaps.
func layOut(r *jsonReader, entries []entry, dataSize int64) error {
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.Name, b.Name))
	})
	var at int64 // end of the regions so far
	prev := ""
	for i, e := range entries {
		switch {
		case e.begin < at:
			return r.errAt(e.offsetsPos, e.Name, ErrOffsets, "data_offsets [%d, %d] overlap those of tensor %q, which end at %d",
				e.begin, e.end, prev, at)
		case e.begin > at && i == 0:
			return r.errAt(e.offsetsPos, e.Name, ErrOffsets, "data_offsets [%d, %d] leave a gap: the data section starts at 0 and no tensor covers [0, %d]",
				e.begin, e.end, e.begin)
		case e.begin > at:
			return r.errAt(e.offsetsPos, e.Name, ErrOffsets, "data_offsets [%d, %d] leave a gap after tensor %q, which ends at %d",
				e.begin, e.end, prev, at)
		case e.end > dataSize:
			return r.errAt(e.offsetsPos, e.Name, ErrTruncated, "data_offsets [%d, %d] end past the %d-byte data section (file size %d)",
				e.begin, e.end, dataSize, r.base+int64(len(r.src))+dataSize)
		}
		at, prev = e.end, e.Name
	}
	if at < dataSize {
		return errorf(r.base+int64(len(r.src))+at, "", ErrOffsets, "the tensors cover %d bytes of the %d-byte data section; the last %d bytes belong to no tensor",
			at, dataSize, dataSize-at)
	}
	return nil
}
