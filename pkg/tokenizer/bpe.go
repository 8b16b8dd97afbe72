package tokenizer

import "strings"

// byteAlphabet[b] is GPT-2's printable stand-in for byte b: the printable
// bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves, and the other
// 68 bytes, in increasing order, get U+0100, U+0101, ... (so ' ' is "Ġ",
// '\n' is "Ċ").
var byteAlphabet, alphabetByte = func() (alpha [256]string, inv map[rune]byte) {
	inv = make(map[rune]byte, 256)
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !('!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF) {
			r = next
			next++
		}
		alpha[b] = string(r)
		inv[r] = byte(b)
	}
	return alpha, inv
}()

// ByteLevelToken returns the text that stands for byte b in a byte-level
// BPE vocabulary (GPT-2's bytes_to_unicode): "Ġ" for ' ', "Ċ" for '\n',
// the byte itself when printable.
func ByteLevelToken(b byte) string { return byteAlphabet[b] }

// decodeByteAlphabet maps a byte-level token's text back to its bytes.
// Characters outside the alphabet are kept as they are.
func decodeByteAlphabet(tok string) string {
	var b strings.Builder
	b.Grow(len(tok))
	for _, r := range tok {
		if c, ok := alphabetByte[r]; ok {
			b.WriteByte(c)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// appendByteLevel encodes text with byte-level BPE: pre-tokenize, then merge
// the bytes of each pre-token by rank.
func (t *Tokenizer) appendByteLevel(dst []int, text string) []int {
	var m merger
	var buf []byte
	for i := 0; i < len(text); {
		j := t.pre.next(text, i)
		word := text[i:j]
		i = j
		if t.ignoreMerges {
			buf = buf[:0]
			for k := 0; k < len(word); k++ {
				buf = append(buf, byteAlphabet[word[k]]...)
			}
			if id, ok := t.pieces[string(buf)]; ok {
				dst = append(dst, int(id))
				continue
			}
		}
		dst = t.appendWord(dst, word, &m)
	}
	return dst
}

// appendWord merges the bytes of one pre-token, lowest rank first, ties to
// the leftmost pair.
func (t *Tokenizer) appendWord(dst []int, word string, m *merger) []int {
	if len(word) == 1 {
		return append(dst, t.byteID(word[0]))
	}
	checkLen(len(word))
	syms := m.syms[:0]
	for i := 0; i < len(word); i++ {
		k := int32(i)
		syms = append(syms, symbol{start: k, end: k + 1, id: int32(t.byteID(word[i]))})
	}
	m.syms = syms
	return t.mergeRanked(dst, m)
}

// mergeRanked links m.syms (start, end and id set, in text order), merges
// adjacent pairs by the rank of their merge, lowest first and ties to the
// leftmost pair, and appends the ids that remain.
func (t *Tokenizer) mergeRanked(dst []int, m *merger) []int {
	syms := m.syms
	if len(syms) == 0 {
		return dst
	}
	for k := range syms {
		syms[k].prev, syms[k].next = int32(k)-1, int32(k)+1
	}
	syms[len(syms)-1].next = -1
	pair := func(l, r int32) (bigram, bool) {
		mg, ok := t.merges[pairKey(syms[l].id, syms[r].id)]
		if !ok {
			return bigram{}, false
		}
		return bigram{key: float32(mg.rank), left: l, right: r, end: syms[r].end, id: mg.id}, true
	}
	m.heap = m.heap[:0]
	for k := int32(0); k+1 < int32(len(syms)); k++ {
		if b, ok := pair(k, k+1); ok {
			m.heap = append(m.heap, b)
		}
	}
	m.run(pair)
	for k := int32(0); k >= 0; k = syms[k].next {
		dst = append(dst, int(syms[k].id))
	}
	return dst
}

// byteID returns the token of byte b, or UNK if the vocabulary has none
// (New guarantees one of the two).
func (t *Tokenizer) byteID(b byte) int {
	if id := t.byteTok[b]; id >= 0 {
		return int(id)
	}
	return t.unk
}
