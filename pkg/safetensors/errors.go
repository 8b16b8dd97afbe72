package safetensors

import (
	"fmt"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors. Every error about file contents or arguments that this
// package returns wraps exactly one of them; test with [errors.Is]. (Errors
// from the reader given to Parse or ParseIndex are passed on, wrapped.)
var (
	// ErrHeader: a header length that is too short or above MaxHeaderSize,
	// a header that is not a JSON object, a tensor entry that is not an
	// object, or a reserved or invalid name given to the Writer.
	ErrHeader = kvqerr.New("safetensors: bad header")
	// ErrTruncated: the file ends before the header or before the tensor
	// data the header declares.
	ErrTruncated = kvqerr.New("safetensors: truncated")
	// ErrJSON: the header or index is not valid UTF-8 JSON.
	ErrJSON = kvqerr.New("safetensors: invalid JSON")
	// ErrDType: a missing, non-string or unknown dtype.
	ErrDType = kvqerr.New("safetensors: bad dtype")
	// ErrShape: a missing or malformed shape, a negative dimension, an
	// element or bit count that overflows int64, a size that is not a whole
	// number of bytes, or (for the Writer) data of the wrong length.
	ErrShape = kvqerr.New("safetensors: bad shape")
	// ErrOffsets: missing or malformed data_offsets, offsets that end
	// before they begin or span a different number of bytes than the shape
	// and dtype need, and data regions that overlap, leave gaps or do not
	// cover the data section.
	ErrOffsets = kvqerr.New("safetensors: bad data offsets")
	// ErrDuplicate: a JSON object with a key given twice (a tensor name, a
	// metadata key, a field of a tensor entry or of an index), or a tensor
	// added to a Writer twice.
	ErrDuplicate = kvqerr.New("safetensors: duplicate key")
	// ErrMetadata: "__metadata__" is not an object, or one of its values is
	// not a string.
	ErrMetadata = kvqerr.New("safetensors: bad metadata")
	// ErrIndex: a malformed sharded-checkpoint index: no or an empty
	// weight_map, a shard file name that is not a plain base name, a bad
	// total_size, or an index that does not match its shards.
	ErrIndex = kvqerr.New("safetensors: bad index")
)

// FormatError describes malformed contents: where the problem is and what is
// wrong. Err is one of the package's sentinel errors, so
// errors.Is(err, ErrOffsets) works through a *FormatError.
type FormatError struct {
	// Offset is the byte offset of the problem from the start of the file
	// (for ParseIndex, of the index). For problems inside the JSON it is the
	// offset of the offending token.
	Offset int64
	// Line and Column (1-based; Column counts characters) locate Offset in
	// the JSON text of the header or index. Both are 0 when the problem is
	// not inside the JSON, such as a bad header length or uncovered data.
	Line, Column int
	// Tensor is the name of the tensor involved, or "".
	Tensor string
	// Detail says what is wrong, with the values involved.
	Detail string
	// Err is the sentinel error.
	Err error
}

func (e *FormatError) Error() string {
	s := e.Err.Error() + ": "
	if e.Tensor != "" {
		s += fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	s += e.Detail
	if e.Line > 0 {
		return s + fmt.Sprintf(" (line %d, column %d, offset %d)", e.Line, e.Column, e.Offset)
	}
	return s + fmt.Sprintf(" (offset %d)", e.Offset)
}

func (e *FormatError) Unwrap() error { return e.Err }

// errorf returns a FormatError at offset off that is not inside any JSON.
func errorf(off int64, tensor string, sentinel error, format string, args ...any) *FormatError {
	return &FormatError{Offset: off, Tensor: tensor, Detail: fmt.Sprintf(format, args...), Err: sentinel}
}

// argError is the error for a bad argument to the Writer: a sentinel plus a
// message, printed like fmt.Errorf("%w: ...", sentinel).
func argError(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// lineColumn returns the 1-based line and column (in characters) of byte p of
// src; p is clamped to [0, len(src)].
func lineColumn(src []byte, p int) (line, col int) {
	p = max(0, min(p, len(src)))
	line, start := 1, 0
	for i, c := range src[:p] {
		if c == '\n' {
			line++
			start = i + 1
		}
	}
	return line, 1 + utf8.RuneCount(src[start:p])
}
