package tokenizer

import (
	"math"
	"strings"
	"unicode/utf8"
)

// appendSentencePiece encodes text with SentencePiece-style BPE: split into
// UTF-8 characters (an invalid byte is a character of its own), then merge
// the adjacent pair whose concatenation is a piece with the highest score,
// leftmost first, until no pair is a piece. A character that is not a piece
// can still merge into a piece; one that stays alone falls back to its byte
// tokens, or to UNK when the vocabulary has no byte token for one of its
// bytes. For vocabularies whose pieces consist of characters that are
// themselves pieces (all real ones), this is exactly llama2.c's run.c, which
// applies the byte fallback before merging, and llama.cpp's SPM tokenizer,
// which applies it after.
func (t *Tokenizer) appendSentencePiece(dst []int, text string, prefix bool) []int {
	s := text
	if prefix {
		s = " " + text
	}
	if t.metaspace {
		s = strings.ReplaceAll(s, " ", metaspace)
	}
	checkLen(len(s))

	var m merger
	syms := make([]symbol, 0, len(s))
	for i := 0; i < len(s); {
		n := 1
		if s[i] >= utf8.RuneSelf {
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		id, ok := t.pieces[s[i:i+n]]
		if !ok {
			id = -1
		}
		k := int32(len(syms))
		syms = append(syms, symbol{start: int32(i), end: int32(i + n), prev: k - 1, next: k + 1, id: id})
		i += n
	}
	syms[len(syms)-1].next = -1
	m.syms = syms

	pair := func(l, r int32) (bigram, bool) {
		id, ok := t.pieces[s[syms[l].start:syms[r].end]]
		if !ok {
			return bigram{}, false
		}
		return bigram{key: -t.scores[id], left: l, right: r, end: syms[r].end, id: id}, true
	}
	m.heap = make(bigramHeap, 0, len(syms))
	for k := int32(0); k+1 < int32(len(syms)); k++ {
		if b, ok := pair(k, k+1); ok {
			m.heap = append(m.heap, b)
		}
	}
	m.run(pair)

	for k := int32(0); k >= 0; k = syms[k].next {
		sym := syms[k]
		if sym.id >= 0 {
			dst = append(dst, int(sym.id))
			continue
		}
		dst = t.appendByteFallback(dst, s[sym.start:sym.end])
	}
	return dst
}

// appendByteFallback encodes the bytes of an unknown character as byte
// tokens, or as one UNK if a byte token is missing.
func (t *Tokenizer) appendByteFallback(dst []int, c string) []int {
	for i := 0; i < len(c); i++ {
		if t.byteTok[c[i]] < 0 {
			return append(dst, t.unk) // New guarantees unk >= 0 here
		}
	}
	for i := 0; i < len(c); i++ {
		dst = append(dst, int(t.byteTok[c[i]]))
	}
	return dst
}

// checkLen panics for texts whose offsets do not fit the int32 symbol
// spans; see Encode.
func checkLen(n int) {
	if n >= math.MaxInt32 {
		panic("tokenizer: text of 2 GiB or more")
	}
}
