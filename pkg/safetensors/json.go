package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// jsonReader walks JSON text token by token with a json.Decoder, so that it
// sees every key of an object (encoding/json's Unmarshal silently keeps the
// last of duplicate keys) and knows where each token starts.
type jsonReader struct {
	src  []byte
	base int64 // offset of src[0] in the file, for FormatError.Offset
	dec  *json.Decoder
}

// newJSONReader checks that src is valid UTF-8 and valid JSON, reporting the
// first problem with its position, and returns a reader positioned at the
// start of src.
func newJSONReader(src []byte, base int64) (*jsonReader, error) {
	r := &jsonReader{src: src, base: base}
	if !utf8.Valid(src) {
		i := 0
		for i < len(src) {
			c, n := utf8.DecodeRune(src[i:])
			if c == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return nil, r.errAt(i, "", ErrJSON, "invalid UTF-8 byte %#02x", src[min(i, len(src)-1)])
	}
	if !json.Valid(src) {
		// Unmarshal checks the whole text before decoding anything, and its
		// SyntaxError.Offset counts the offending byte.
		err := json.Unmarshal(src, new(struct{}))
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, r.errAt(int(se.Offset)-1, "", ErrJSON, "%s", se.Error())
		}
		return nil, r.errAt(len(src), "", ErrJSON, "malformed JSON")
	}
	r.dec = json.NewDecoder(bytes.NewReader(src))
	r.dec.UseNumber()
	return r, nil
}

// errAt returns a FormatError at byte p of the JSON text.
func (r *jsonReader) errAt(p int, tensor string, sentinel error, format string, args ...any) *FormatError {
	p = max(0, min(p, len(r.src)))
	e := errorf(r.base+int64(p), tensor, sentinel, format, args...)
	e.Line, e.Column = lineColumn(r.src, p)
	return e
}

// pos returns the offset in src where the next token starts.
func (r *jsonReader) pos() int {
	p := int(r.dec.InputOffset())
	for p < len(r.src) {
		switch r.src[p] {
		case ' ', '\t', '\n', '\r', ':', ',':
			p++
			continue
		}
		break
	}
	return p
}

// more reports whether the current object or array has another element.
func (r *jsonReader) more() bool { return r.dec.More() }

// next returns the next token and the offset where it starts. The text was
// validated up front, so errors are not expected; they are reported as
// ErrJSON all the same.
func (r *jsonReader) next() (json.Token, int, error) {
	p := r.pos()
	tok, err := r.dec.Token()
	if err != nil {
		return nil, p, r.errAt(p, "", ErrJSON, "%v", err)
	}
	return tok, p, nil
}

// key returns the next object key, or ok false at the end of the object
// (consuming the closing brace).
func (r *jsonReader) key() (key string, p int, ok bool, err error) {
	if !r.more() {
		_, p, err = r.next() // '}'
		return "", p, false, err
	}
	tok, p, err := r.next()
	if err != nil {
		return "", p, false, err
	}
	key, isString := tok.(string)
	if !isString {
		return "", p, false, r.errAt(p, "", ErrJSON, "object key is %s", describe(tok))
	}
	return key, p, true, nil
}

// skip consumes the rest of a value whose first token was tok.
func (r *jsonReader) skip(tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, _, err := r.next()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// describe names the kind of JSON value that starts with tok, for messages.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "the number " + string(v)
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "an unexpected token"
}

// int64Of returns tok as a non-negative int64, or a message saying why it is
// not one.
func int64Of(tok json.Token) (int64, string) {
	num, ok := tok.(json.Number)
	if !ok {
		return 0, describe(tok) + ", want a non-negative integer"
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	switch {
	case err == nil && n < 0, errors.Is(err, strconv.ErrRange) && num[0] == '-':
		return 0, "the number " + string(num) + ", which is negative"
	case errors.Is(err, strconv.ErrRange):
		return 0, "the number " + string(num) + ", which overflows int64"
	case err != nil:
		return 0, "the number " + string(num) + ", want a non-negative integer"
	}
	return n, ""
}
