package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func split(style preStyle, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := style.next(s, i)
		if j <= i || j > len(s) {
			panic("pre-tokenizer did not advance")
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// The expected splits were worked out by hand from the regular expressions
// quoted on preStyle, with find-all, leftmost-first alternation semantics,
// and then cross-checked against a backtracking regex engine (Python's
// "regex" module, outside this test). The reasoning for the less obvious
// rows:
//
//   - `\s+(?!\S)` backtracks by one character when the whitespace run is
//     followed by a non-space, so "  leading" is " ", " leading": the last
//     space joins the word through ` ?\p{L}+` (gpt2) or
//     `[^\r\n\p{L}\p{N}]?\p{L}+` (llama3/qwen2). A one-character run before
//     a non-space cannot backtrack and falls to `\s+` ("\t", "foo" in gpt2).
//   - A run that ends the text is taken whole ("trailing", "  ").
//   - llama3's `\s*[\r\n]+` takes whitespace up to the last \r or \n of the
//     run ("   \n\n" in "foo   \n\n  bar"); gpt2 has no such rule and splits
//     newline runs with the look-ahead rule ("\n\n", "\n" before "b").
//   - llama3's optional `[^\r\n\p{L}\p{N}]` before letters takes any
//     non-newline character: "\tfoo", ".foo", "\u3000y", and the combining
//     acute U+0301 (a mark, not a letter) in "\u0301x".
//   - ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama3) keeps trailing newlines with
//     punctuation: "!!!\n\n".
//   - Contractions only match where a pre-token starts: two apostrophes and
//     an "s" split into the punctuation run of both apostrophes, then "s".
//     gpt2's are case-sensitive ("'", "T"), llama3's and qwen2's are not
//     ("'T", and "'ſ", since U+017F folds to "s").
//   - Digits: gpt2 ` ?\p{N}+` takes the whole run with one leading space;
//     llama3 `\p{N}{1,3}` makes groups of three from the left and no space
//     (" 12" is " ", "12"); qwen2 one digit each. \p{N} includes Nl and No:
//     "Ⅻ½²" is three numbers.
var preTokenizerCases = []struct {
	name                string
	in                  string
	gpt2, llama3, qwen2 []string
}{
	{"words", "Hello world", []string{"Hello", " world"}, []string{"Hello", " world"}, []string{"Hello", " world"}},
	{"contractions", "I'll DON'T we'Re",
		[]string{"I", "'ll", " DON", "'", "T", " we", "'", "Re"},
		[]string{"I", "'ll", " DON", "'T", " we", "'Re"},
		[]string{"I", "'ll", " DON", "'T", " we", "'Re"}},
	{"contraction lower", "don't", []string{"don", "'t"}, []string{"don", "'t"}, []string{"don", "'t"}},
	{"contraction case", "'s'S", []string{"'s", "'", "S"}, []string{"'s", "'S"}, []string{"'s", "'S"}},
	{"contraction after quote", "''s", []string{"''", "s"}, []string{"''", "s"}, []string{"''", "s"}},
	// U+017F "ſ" case-folds to "s": (?i:'s) matches "'ſ" in Oniguruma and
	// Rust's regex, the case-sensitive gpt2 pattern does not.
	{"contraction long s", "it'ſ x", []string{"it", "'", "ſ", " x"}, []string{"it", "'ſ", " x"}, []string{"it", "'ſ", " x"}},
	{"contraction after space", "a 'll", []string{"a", " '", "ll"}, []string{"a", " '", "ll"}, []string{"a", " '", "ll"}},
	{"contraction mixed", "it'S  'LL",
		[]string{"it", "'", "S", " ", " '", "LL"},
		[]string{"it", "'S", " ", " '", "LL"},
		[]string{"it", "'S", " ", " '", "LL"}},
	{"lone quote", "'", []string{"'"}, []string{"'"}, []string{"'"}},
	{"trailing quote", "x'", []string{"x", "'"}, []string{"x", "'"}, []string{"x", "'"}},
	{"leading spaces", "  leading", []string{" ", " leading"}, []string{" ", " leading"}, []string{" ", " leading"}},
	{"trailing spaces", "trailing  ", []string{"trailing", "  "}, []string{"trailing", "  "}, []string{"trailing", "  "}},
	{"only spaces", "    ", []string{"    "}, []string{"    "}, []string{"    "}},
	{"one space", " ", []string{" "}, []string{" "}, []string{" "}},
	{"one newline", "\n", []string{"\n"}, []string{"\n"}, []string{"\n"}},
	{"newline run", "a\n\n\nb", []string{"a", "\n\n", "\n", "b"}, []string{"a", "\n\n\n", "b"}, []string{"a", "\n\n\n", "b"}},
	{"space newline space", "x \n y", []string{"x", " \n", " y"}, []string{"x", " \n", " y"}, []string{"x", " \n", " y"}},
	{"crlf", "a\r\nb", []string{"a", "\r", "\n", "b"}, []string{"a", "\r\n", "b"}, []string{"a", "\r\n", "b"}},
	{"tabs and newline", "a\t \n\t b",
		[]string{"a", "\t \n\t", " b"},
		[]string{"a", "\t \n", "\t", " b"},
		[]string{"a", "\t \n", "\t", " b"}},
	{"spaces around newlines", "foo   \n\n  bar  baz",
		[]string{"foo", "   \n\n ", " bar", " ", " baz"},
		[]string{"foo", "   \n\n", " ", " bar", " ", " baz"},
		[]string{"foo", "   \n\n", " ", " bar", " ", " baz"}},
	{"mixed runs", "a  b\n\nc  ",
		[]string{"a", " ", " b", "\n", "\n", "c", "  "},
		[]string{"a", " ", " b", "\n\n", "c", "  "},
		[]string{"a", " ", " b", "\n\n", "c", "  "}},
	{"digits", "12345 678",
		[]string{"12345", " 678"},
		[]string{"123", "45", " ", "678"},
		[]string{"1", "2", "3", "4", "5", " ", "6", "7", "8"}},
	{"digits four", "1234", []string{"1234"}, []string{"123", "4"}, []string{"1", "2", "3", "4"}},
	{"space digits", " 12 ab", []string{" 12", " ab"}, []string{" ", "12", " ab"}, []string{" ", "1", "2", " ab"}},
	{"currency", "$100", []string{"$", "100"}, []string{"$", "100"}, []string{"$", "1", "0", "0"}},
	{"other numbers", "Ⅻ½²", []string{"Ⅻ½²"}, []string{"Ⅻ½²"}, []string{"Ⅻ", "½", "²"}},
	{"tab word", "\tfoo", []string{"\t", "foo"}, []string{"\tfoo"}, []string{"\tfoo"}},
	{"dot word", ".foo", []string{".", "foo"}, []string{".foo"}, []string{".foo"}},
	{"punctuation newlines", "hello!!!\n\nworld",
		[]string{"hello", "!!!", "\n", "\n", "world"},
		[]string{"hello", "!!!\n\n", "world"},
		[]string{"hello", "!!!\n\n", "world"}},
	{"space punctuation newlines", " !!\n\nx", []string{" !!", "\n", "\n", "x"}, []string{" !!\n\n", "x"}, []string{" !!\n\n", "x"}},
	{"cjk", "世界 你好", []string{"世界", " 你好"}, []string{"世界", " 你好"}, []string{"世界", " 你好"}},
	{"emoji", "🙂🙂 ok", []string{"🙂🙂", " ok"}, []string{"🙂🙂", " ok"}, []string{"🙂🙂", " ok"}},
	{"ideographic space", "x  \u3000y", []string{"x", "  ", "\u3000", "y"}, []string{"x", "  ", "\u3000y"}, []string{"x", "  ", "\u3000y"}},
	{"no-break spaces", "\u00a0\u00a0x", []string{"\u00a0", "\u00a0", "x"}, []string{"\u00a0", "\u00a0x"}, []string{"\u00a0", "\u00a0x"}},
	{"combining mark", "e\u0301x", []string{"e", "\u0301", "x"}, []string{"e", "\u0301x"}, []string{"e", "\u0301x"}},
	// Not from the regex (it only sees valid text): an invalid byte is a
	// character that is neither letter, number nor space.
	{"invalid byte", "a\xffb", []string{"a", "\xff", "b"}, []string{"a", "\xffb"}, []string{"a", "\xffb"}},
	{"invalid bytes run", "\xff\xfe 1", []string{"\xff\xfe", " 1"}, []string{"\xff\xfe", " ", "1"}, []string{"\xff\xfe", " ", "1"}},
}

func TestPreTokenizer(t *testing.T) {
	for _, tc := range preTokenizerCases {
		for _, st := range []struct {
			name  string
			style preStyle
			want  []string
		}{{"gpt2", preGPT2, tc.gpt2}, {"llama3", preLlama3, tc.llama3}, {"qwen2", preQwen2, tc.qwen2}} {
			t.Run(tc.name+"/"+st.name, func(t *testing.T) {
				if got := split(st.style, tc.in); !slices.Equal(got, st.want) {
					t.Errorf("split(%s, %q) = %q, want %q", st.name, tc.in, got, st.want)
				}
			})
		}
	}
}

// TestPreTokenizerTiles checks on random text that every style splits into
// non-empty pieces that concatenate to the input.
func TestPreTokenizerTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		s := randomText(rng, 40)
		for _, style := range []preStyle{preGPT2, preLlama3, preQwen2, preO200k} {
			if got := strings.Join(split(style, s), ""); got != s {
				t.Fatalf("split(%d, %q) joins to %q", style, s, got)
			}
		}
	}
}

// randomText draws n characters from a pool that exercises every scanner
// rule, including invalid UTF-8 bytes.
func randomText(rng *rand.Rand, n int) string {
	pool := []string{
		"a", "b", "c", "e", "h", "l", "o", "t", "T", "I", "D", "O", "N", "S", "x", "y", "z",
		" ", " ", " ", "  ", "\n", "\r", "\t", "\u00a0", "\u3000",
		"'", "'s", "'ll", "'T", "!", ".", ",", "$",
		"0", "1", "2", "3", "4", "5", "½",
		"世", "界", "é", "e\u0301", "🙂", "▁", "\xff", "\xe4\xb8",
		"<s>", "<|x|>", "<|eot_id|>", "<|end", "ab", "bc", "aa",
	}
	var b strings.Builder
	for range rng.IntN(n + 1) {
		b.WriteString(pool[rng.IntN(len(pool))])
	}
	return b.String()
}
