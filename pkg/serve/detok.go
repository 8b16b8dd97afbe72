package serve

import (
	"bytes"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// textStream turns a response's token ids into text as they come, and
// finds its stop strings.
//
// The text is the decode of the cumulative ids after the prompt's last
// token: Tokenizer.Decode is a concatenation of TokenPiece(prev, id), so
// appending each new piece to the bytes so far gives the decode of all
// ids without decoding them again. What push releases is the new suffix
// of that text cut where it is safe: never inside an incomplete UTF-8
// character (byte-level BPE and SentencePiece byte fallback split
// characters over tokens), and never within hold bytes of the end when
// stop strings are given (a stop string may be completing). So the
// released pieces, and then flush, concatenate to exactly text().
type textStream struct {
	tok   *tokenizer.Tokenizer
	prev  int
	buf   []byte
	sent  int
	stops [][]byte
	hold  int    // the longest stop string's length minus one
	stop  string // the stop string that ended the text
	// includeStop keeps the stop string that ended the text in it.
	includeStop bool
	// offsets asks push for each piece's offset (a count over the whole
	// text: only for logprobs).
	offsets bool
}

// newTextStream starts a text after the token prev (the prompt's last; -1
// at the start of a text) with the given stop strings (empty ones are
// dropped).
func newTextStream(tok *tokenizer.Tokenizer, prev int, stops []string) *textStream {
	t := &textStream{tok: tok, prev: prev}
	for _, s := range stops {
		if s != "" {
			t.stops = append(t.stops, []byte(s))
			t.hold = max(t.hold, len(s)-1)
		}
	}
	return t
}

// push adds id and returns its piece (its text after the previous token),
// the code points of text before the piece (with offsets set), and the
// text now released.
// When a stop string completes, the text is cut before it (after it with
// includeStop), everything before the cut is released, and stopped is true; push must not be called
// again.
func (t *textStream) push(id int) (piece string, offset int, delta string, stopped bool) {
	piece = t.tok.TokenPiece(t.prev, id)
	t.prev = id
	from := len(t.buf)
	if t.offsets {
		offset = utf8.RuneCount(t.buf)
	}
	t.buf = append(t.buf, piece...)
	if i := t.findStop(from); i >= 0 {
		// i ≥ t.sent: a stop string that ends past from starts at most
		// hold bytes before from, and release keeps hold bytes back.
		if t.includeStop {
			i += len(t.stop)
		}
		t.buf = t.buf[:i]
		return piece, offset, t.release(true), true
	}
	return piece, offset, t.release(false), false
}

// findStop returns where the earliest stop string that ends past from
// starts, or -1. One ending before from was found by an earlier push, so
// the search starts hold bytes before from.
func (t *textStream) findStop(from int) int {
	start, best := max(0, from-t.hold), -1
	for i, s := range t.stops {
		if j := bytes.Index(t.buf[start:], s); j >= 0 && (best < 0 || start+j < best) {
			best = start + j
			t.stop = string(t.stops[i])
		}
	}
	return best
}

// release returns the text not yet released that is safe to release (all
// of it when final).
func (t *textStream) release(final bool) string {
	end := len(t.buf)
	if !final {
		end = completeEnd(t.buf)
		end = max(t.sent, end-t.hold)
		for end > t.sent && end < len(t.buf) && !utf8.RuneStart(t.buf[end]) {
			end--
		}
	}
	out := string(t.buf[t.sent:end])
	t.sent = end
	return out
}

// flush releases the rest at the end of the response: an incomplete
// character that will never be completed goes out as it is (the JSON
// encoder writes U+FFFD for its bytes).
func (t *textStream) flush() string { return t.release(true) }

// text returns the whole text so far (cut at the stop string).
func (t *textStream) text() string { return string(t.buf) }

// completeEnd returns len(b), or where an incomplete UTF-8 character that
// more bytes could complete starts at the end of b. Bytes that no later
// byte can make valid count as complete: they are passed on.
func completeEnd(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
