package tokenizer

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/internal/testutil"
	"golang.org/x/text/unicode/norm"
)

// Fixtures shared by the tests: the real llama2.c tokenizer of stories260K
// (from ../shared beside the repository, skipped when absent unless
// CI=true), a hand-built
// SentencePiece vocabulary, a hand-built byte-level vocabulary and a
// byte-level vocabulary trained in-process on a small text.

// sharedModels is the stories260K folder under ../shared.
const sharedModels = "models/stories260K"

// sharedFile returns the path of a file of stories260K under ../shared,
// skipping the test when it is missing (failing under CI=true).
func sharedFile(tb testing.TB, name string) string {
	tb.Helper()
	return testutil.SharedPath(tb, sharedModels+"/"+name)
}

// lookupShared returns the path of a stories260K file under ../shared and
// whether it exists, for optional uses (fuzz seeds, a fallback corpus).
func lookupShared(name string) (string, bool) {
	return testutil.LookupShared(sharedModels + "/" + name)
}

var tok512 = sync.OnceValues(func() (*Tokenizer, error) {
	p, _ := lookupShared("tok512.bin")
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	v, err := ParseLlama2C(f, st.Size(), 512)
	if err != nil {
		return nil, err
	}
	return New(v)
})

// loadTok512 returns the stories260K tokenizer (tok512.bin via ParseLlama2C).
func loadTok512(tb testing.TB) *Tokenizer {
	tb.Helper()
	sharedFile(tb, "tok512.bin")
	tk, err := tok512()
	if err != nil {
		tb.Fatalf("loading tok512.bin: %v", err)
	}
	return tk
}

func mustNew(tb testing.TB, v Vocab) *Tokenizer {
	tb.Helper()
	tk, err := New(v)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return tk
}

// Hand-built SentencePiece vocabulary, spelled with "▁" like GGUF:
//
//	0 <unk> (unknown), 1 <s> (control, BOS), 2 </s> (control, EOS)
//	3..258 <0x00>..<0xFF> (byte): byte b is id b+3
//	259.. pieces below, with their scores (higher merges first)
//	278 <|x|> (user-defined)
var spmPieces = []struct {
	text  string
	score float32
}{
	{"▁", -10},  // 259
	{"a", -11},  // 260
	{"b", -12},  // 261
	{"c", -13},  // 262
	{"1", -14},  // 263
	{"2", -15},  // 264
	{"3", -16},  // 265
	{"世", -17},  // 266
	{"I", -18},  // 267
	{"l", -19},  // 268
	{"▁▁", -1},  // 269
	{"ab", -3},  // 270
	{"bc", -2},  // 271
	{"abc", -4}, // 272
	{"▁a", -5},  // 273
	{"12", -6},  // 274
	{"aa", -7},  // 275
	{"ll", -8},  // 276
	{"▁I", -9},  // 277
}

const spmUserDefined = 278 // "<|x|>"

func handSPMVocab() Vocab {
	v := Vocab{
		Kind: SentencePieceBPE, BOS: 1, EOS: 2, UNK: 0, PAD: -1,
		AddBOS: true, AddSpacePrefix: true, SpaceIsMetaspace: true,
	}
	add := func(s string, score float32, typ TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, Unknown)
	add("<s>", 0, Control)
	add("</s>", 0, Control)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, Byte)
	}
	for _, p := range spmPieces {
		add(p.text, p.score, Normal)
	}
	add("<|x|>", 0, UserDefined)
	return v
}

// Hand-built byte-level vocabulary: ids 0..255 are the byte-alphabet
// characters (id == byte value: ' ' is 32 "Ġ", '\n' is 10 "Ċ"), then the
// results of the merges in rank order, then an unmerged word and specials.
var bpeMerges = []struct{ merge, result string }{
	{"Ġ t", "Ġt"},     // rank 0,  id 256
	{"h e", "he"},     // rank 1,  id 257
	{"Ġt he", "Ġthe"}, // rank 2,  id 258
	{"l l", "ll"},     // rank 3,  id 259
	{"' ll", "'ll"},   // rank 4,  id 260
	{"1 2", "12"},     // rank 5,  id 261
	{"3 4", "34"},     // rank 6,  id 262
	{"12 3", "123"},   // rank 7,  id 263
	{"Ġ Ġ", "ĠĠ"},     // rank 8,  id 264
	{"Ċ Ċ", "ĊĊ"},     // rank 9,  id 265
	{"O N", "ON"},     // rank 10, id 266
	{"D ON", "DON"},   // rank 11, id 267
	{"' T", "'T"},     // rank 12, id 268
	{"ä ¸", "ä¸"},     // rank 13, id 269 (E4 B8)
	{"ä¸ ĸ", "ä¸ĸ"},   // rank 14, id 270 (E4 B8 96 = 世)
	{"ð Ł", "ðŁ"},     // rank 15, id 271 (F0 9F)
	{"ðŁ Ļ", "ðŁĻ"},   // rank 16, id 272 (F0 9F 99, 3/4 of 🙂)
	{"a a", "aa"},     // rank 17, id 273
}

const (
	bpeXYZ       = 274 // "xyz": a token no merge produces
	bpeBOT       = 275 // "<|begin_of_text|>" control, BOS
	bpeEOT       = 276 // "<|eot_id|>" control
	bpeEndOfText = 277 // "<|endoftext|>" control, EOS
	bpeEndUser   = 278 // "<|end" user-defined
)

func handBPEVocab(pre string) Vocab {
	v := Vocab{Kind: ByteLevelBPE, PreTokenizer: pre, BOS: bpeBOT, EOS: bpeEndOfText, UNK: -1, PAD: -1, AddBOS: true}
	add := func(s string, typ TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, typ)
	}
	for b := range 256 {
		add(byteAlphabet[b], Normal)
	}
	for _, m := range bpeMerges {
		add(m.result, Normal)
		v.Merges = append(v.Merges, m.merge)
	}
	add("xyz", Normal)
	add("<|begin_of_text|>", Control)
	add("<|eot_id|>", Control)
	add("<|endoftext|>", Control)
	add("<|end", UserDefined)
	return v
}

// sampleText is a fallback corpus for the trained vocabulary when the shared
// eval text is missing.
const sampleText = `Once upon a time, there was a little girl named Mia. She liked to play
in the park with her red ball. One day the ball rolled under a big bush, and
a small brown dog pushed it out. "Thank you, dog!" said Mia. They played until
the sun went down, then Mia went home and told her mom about her new friend.
`

// corpus returns the eval stories if present, else sampleText.
func corpus() string {
	p, ok := lookupShared("eval-stories.txt")
	if !ok {
		return sampleText
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return sampleText
	}
	return string(b)
}

// trainedBPE is a byte-level vocabulary with nMerges merges learnt from
// corpus() by plain BPE training (most frequent adjacent pair first, ties
// broken by the pair's text), with the given pre-tokenizer used for both
// training and encoding.
var trainedBPE = sync.OnceValue(func() Vocab { return trainBPE(corpus(), "llama3", 400) })

func trainBPE(text, pre string, nMerges int) Vocab {
	v := Vocab{Kind: ByteLevelBPE, PreTokenizer: pre, BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	index := map[string]int{}
	for b := range 256 {
		v.Tokens = append(v.Tokens, byteAlphabet[b])
		index[byteAlphabet[b]] = b
	}
	style := preTokenizers[pre]
	counts := map[string]int{}
	for i := 0; i < len(text); {
		j := style.next(text, i)
		counts[text[i:j]]++
		i = j
	}
	type word struct {
		syms  []int
		count int
	}
	var words []word
	for w, c := range counts {
		syms := make([]int, len(w))
		for k := range len(w) {
			syms[k] = int(w[k])
		}
		words = append(words, word{syms, c})
	}
	for range nMerges {
		pairs := map[[2]int]int{}
		for _, w := range words {
			for k := 0; k+1 < len(w.syms); k++ {
				pairs[[2]int{w.syms[k], w.syms[k+1]}] += w.count
			}
		}
		var best [2]int
		bestN := 0
		for p, n := range pairs {
			if n > bestN || n == bestN && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			break
		}
		left, right := v.Tokens[best[0]], v.Tokens[best[1]]
		v.Merges = append(v.Merges, left+" "+right)
		res, ok := index[left+right]
		if !ok {
			res = len(v.Tokens)
			index[left+right] = res
			v.Tokens = append(v.Tokens, left+right)
		}
		for i := range words {
			w := &words[i]
			out := w.syms[:0]
			for k := 0; k < len(w.syms); k++ {
				if k+1 < len(w.syms) && w.syms[k] == best[0] && w.syms[k+1] == best[1] {
					out = append(out, res)
					k++
					continue
				}
				out = append(out, w.syms[k])
			}
			w.syms = out
		}
	}
	return v
}

// reference is a simple O(n²) implementation of both BPE flavours that
// rescans all adjacent pairs after every merge. It shares only the
// pre-tokenizer (tested on its own) with the package.
type reference struct {
	tk     *Tokenizer
	pieces map[string]int // Normal (and SentencePiece UserDefined) texts, lowest id
	bytes  map[byte]int   // SentencePiece byte tokens
	ranks  map[string]int // byte-level merges "left right", lowest rank
}

func newReference(tk *Tokenizer, v Vocab) *reference {
	r := &reference{tk: tk, pieces: map[string]int{}, bytes: map[byte]int{}, ranks: map[string]int{}}
	for id := tk.VocabSize() - 1; id >= 0; id-- {
		typ, text := tk.TokenType(id), tk.Token(id)
		if text != "" && (typ == Normal || typ == UserDefined && tk.Kind() == SentencePieceBPE) {
			r.pieces[text] = id
		}
		if b, ok := parseByteToken(text); ok && typ == Byte {
			r.bytes[b] = id
		}
	}
	for rank := len(v.Merges) - 1; rank >= 0; rank-- {
		r.ranks[v.Merges[rank]] = rank
	}
	return r
}

func (r *reference) encode(text string, addSpecial bool) []int {
	var ids []int
	if addSpecial && r.tk.addBOS {
		ids = append(ids, r.tk.BOS())
	}
	if r.tk.nfc {
		text = norm.NFC.String(text)
	}
	if r.tk.Kind() == SentencePieceBPE {
		ids = r.sentencePiece(ids, text)
	} else {
		ids = r.byteLevel(ids, text)
	}
	if addSpecial && r.tk.addEOS {
		ids = append(ids, r.tk.EOS())
	}
	return ids
}

// sentencePiece: apply the prefix rule, spell spaces, cut before spaces
// with SplitOnSpace, and merge each unit by score or by rank.
func (r *reference) sentencePiece(ids []int, text string) []int {
	if text == "" {
		return ids
	}
	s := text
	space := " "
	if r.tk.metaspace {
		space = "▁"
	}
	if r.tk.addSpacePrefix {
		startsWithSpace := strings.HasPrefix(s, " ") || strings.HasPrefix(s, space)
		if r.tk.prefixRule == PrefixEachStretch || !startsWithSpace {
			s = " " + s
		}
	}
	s = strings.ReplaceAll(s, " ", space)
	units := []string{s}
	if r.tk.splitOnSpace {
		// A unit starts at the text's start and at every space.
		units = nil
		start := 0
		for i := 1; i < len(s); i++ {
			if strings.HasPrefix(s[i:], space) {
				units = append(units, s[start:i])
				start = i
			}
		}
		units = append(units, s[start:])
	}
	for _, u := range units {
		if r.tk.ranked {
			ids = r.rankedChars(ids, u)
		} else {
			ids = r.scored(ids, u)
		}
	}
	return ids
}

// scored: split into characters, merge the highest-scoring pair (leftmost
// on ties) until none is a piece, byte fallback for the rest.
func (r *reference) scored(ids []int, s string) []int {
	var syms []string
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:]) // an invalid byte is (RuneError, 1)
		syms = append(syms, s[i:i+n])
		i += n
	}
	for {
		best, bestScore := -1, float32(0)
		for i := 0; i+1 < len(syms); i++ {
			if id, ok := r.pieces[syms[i]+syms[i+1]]; ok && (best < 0 || r.tk.scores[id] > bestScore) {
				best, bestScore = i, r.tk.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	for _, sym := range syms {
		if id, ok := r.pieces[sym]; ok {
			ids = append(ids, id)
			continue
		}
		var fallback []int
		for i := 0; i < len(sym); i++ {
			id, ok := r.bytes[sym[i]]
			if !ok {
				fallback = []int{r.tk.unk}
				break
			}
			fallback = append(fallback, id)
		}
		ids = append(ids, fallback...)
	}
	return ids
}

// rankedChars: Hugging Face's BPE with byte_fallback. Characters become
// pieces, byte tokens or UNK (fused), then the lowest-ranked adjacent
// merge applies, leftmost on ties, until none does.
func (r *reference) rankedChars(ids []int, s string) []int {
	if id, ok := r.pieces[s]; ok && r.tk.ignoreMerges {
		return append(ids, id)
	}
	type sym struct {
		text string
		id   int
	}
	var syms []sym
	unkRun := false
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		c := s[i : i+n]
		i += n
		if id, ok := r.pieces[c]; ok {
			syms = append(syms, sym{c, id})
			unkRun = false
			continue
		}
		var bs []sym
		for k := 0; k < len(c); k++ {
			if id, ok := r.bytes[c[k]]; ok {
				bs = append(bs, sym{r.tk.Token(id), id})
			}
		}
		if len(bs) == len(c) {
			syms = append(syms, bs...)
			unkRun = false
			continue
		}
		if !(unkRun && r.tk.fuseUnknown) {
			syms = append(syms, sym{"\x00unk", r.tk.unk})
		}
		unkRun = true
	}
	for {
		best, bestRank := -1, 0
		for k := 0; k+1 < len(syms); k++ {
			if rank, ok := r.ranks[syms[k].text+" "+syms[k+1].text]; ok && (best < 0 || rank < bestRank) {
				best, bestRank = k, rank
			}
		}
		if best < 0 {
			break
		}
		merged := syms[best].text + syms[best+1].text
		syms = slices.Replace(syms, best, best+2, sym{merged, r.pieces[merged]})
	}
	for _, sm := range syms {
		ids = append(ids, sm.id)
	}
	return ids
}

// byteLevel: per pre-token, merge the lowest-ranked adjacent pair (leftmost
// on ties) until none is left; Llama 3 first looks the pre-token up whole.
func (r *reference) byteLevel(ids []int, text string) []int {
	for i := 0; i < len(text); {
		j := r.tk.pre.next(text, i)
		var syms []string
		for k := i; k < j; k++ {
			syms = append(syms, byteAlphabet[text[k]])
		}
		i = j
		if id, ok := r.pieces[strings.Join(syms, "")]; ok && r.tk.ignoreMerges {
			ids = append(ids, id)
			continue
		}
		for {
			best, bestRank := -1, 0
			for k := 0; k+1 < len(syms); k++ {
				if rank, ok := r.ranks[syms[k]+" "+syms[k+1]]; ok && (best < 0 || rank < bestRank) {
					best, bestRank = k, rank
				}
			}
			if best < 0 {
				break
			}
			syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
		}
		for _, s := range syms {
			ids = append(ids, r.pieces[s])
		}
	}
	return ids
}
