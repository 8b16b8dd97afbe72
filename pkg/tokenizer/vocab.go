package tokenizer

import (
	"fmt"
	"math"
	"strings"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors returned by this package. Callers match them with [errors.Is]; the
// returned errors wrap them with the details (token id, merge index, offset).
var (
	// ErrInvalidVocab reports a Vocab that New cannot build a tokenizer from.
	ErrInvalidVocab = kvqerr.New("tokenizer: invalid vocabulary")
	// ErrUnknownPreTokenizer reports a byte-level pre-tokenizer name that
	// this package does not implement.
	ErrUnknownPreTokenizer = kvqerr.New("tokenizer: unknown pre-tokenizer")
	// ErrFormat reports a malformed llama2.c tokenizer file; the error is a
	// *FormatError with the offset.
	ErrFormat = kvqerr.New("tokenizer: malformed llama2.c tokenizer file")
	// ErrHFFormat reports a Hugging Face tokenizer.json or
	// tokenizer_config.json that is not valid JSON or has a value of the
	// wrong shape; the error is an *HFError with the JSON path.
	ErrHFFormat = kvqerr.New("tokenizer: malformed Hugging Face tokenizer file")
	// ErrUnsupported reports a well-formed tokenizer file that uses a
	// feature kvq does not implement (a Unigram model, an unknown
	// normalizer, ...).
	ErrUnsupported = kvqerr.New("tokenizer: unsupported tokenizer")
)

// Kind is the tokenization algorithm of a vocabulary.
type Kind int

const (
	// SentencePieceBPE is SentencePiece-style BPE over characters with
	// byte fallback: GGUF tokenizer.ggml.model "llama", llama2.c, and
	// Hugging Face's BPE model with byte_fallback (Llama 2, Mistral). It is
	// driven by piece scores or, when the Vocab has Merges, by merge rank.
	SentencePieceBPE Kind = iota + 1
	// ByteLevelBPE is GPT-2-style byte-level BPE driven by a ranked merge
	// list: GGUF tokenizer.ggml.model "gpt2".
	ByteLevelBPE
)

// String returns the GGUF tokenizer.ggml.model name of k.
func (k Kind) String() string {
	switch k {
	case SentencePieceBPE:
		return "llama"
	case ByteLevelBPE:
		return "gpt2"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// TokenType is the role of a token, numbered as GGUF's tokenizer.ggml.token_type.
// The zero value (GGUF "undefined") is treated as Normal.
type TokenType int

const (
	Normal      TokenType = 1 // ordinary text piece
	Unknown     TokenType = 2 // the UNK token
	Control     TokenType = 3 // BOS, EOS, chat markers; decodes to ""
	UserDefined TokenType = 4 // added piece whose text is stored verbatim
	Unused      TokenType = 5 // reserved slot; never produced by Encode
	Byte        TokenType = 6 // "<0xHH>" byte-fallback token
)

// String returns the lower-case name of t.
func (t TokenType) String() string {
	switch t {
	case 0, Normal:
		return "normal"
	case Unknown:
		return "unknown"
	case Control:
		return "control"
	case UserDefined:
		return "user-defined"
	case Unused:
		return "unused"
	case Byte:
		return "byte"
	}
	return fmt.Sprintf("TokenType(%d)", int(t))
}

// Vocab is everything a file format provides about a tokenizer. New copies
// what it needs, so the caller may reuse the slices afterwards.
type Vocab struct {
	Kind   Kind
	Tokens []string // token text, indexed by id
	// Scores are the SentencePiece piece scores, indexed by id: the pair
	// whose concatenation has the highest score merges first. Required for
	// SentencePieceBPE, ignored for ByteLevelBPE.
	Scores []float32
	// Types are the token roles, indexed by id. Nil means: every token is
	// Normal, except that BOS, EOS and PAD are Control, UNK is Unknown and,
	// for SentencePieceBPE, tokens spelled exactly "<0xHH>" are Byte.
	Types []TokenType
	// Merges are the BPE merges, "left right" in rank order (rank 0
	// first); a string is split at its first space after the first byte.
	// Required for ByteLevelBPE (it may be empty), with both halves spelled
	// in the GPT-2 byte alphabet. Optional for SentencePieceBPE: a non-nil
	// Merges replaces Scores (which may then be nil) and makes the encoder
	// Hugging Face's BPE model with byte_fallback: characters that are not
	// tokens become their byte tokens (or UNK) first, and then the adjacent
	// pair with the lowest-ranked merge is merged, leftmost first, until no
	// listed merge applies.
	Merges []string
	// Special ids, -1 when absent.
	BOS, EOS, UNK, PAD int
	// AddBOS and AddEOS say whether Encode with addSpecial adds BOS and EOS.
	AddBOS, AddEOS bool
	// AddSpacePrefix (SentencePieceBPE only) prepends " " to non-empty text
	// before encoding, as llama2.c and llama.cpp's llama vocabulary do by
	// default. Ignored for ByteLevelBPE.
	AddSpacePrefix bool
	// PreTokenizer (ByteLevelBPE only) names the pre-tokenizer: "gpt2"
	// (the default, also "gpt-2"), "llama3" (also "llama-bpe"), "qwen2" or
	// "o200k" (also "gpt-4o": GPT-4o, GPT-OSS).
	// SentencePieceBPE accepts only "" and "default".
	PreTokenizer string
	// SpaceIsMetaspace (SentencePieceBPE only) says that the vocabulary
	// spells a space as U+2581 "▁" (GGUF, Hugging Face). llama2.c's
	// tokenizer files use plain spaces and leave it false.
	SpaceIsMetaspace bool

	// PrefixRule (SentencePieceBPE with AddSpacePrefix) says which
	// stretches of text get the prefix space. The zero value is
	// PrefixEachStretch.
	PrefixRule PrefixRule
	// SplitOnSpace (SentencePieceBPE) cuts the text before every space
	// ("▁" when SpaceIsMetaspace) and merges the pieces separately, as
	// Hugging Face's Metaspace pre-tokenizer does with split true.
	SplitOnSpace bool
	// FuseUnknown (SentencePieceBPE with Merges) makes a run of adjacent
	// characters that can only become UNK produce a single UNK (Hugging
	// Face's fuse_unk).
	FuseUnknown bool
	// IgnoreMerges says whether a pre-token (ByteLevelBPE) or a merge unit
	// (SentencePieceBPE with Merges) that is itself a token is emitted
	// whole, before any merging (Hugging Face's ignore_merges).
	IgnoreMerges IgnoreMerges
	// NFC normalizes ordinary text to Unicode Normalization Form C before
	// encoding it, as the Qwen2 tokenizers do. Text that is not in NFC then
	// does not decode back to itself.
	NFC bool
}

// PrefixRule selects which stretches of ordinary text a SentencePiece
// vocabulary with AddSpacePrefix prefixes with a space. A stretch is the
// whole text for Encode; for EncodeWithSpecials, each run of text between
// special tokens.
type PrefixRule uint8

const (
	// PrefixEachStretch prefixes every non-empty stretch, even one that
	// starts with a space: llama.cpp, llama2.c, and Hugging Face's
	// Prepend("▁") normalizer (Llama 2, TinyLlama).
	PrefixEachStretch PrefixRule = iota
	// PrefixUnlessSpace prefixes every stretch that does not already start
	// with a space or "▁": Hugging Face's Metaspace pre-tokenizer with
	// prepend_scheme "always".
	PrefixUnlessSpace
	// PrefixFirstOnly prefixes only a stretch at the very start of the
	// input, and only if it does not start with a space or "▁": Metaspace
	// with prepend_scheme "first" (Mistral v0.3, Llama 2 with legacy false).
	PrefixFirstOnly
)

// IgnoreMerges selects the whole-token lookup of Vocab.IgnoreMerges.
type IgnoreMerges int8

const (
	// IgnoreMergesDefault looks whole pre-tokens up for the "llama3"
	// pre-tokenizer only, as llama.cpp does for GGUF files.
	IgnoreMergesDefault IgnoreMerges = iota
	// IgnoreMergesOn always looks whole units up first.
	IgnoreMergesOn
	// IgnoreMergesOff never does.
	IgnoreMergesOff
)

const metaspace = "\u2581" // SentencePiece's visible space, "▁"

// preTokenizers maps the accepted PreTokenizer names to their scanners.
var preTokenizers = map[string]preStyle{
	"":          preGPT2,
	"gpt2":      preGPT2,
	"gpt-2":     preGPT2,
	"llama3":    preLlama3,
	"llama-bpe": preLlama3,
	"qwen2":     preQwen2,
	"gpt-4o":    preO200k,
	"o200k":     preO200k,
}

const knownPreTokenizers = `"gpt2" (or "gpt-2"), "llama3" (or "llama-bpe"), "qwen2", "o200k" (or "gpt-4o")`

// vocabErr wraps ErrInvalidVocab with a formatted message.
func vocabErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidVocab, fmt.Sprintf(format, args...))
}

// parseByteToken returns the byte that a "<0xHH>" spelling names.
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// New validates v and builds a Tokenizer from it. It returns an error
// wrapping ErrInvalidVocab (or ErrUnknownPreTokenizer) that names the
// offending token, merge or field; it never panics on bad input.
//
// Beyond the per-field rules documented on Vocab it checks that special ids
// are in range, that AddBOS/AddEOS have an id to add, that every merge names
// two known tokens whose concatenation is a token, and that every byte can be
// encoded: a SentencePiece vocabulary needs all 256 byte tokens or an UNK
// id, a byte-level one needs a token for each of the 256 byte-alphabet
// characters or an UNK id. When a token text occurs more than once, the
// lowest id wins.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, vocabErr("no tokens")
	}
	if n > math.MaxInt32 {
		return nil, vocabErr("%d tokens, more than %d", n, math.MaxInt32)
	}
	t := &Tokenizer{
		kind:   v.Kind,
		tokens: append([]string(nil), v.Tokens...),
		addBOS: v.AddBOS,
		addEOS: v.AddEOS,
	}
	switch v.Kind {
	case SentencePieceBPE:
		if v.PreTokenizer != "" && v.PreTokenizer != "default" {
			return nil, vocabErr("pre-tokenizer %q given for a SentencePiece vocabulary, which has none", v.PreTokenizer)
		}
		if v.Scores == nil && v.Merges == nil {
			return nil, vocabErr("SentencePiece vocabulary without scores or merges")
		}
		if v.PrefixRule > PrefixFirstOnly {
			return nil, vocabErr("unknown prefix rule %d", v.PrefixRule)
		}
		t.addSpacePrefix = v.AddSpacePrefix
		t.metaspace = v.SpaceIsMetaspace
		t.prefixRule = v.PrefixRule
		t.splitOnSpace = v.SplitOnSpace
		t.ranked = v.Merges != nil
		t.fuseUnknown = v.FuseUnknown && t.ranked
		switch v.IgnoreMerges {
		case IgnoreMergesDefault, IgnoreMergesOff:
		case IgnoreMergesOn:
			if !t.ranked {
				return nil, vocabErr("IgnoreMerges on for a SentencePiece vocabulary without merges")
			}
			t.ignoreMerges = true
		default:
			return nil, vocabErr("unknown IgnoreMerges value %d", v.IgnoreMerges)
		}
	case ByteLevelBPE:
		style, ok := preTokenizers[v.PreTokenizer]
		if !ok {
			return nil, fmt.Errorf("%w %q; known: %s", ErrUnknownPreTokenizer, v.PreTokenizer, knownPreTokenizers)
		}
		t.pre = style
		switch v.IgnoreMerges {
		case IgnoreMergesDefault:
			// llama.cpp and tiktoken look a Llama 3 pre-token up whole
			// before merging (Hugging Face's ignore_merges).
			t.ignoreMerges = style == preLlama3
		case IgnoreMergesOn:
			t.ignoreMerges = true
		case IgnoreMergesOff:
		default:
			return nil, vocabErr("unknown IgnoreMerges value %d", v.IgnoreMerges)
		}
	default:
		return nil, vocabErr("unknown kind %v", v.Kind)
	}

	var err error
	if t.bos, err = specialID("BOS", v.BOS, n); err != nil {
		return nil, err
	}
	if t.eos, err = specialID("EOS", v.EOS, n); err != nil {
		return nil, err
	}
	if t.unk, err = specialID("UNK", v.UNK, n); err != nil {
		return nil, err
	}
	if t.pad, err = specialID("PAD", v.PAD, n); err != nil {
		return nil, err
	}
	if v.AddBOS && t.bos < 0 {
		return nil, vocabErr("AddBOS set but no BOS id")
	}
	if v.AddEOS && t.eos < 0 {
		return nil, vocabErr("AddEOS set but no EOS id")
	}

	if v.Scores != nil {
		if len(v.Scores) != n {
			return nil, vocabErr("%d scores for %d tokens", len(v.Scores), n)
		}
		for id, s := range v.Scores {
			if s != s {
				return nil, vocabErr("token %d %q has a NaN score", id, v.Tokens[id])
			}
		}
		t.scores = append([]float32(nil), v.Scores...)
	}
	if err := t.setTypes(v); err != nil {
		return nil, err
	}

	// pieces: the token texts that the merge algorithms may produce.
	t.pieces = make(map[string]int32, n)
	for id, tok := range t.tokens {
		if tok == "" {
			continue
		}
		if typ := t.types[id]; typ == Normal || (typ == UserDefined && t.kind == SentencePieceBPE) {
			if _, dup := t.pieces[tok]; !dup {
				t.pieces[tok] = int32(id)
			}
		}
	}
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	if t.kind == SentencePieceBPE {
		err = t.initSentencePiece()
	} else {
		err = t.initByteLevel()
	}
	if err == nil && (t.kind == ByteLevelBPE || t.ranked) {
		err = t.initMerges(v.Merges)
	}
	if err != nil {
		return nil, err
	}
	t.nfc = v.NFC
	t.initSpecials()
	t.initPieces()
	return t, nil
}

func specialID(name string, id, n int) (int, error) {
	if id < -1 || id >= n {
		return 0, vocabErr("%s id %d out of range [-1, %d)", name, id, n)
	}
	return id, nil
}

// setTypes fills t.types from v.Types or, when nil, from the defaults
// documented on Vocab.Types.
func (t *Tokenizer) setTypes(v Vocab) error {
	n := len(t.tokens)
	t.types = make([]TokenType, n)
	if v.Types != nil {
		if len(v.Types) != n {
			return vocabErr("%d token types for %d tokens", len(v.Types), n)
		}
		for id, typ := range v.Types {
			if typ < 0 || typ > Byte {
				return vocabErr("token %d %q has type %d, want 0..6", id, t.tokens[id], int(typ))
			}
			if typ == 0 {
				typ = Normal
			}
			t.types[id] = typ
		}
		return nil
	}
	for id, tok := range t.tokens {
		t.types[id] = Normal
		if _, ok := parseByteToken(tok); ok && t.kind == SentencePieceBPE {
			t.types[id] = Byte
		}
	}
	for _, id := range []int{t.bos, t.eos, t.pad} {
		if id >= 0 {
			t.types[id] = Control
		}
	}
	if t.unk >= 0 {
		t.types[t.unk] = Unknown
	}
	return nil
}

// initSentencePiece finds the byte tokens and checks that every character
// can be encoded.
func (t *Tokenizer) initSentencePiece() error {
	missing := -1
	for id, typ := range t.types {
		if typ != Byte {
			continue
		}
		b, ok := parseByteToken(t.tokens[id])
		if !ok {
			return vocabErr("byte token %d spelled %q, want <0xHH>", id, t.tokens[id])
		}
		if t.byteTok[b] < 0 {
			t.byteTok[b] = int32(id)
		}
	}
	for b := 255; b >= 0; b-- {
		if t.byteTok[b] < 0 {
			missing = b
		}
	}
	if missing >= 0 && t.unk < 0 {
		return vocabErr("no byte token <0x%02X> for byte fallback and no UNK id", missing)
	}
	return nil
}

// initByteLevel indexes the byte alphabet.
func (t *Tokenizer) initByteLevel() error {
	for b := range 256 {
		if id, ok := t.pieces[byteAlphabet[b]]; ok {
			t.byteTok[b] = id
		} else if t.unk < 0 {
			return vocabErr("no token %q for byte 0x%02X and no UNK id", byteAlphabet[b], b)
		}
	}
	return nil
}

// initMerges indexes the ranked merges.
func (t *Tokenizer) initMerges(merges []string) error {
	if len(merges) > 1<<24 {
		// Ranks are heap keys of type float32, exact up to 2^24.
		return vocabErr("%d merges, more than %d", len(merges), 1<<24)
	}
	t.merges = make(map[uint64]merge, len(merges))
	for rank, m := range merges {
		// Split at the first space after the first byte, as llama.cpp
		// does, so a left half may itself start with a space.
		i := -1
		if len(m) >= 3 {
			i = strings.IndexByte(m[1:], ' ') + 1
		}
		if i < 1 || i == len(m)-1 {
			return vocabErr(`merge %d %q is not "left right"`, rank, m)
		}
		left, right := m[:i], m[i+1:]
		l, ok := t.pieces[left]
		if !ok {
			return vocabErr("merge %d %q: left half %q is not a token", rank, m, left)
		}
		r, ok := t.pieces[right]
		if !ok {
			return vocabErr("merge %d %q: right half %q is not a token", rank, m, right)
		}
		res, ok := t.pieces[left+right]
		if !ok {
			return vocabErr("merge %d %q: result %q is not a token", rank, m, left+right)
		}
		key := pairKey(l, r)
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = merge{rank: int32(rank), id: res}
		}
	}
	return nil
}
