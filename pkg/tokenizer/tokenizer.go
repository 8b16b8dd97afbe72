package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is
// immutable after New and safe for concurrent use.
type Tokenizer struct {
	kind   Kind
	tokens []string
	types  []TokenType
	scores []float32 // nil for byte-level vocabularies without scores

	bos, eos, unk, pad int
	addBOS, addEOS     bool
	addSpacePrefix     bool // SentencePiece only
	metaspace          bool // SentencePiece only: " " is spelled "▁"
	prefixRule         PrefixRule
	splitOnSpace       bool // SentencePiece only: merge each "▁word" alone
	ranked             bool // SentencePiece only: merge by rank (Hugging Face BPE)
	fuseUnknown        bool // ranked SentencePiece: one UNK per run of unknown characters
	pre                preStyle
	ignoreMerges       bool // look a pre-token (merge unit) up whole first
	nfc                bool // normalize ordinary text to NFC

	// pieces maps the token texts that merging may produce to their ids:
	// Normal tokens, plus UserDefined ones for SentencePiece.
	pieces map[string]int32
	// byteTok[b] is the token for byte b: the "<0xHH>" token for
	// SentencePiece, the byte-alphabet token for byte-level BPE; -1 if none.
	byteTok [256]int32
	merges  map[uint64]merge // ranked merges: pair of ids -> rank and result

	special specialMatcher
	text    []string // what Decode emits per id
	rawText []string // what DecodeWithSpecials emits per id
}

// merge is one byte-level BPE merge: its rank and the id it produces.
type merge struct {
	rank, id int32
}

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence id, or -1.
func (t *Tokenizer) BOS() int { return t.bos }

// AddsBOS reports whether Encode with addSpecial starts with BOS.
func (t *Tokenizer) AddsBOS() bool { return t.addBOS && t.bos >= 0 }

// EOS returns the end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int { return t.eos }

// Kind returns the tokenization algorithm.
func (t *Tokenizer) Kind() Kind { return t.kind }

// Token returns the vocabulary text of id as stored (byte-alphabet or "▁"
// spelling, "<0xHH>" for byte tokens), or "" if id is out of range.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// TokenType returns the role of id, or 0 if id is out of range.
func (t *Tokenizer) TokenType(id int) TokenType {
	if id < 0 || id >= len(t.types) {
		return 0
	}
	return t.types[id]
}

// Encode returns the token ids of text. Special-token text inside text is
// encoded as ordinary text. With addSpecial, BOS and EOS are added as the
// vocabulary's AddBOS and AddEOS say. Encode("", true) is just [BOS] (when
// AddBOS is set). Encode panics if text is 2 GiB or longer: its offsets are
// kept in int32 to halve the working memory.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids := make([]int, 0, len(text)/3+2)
	ids = t.appendBOS(ids, addSpecial)
	ids = t.appendText(ids, text, true)
	return t.appendEOS(ids, addSpecial)
}

// EncodeWithSpecials is Encode, except that the texts of Control, Unknown
// and UserDefined tokens inside text (such as "<|eot_id|>" or "<s>") become
// their ids. Where several special texts could match, the leftmost match
// wins and, among those starting there, the longest. For a SentencePiece
// vocabulary with AddSpacePrefix, each stretch of text that starts the input
// or follows a special token gets the prefix space, as in llama.cpp, unless
// the vocabulary's PrefixRule says otherwise. NFC normalization, where the
// vocabulary asks for it, applies to each stretch between special tokens.
func (t *Tokenizer) EncodeWithSpecials(text string, addSpecial bool) []int {
	ids := make([]int, 0, len(text)/3+2)
	ids = t.appendBOS(ids, addSpecial)
	start := 0 // start of the pending ordinary text
	for i := 0; i < len(text); {
		id, n := t.special.match(text, i)
		if n == 0 {
			i++
			continue
		}
		ids = t.appendText(ids, text[start:i], start == 0)
		ids = append(ids, int(id))
		i += n
		start = i
	}
	ids = t.appendText(ids, text[start:], start == 0)
	return t.appendEOS(ids, addSpecial)
}

func (t *Tokenizer) appendBOS(ids []int, addSpecial bool) []int {
	if addSpecial && t.addBOS {
		ids = append(ids, t.bos)
	}
	return ids
}

func (t *Tokenizer) appendEOS(ids []int, addSpecial bool) []int {
	if addSpecial && t.addEOS {
		ids = append(ids, t.eos)
	}
	return ids
}

// appendText encodes a stretch of ordinary text; atStart says that it
// begins the input (for PrefixFirstOnly).
func (t *Tokenizer) appendText(dst []int, text string, atStart bool) []int {
	if text == "" {
		return dst
	}
	if t.nfc && !norm.NFC.IsNormalString(text) {
		text = norm.NFC.String(text)
	}
	if t.kind == SentencePieceBPE {
		return t.appendSentencePiece(dst, text, t.wantPrefix(text, atStart))
	}
	return t.appendByteLevel(dst, text)
}

// wantPrefix applies AddSpacePrefix and PrefixRule to a non-empty stretch.
func (t *Tokenizer) wantPrefix(text string, atStart bool) bool {
	if !t.addSpacePrefix {
		return false
	}
	if t.prefixRule == PrefixEachStretch {
		return true
	}
	// Hugging Face's Metaspace replaces spaces first and then prepends
	// only to text that does not start with the replacement.
	if text[0] == ' ' || t.metaspace && strings.HasPrefix(text, metaspace) {
		return false
	}
	return t.prefixRule == PrefixUnlessSpace || atStart
}

// Decode returns the text of ids. Byte tokens are reassembled into their
// bytes, "▁" becomes " ", Control, Unknown and Unused tokens produce
// nothing, and ids outside [0, VocabSize) are skipped. For a SentencePiece
// vocabulary with AddSpacePrefix, ids is taken to start at the beginning of
// a text: the first id, and every id that directly follows BOS, loses one
// leading space. Decode(ids) equals the concatenation of
// TokenPiece(prev, id) over ids with prev starting at -1. The result is not
// necessarily valid UTF-8 when ids split a character's byte tokens.
func (t *Tokenizer) Decode(ids []int) string {
	return t.decode(ids, t.text)
}

// DecodeWithSpecials is Decode, except that Control and Unknown tokens
// produce their vocabulary text (for example "<|eot_id|>").
func (t *Tokenizer) DecodeWithSpecials(ids []int) string {
	return t.decode(ids, t.rawText)
}

func (t *Tokenizer) decode(ids []int, text []string) string {
	var b strings.Builder
	prev := -1
	for _, id := range ids {
		b.WriteString(t.piece(prev, id, text))
		prev = id
	}
	return b.String()
}

// TokenPiece returns the text of id when it follows prevID, for streaming
// generation, with llama2.c's semantics: after BOS (or at the start, prevID
// -1) a SentencePiece vocabulary with AddSpacePrefix drops one leading
// space; a byte token yields its raw byte, and a byte-level token its raw
// bytes, either of which may be an incomplete part of a UTF-8 character
// (a Decoder returns only whole characters); Control, Unknown and Unused
// tokens and out-of-range ids yield "".
func (t *Tokenizer) TokenPiece(prevID, id int) string {
	return t.piece(prevID, id, t.text)
}

func (t *Tokenizer) piece(prev, id int, text []string) string {
	if id < 0 || id >= len(text) {
		return ""
	}
	s := text[id]
	if t.addSpacePrefix && (prev < 0 || prev == t.bos) && s != "" && s[0] == ' ' {
		s = s[1:]
	}
	return s
}

// initPieces precomputes the decoded text of every token.
func (t *Tokenizer) initPieces() {
	t.text = make([]string, len(t.tokens))
	t.rawText = make([]string, len(t.tokens))
	for id, tok := range t.tokens {
		var s string
		switch t.types[id] {
		case Normal:
			if t.kind == ByteLevelBPE {
				s = decodeByteAlphabet(tok)
			} else if t.metaspace {
				s = strings.ReplaceAll(tok, metaspace, " ")
			} else {
				s = tok
			}
		case UserDefined:
			s = tok
		case Byte:
			if b, ok := parseByteToken(tok); ok {
				s = byteStrings[b]
			}
		}
		t.text[id] = s
		t.rawText[id] = s
		if typ := t.types[id]; typ == Control || typ == Unknown {
			t.rawText[id] = tok
		}
	}
}

// byteStrings[b] is the one-byte string b, shared to avoid allocations.
var byteStrings = func() (s [256]string) {
	var all [256]byte
	for i := range all {
		all[i] = byte(i)
	}
	str := string(all[:])
	for i := range s {
		s[i] = str[i : i+1]
	}
	return s
}()

// specialMatcher finds special-token texts in a string.
type specialMatcher struct {
	// byFirst[c] lists the special tokens whose text starts with byte c,
	// longest first, then lowest id.
	byFirst [256][]int32
	tokens  []string
}

func (t *Tokenizer) initSpecials() {
	m := &t.special
	m.tokens = t.tokens
	seen := make(map[string]bool)
	for id, tok := range t.tokens {
		switch t.types[id] {
		case Control, Unknown, UserDefined:
		default:
			continue
		}
		if tok == "" || seen[tok] {
			continue
		}
		seen[tok] = true
		m.byFirst[tok[0]] = append(m.byFirst[tok[0]], int32(id))
	}
	for c := range m.byFirst {
		slices.SortStableFunc(m.byFirst[c], func(a, b int32) int {
			return len(t.tokens[b]) - len(t.tokens[a])
		})
	}
}

// match returns the longest special token starting at s[i] and its length,
// or n == 0 if none.
func (m *specialMatcher) match(s string, i int) (id int32, n int) {
	for _, id := range m.byFirst[s[i]] {
		if strings.HasPrefix(s[i:], m.tokens[id]) {
			return id, len(m.tokens[id])
		}
	}
	return 0, 0
}

// Decoder turns a stream of token ids into text that is always whole UTF-8
// characters: bytes of an incomplete character at the end of a piece (from
// byte tokens, or byte-level tokens that split a character) are held back
// until the character is complete. Bytes that can never complete a
// character are passed through as they are. A Decoder is not safe for
// concurrent use; create one per stream with Tokenizer.NewDecoder.
type Decoder struct {
	t       *Tokenizer
	prev    int
	pending []byte
}

// NewDecoder returns a Decoder at the start of a text.
func (t *Tokenizer) NewDecoder() *Decoder {
	return &Decoder{t: t, prev: -1}
}

// Next returns the text that id completes, applying TokenPiece's rules
// with the previous id given to Next. The concatenation of all results of
// Next and a final Flush equals Decode of the same ids.
func (d *Decoder) Next(id int) string {
	p := d.t.TokenPiece(d.prev, id)
	d.prev = id
	if len(d.pending) == 0 && utf8.ValidString(p) {
		return p // the common case: whole characters, nothing held
	}
	d.pending = append(d.pending, p...)
	cut := len(d.pending)
	// An incomplete character is at most 3 bytes at the end, starting
	// with a lead byte that utf8.FullRune says needs more bytes.
	for i := len(d.pending) - 1; i >= 0 && i >= len(d.pending)-3; i-- {
		if d.pending[i]&0xC0 != 0x80 {
			if !utf8.FullRune(d.pending[i:]) {
				cut = i
			}
			break
		}
	}
	out := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns the bytes still held back (an incomplete character, so not
// valid UTF-8) and empties the buffer. The Decoder stays usable.
func (d *Decoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	return s
}
