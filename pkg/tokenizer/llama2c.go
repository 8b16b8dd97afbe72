package tokenizer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// FormatError describes a malformed llama2.c tokenizer file. It wraps
// ErrFormat.
type FormatError struct {
	Offset int64  // byte offset of the bad field
	Token  int    // token id whose entry is bad, -1 for the header
	Field  string // "max_token_length", "score", "length", "text", "vocab size", "size" or "trailing data"
	Msg    string
}

func (e *FormatError) Error() string {
	where := "header"
	if e.Token >= 0 {
		where = fmt.Sprintf("token %d", e.Token)
	}
	return fmt.Sprintf("%v: %s %s at offset %d: %s", ErrFormat, where, e.Field, e.Offset, e.Msg)
}

func (e *FormatError) Unwrap() error { return ErrFormat }

// ParseLlama2C reads a llama2.c tokenizer file (tokenizer.bin, tok512.bin)
// of size bytes: a little-endian int32 max_token_length, then for each id a
// float32 score, an int32 byte length and that many bytes of token text.
// vocabSize is the number of entries (the model's vocab_size); 0 reads
// entries until the end of the file. Every length is checked against the
// bytes left before anything is allocated for it, and bytes left after the
// last entry are an error. Errors are *FormatError (wrapping ErrFormat), or
// the reader's error.
//
// The result follows llama2.c's conventions: UNK 0, BOS 1, EOS 2 (when the
// vocabulary is that large), AddBOS and AddSpacePrefix set, plain spaces
// (SpaceIsMetaspace false) and no Types, so New detects the "<0xHH>" byte
// tokens by their spelling and marks BOS and EOS as Control.
func ParseLlama2C(r io.ReaderAt, size int64, vocabSize int) (Vocab, error) {
	if size < 0 {
		return Vocab{}, &FormatError{Offset: 0, Token: -1, Field: "size", Msg: fmt.Sprintf("negative file size %d", size)}
	}
	if vocabSize < 0 {
		return Vocab{}, &FormatError{Offset: 0, Token: -1, Field: "vocab size", Msg: fmt.Sprintf("negative vocab size %d", vocabSize)}
	}
	p := &llama2cReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(size, 64<<10))), size: size}
	maxLen, err := p.int32(-1, "max_token_length")
	if err != nil {
		return Vocab{}, err
	}
	if maxLen < 0 {
		return Vocab{}, &FormatError{Offset: 0, Token: -1, Field: "max_token_length", Msg: fmt.Sprintf("negative value %d", maxLen)}
	}
	const entryMin = 8 // score and length
	if vocabSize > 0 && int64(vocabSize) > (size-p.off)/entryMin {
		return Vocab{}, &FormatError{Offset: p.off, Token: -1, Field: "vocab size", Msg: fmt.Sprintf(
			"%d entries need at least %d bytes, %d left", vocabSize, int64(vocabSize)*entryMin, size-p.off)}
	}
	v := Vocab{
		Kind:           SentencePieceBPE,
		Tokens:         make([]string, 0, vocabSize),
		Scores:         make([]float32, 0, vocabSize),
		BOS:            -1,
		EOS:            -1,
		UNK:            -1,
		PAD:            -1,
		AddSpacePrefix: true,
	}
	var text []byte // reused read buffer
	for id := 0; vocabSize == 0 && p.off < size || id < vocabSize; id++ {
		bits, err := p.uint32(id, "score")
		if err != nil {
			return Vocab{}, err
		}
		n, err := p.int32(id, "length")
		if err != nil {
			return Vocab{}, err
		}
		if n < 0 || int64(n) > size-p.off {
			return Vocab{}, &FormatError{Offset: p.off - 4, Token: id, Field: "length", Msg: fmt.Sprintf(
				"length %d outside the %d bytes left", n, size-p.off)}
		}
		if int(n) > cap(text) {
			text = make([]byte, n)
		}
		if _, err := io.ReadFull(p.r, text[:n]); err != nil {
			return Vocab{}, p.readErr(id, "text", err)
		}
		p.off += int64(n)
		v.Tokens = append(v.Tokens, string(text[:n]))
		v.Scores = append(v.Scores, math.Float32frombits(bits))
	}
	if p.off != size {
		return Vocab{}, &FormatError{Offset: p.off, Token: -1, Field: "trailing data", Msg: fmt.Sprintf(
			"%d bytes after %d tokens (wrong vocab size?)", size-p.off, len(v.Tokens))}
	}
	n := len(v.Tokens)
	if n > 0 {
		v.UNK = 0
	}
	if n > 1 {
		v.BOS, v.AddBOS = 1, true
	}
	if n > 2 {
		v.EOS = 2
	}
	return v, nil
}

// llama2cReader reads little-endian fields and tracks the offset.
type llama2cReader struct {
	r    *bufio.Reader
	off  int64
	size int64
	buf  [4]byte
}

func (p *llama2cReader) uint32(id int, field string) (uint32, error) {
	if p.size-p.off < 4 {
		return 0, &FormatError{Offset: p.off, Token: id, Field: field, Msg: fmt.Sprintf(
			"need 4 bytes, %d left", p.size-p.off)}
	}
	if _, err := io.ReadFull(p.r, p.buf[:]); err != nil {
		return 0, p.readErr(id, field, err)
	}
	p.off += 4
	return binary.LittleEndian.Uint32(p.buf[:]), nil
}

func (p *llama2cReader) int32(id int, field string) (int32, error) {
	u, err := p.uint32(id, field)
	return int32(u), err
}

// readErr reports a reader that ends before size or fails.
func (p *llama2cReader) readErr(id int, field string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{Offset: p.off, Token: id, Field: field, Msg: "unexpected end of data (reader shorter than size)"}
	}
	return fmt.Errorf("tokenizer: reading llama2.c tokenizer, token %d %s at offset %d: %w", id, field, p.off, err)
}
