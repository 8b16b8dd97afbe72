package tokenizer

import (
	"math"
	"strings"
	"unicode/utf8"
)

// appendSentencePiece encodes a stretch of text with SentencePiece-style
// BPE. With prefix, " " is prepended; then spaces are spelled "▁" if the
// vocabulary does so, and, with SplitOnSpace, the text is cut before each
// space and every piece is merged on its own.
func (t *Tokenizer) appendSentencePiece(dst []int, text string, prefix bool) []int {
	s := text
	if prefix {
		s = " " + text
	}
	space := " "
	if t.metaspace {
		s = strings.ReplaceAll(s, " ", metaspace)
		space = metaspace
	}
	checkLen(len(s))
	var m merger
	if !t.splitOnSpace {
		return t.appendSPMUnit(dst, s, &m)
	}
	for len(s) > 0 {
		// Each space starts a new unit (Hugging Face's MergedWithNext).
		k := len(space)
		if !strings.HasPrefix(s, space) {
			_, k = utf8.DecodeRuneInString(s)
		}
		j := strings.Index(s[k:], space)
		if j < 0 {
			j = len(s)
		} else {
			j += k
		}
		dst = t.appendSPMUnit(dst, s[:j], &m)
		s = s[j:]
	}
	return dst
}

// appendSPMUnit merges one unit of text by score or, for a vocabulary
// with merges, by rank.
func (t *Tokenizer) appendSPMUnit(dst []int, s string, m *merger) []int {
	if t.ranked {
		return t.appendRankedChars(dst, s, m)
	}
	return t.appendScored(dst, s, m)
}

// appendScored encodes s with score-driven BPE: split into UTF-8
// characters (an invalid byte is a character of its own), then merge the
// adjacent pair whose concatenation is a piece with the highest score,
// leftmost first, until no pair is a piece. A character that is not a piece
// can still merge into a piece; one that stays alone falls back to its byte
// tokens, or to UNK when the vocabulary has no byte token for one of its
// bytes. For vocabularies whose pieces consist of characters that are
// themselves pieces (all real ones), this is exactly llama2.c's run.c, which
// applies the byte fallback before merging, and llama.cpp's SPM tokenizer,
// which applies it after.
func (t *Tokenizer) appendScored(dst []int, s string, m *merger) []int {
	syms := m.syms[:0]
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
	m.heap = m.heap[:0]
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

// appendRankedChars encodes s as Hugging Face's BPE model with
// byte_fallback does: each character becomes its token, else its byte
// tokens, else UNK (one per run with FuseUnknown); then the ranked merges
// apply. With IgnoreMerges, s is first looked up whole.
func (t *Tokenizer) appendRankedChars(dst []int, s string, m *merger) []int {
	if t.ignoreMerges {
		if id, ok := t.pieces[s]; ok {
			return append(dst, int(id))
		}
	}
	syms := m.syms[:0]
	add := func(start, end int, id int32) {
		syms = append(syms, symbol{start: int32(start), end: int32(end), id: id})
	}
	unkRun := false
	for i := 0; i < len(s); {
		n := 1
		if s[i] >= utf8.RuneSelf {
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		c := s[i : i+n]
		switch id, ok := t.pieces[c]; {
		case ok:
			add(i, i+n, id)
			unkRun = false
		case t.hasByteTokens(c):
			for k := i; k < i+n; k++ {
				add(k, k+1, t.byteTok[s[k]])
			}
			unkRun = false
		case unkRun && t.fuseUnknown:
			syms[len(syms)-1].end = int32(i + n)
		default:
			add(i, i+n, int32(t.unk)) // New guarantees unk >= 0 here
			unkRun = true
		}
		i += n
	}
	m.syms = syms
	return t.mergeRanked(dst, m)
}

// hasByteTokens reports whether every byte of c has a byte token.
func (t *Tokenizer) hasByteTokens(c string) bool {
	for i := 0; i < len(c); i++ {
		if t.byteTok[c[i]] < 0 {
			return false
		}
	}
	return true
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
