package gguf

import (
	"errors"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors. Every error about file contents or arguments that this
// package returns wraps exactly one of them; test with [errors.Is]. (Errors
// from the io.ReaderAt given to Parse are passed on, wrapped.)
var (
	// ErrBadMagic: the file does not start with "GGUF".
	ErrBadMagic = kvqerr.New("gguf: bad magic")
	// ErrUnsupportedVersion: a version other than 2 or 3, including the
	// 32-bit-count version 1 and big-endian files.
	ErrUnsupportedVersion = kvqerr.New("gguf: unsupported version")
	// ErrTruncated: the file ends before a field, or a count or length
	// declares more data than the file has left.
	ErrTruncated = kvqerr.New("gguf: truncated")
	// ErrUnknownType: an unknown metadata value type or ggml tensor type.
	ErrUnknownType = kvqerr.New("gguf: unknown type")
	// ErrBadShape: too many or zero-length dimensions, an element count that
	// overflows, or a row length that is not a whole number of blocks.
	ErrBadShape = kvqerr.New("gguf: bad tensor shape")
	// ErrAlignment: general.alignment is not a uint32 power of two, or a
	// tensor offset is not a multiple of it.
	ErrAlignment = kvqerr.New("gguf: bad alignment")
	// ErrDuplicate: a metadata key or tensor name occurs twice.
	ErrDuplicate = kvqerr.New("gguf: duplicate name")
	// ErrCorrupt: other malformed data, such as a bool that is neither 0
	// nor 1, arrays nested too deeply or tensors whose data overlap.
	ErrCorrupt = kvqerr.New("gguf: malformed data")
	// ErrKeyNotFound: a typed look-up found no such metadata key.
	ErrKeyNotFound = kvqerr.New("gguf: key not found")
	// ErrWrongType: a typed look-up found a value of another type.
	ErrWrongType = kvqerr.New("gguf: wrong value type")
	// ErrOutOfRange: a typed look-up found a value that does not fit the
	// requested type, such as a negative count.
	ErrOutOfRange = kvqerr.New("gguf: value out of range")
)

// FormatError describes malformed file contents: where the problem is and
// what is wrong. Err is one of the package's sentinel errors, so
// errors.Is(err, ErrTruncated) works through a *FormatError.
type FormatError struct {
	Offset int64  // byte offset of the offending field from the start of the file
	Field  string // the field, e.g. "header.version" or `tensor "output.weight" dims`
	Detail string // what is wrong, with the values involved
	Err    error  // the sentinel error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", e.Err, e.Field, e.Offset, e.Detail)
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(off int64, field string, err error, format string, args ...any) *FormatError {
	return &FormatError{Offset: off, Field: field, Detail: fmt.Sprintf(format, args...), Err: err}
}

// detailError is a sentinel plus a message; Error prints both, like
// fmt.Errorf("%w: ...", sentinel), and Parse moves the two parts into a
// FormatError.
type detailError struct {
	sentinel error
	msg      string
}

func (e *detailError) Error() string { return e.sentinel.Error() + ": " + e.msg }
func (e *detailError) Unwrap() error { return e.sentinel }

func newError(sentinel error, format string, args ...any) *detailError {
	return &detailError{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}
}

// asDetail splits err into sentinel and message.
func asDetail(err error) *detailError {
	var de *detailError
	if errors.As(err, &de) {
		return de
	}
	return &detailError{sentinel: ErrCorrupt, msg: err.Error()}
}
