package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// preStyle selects a byte-level pre-tokenizer. Each one is a hand-written
// scanner that splits text exactly as the style's regular expression does
// when applied repeatedly (find-all, leftmost-first alternation with
// backtracking, as in PCRE, Oniguruma and Rust's fancy-regex):
//
//	gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//	llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	qwen2:  llama3 with \p{N} (single digits) in place of \p{N}{1,3}
//
// Character classes: \p{L} is unicode.IsLetter, \p{N} is unicode.IsNumber,
// \s is unicode.IsSpace (the Unicode White_Space property, as in Oniguruma
// and Rust's regex). An invalid UTF-8 byte is a character of its own that is
// neither letter, number nor space. The case-insensitive contractions of
// llama3 and qwen2 use Unicode simple case folding, as Oniguruma (Hugging
// Face tokenizers) and Rust's regex (tiktoken) do: besides the ASCII
// letters, the only character that folds to one of s, t, r, e, v, m, l, d
// is U+017F "ſ", so "'ſ" is a contraction too (llama.cpp folds ASCII only
// and splits it as "'", "ſ").
//
// Every character belongs to one of the alternatives, so the matches tile
// the text and the scanner only has to find where each match ends.
type preStyle uint8

const (
	preGPT2 preStyle = iota
	preLlama3
	preQwen2
	preO200k // pretokenize_o200k.go
)

type charClass uint8

const (
	classOther charClass = iota
	classLetter
	classNumber
	classSpace
)

var asciiClass = func() (c [utf8.RuneSelf]charClass) {
	for r := range utf8.RuneSelf {
		c[r] = classOf(rune(r))
	}
	return c
}()

func classOf(r rune) charClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// char decodes the character at s[i]: its rune, byte length and class.
func char(s string, i int) (rune, int, charClass) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return r, 1, classOther
	}
	return r, n, classOf(r)
}

// next returns the end of the pre-token that starts at s[i], i < len(s).
func (p preStyle) next(s string, i int) int {
	if p == preGPT2 {
		return nextGPT2(s, i)
	}
	if p == preO200k {
		return nextO200k(s, i)
	}
	maxDigits := 3
	if p == preQwen2 {
		maxDigits = 1
	}
	return nextLlama3(s, i, maxDigits)
}

func nextGPT2(s string, i int) int {
	r, n, c := char(s, i)
	// 's|'t|'re|'ve|'m|'ll|'d
	if r == '\'' {
		if k := contraction(s, i+1, false); k > 0 {
			return i + 1 + k
		}
	}
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+` with the optional space.
	if r == ' ' && i+1 < len(s) {
		if _, n2, c2 := char(s, i+1); c2 != classSpace {
			return run(s, i+1+n2, c2)
		}
	}
	// The same without it.
	if c != classSpace {
		return run(s, i+n, c)
	}
	return spaceRun(s, i)
}

func nextLlama3(s string, i, maxDigits int) int {
	r, n, c := char(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if k := contraction(s, i+1, true); k > 0 {
			return i + 1 + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		return run(s, i+n, classLetter)
	}
	if c != classNumber && r != '\r' && r != '\n' && i+n < len(s) {
		if _, n2, c2 := char(s, i+n); c2 == classLetter {
			return run(s, i+n+n2, classLetter)
		}
	}
	return llama3Tail(s, i, r, n, c, maxDigits, false)
}

// llama3Tail matches what follows the words in llama3's style (and in
// qwen2's and o200k's) at s[i], whose character r (n bytes, class c) starts
// no word:
//
//	\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// slash adds '/' to the class after the punctuation ([\r\n/]*, o200k's).
func llama3Tail(s string, i int, r rune, n int, c charClass, maxDigits int, slash bool) int {
	// \p{N}{1,3} (qwen2: \p{N})
	if c == classNumber {
		j := i + n
		for k := 1; k < maxDigits && j < len(s); k++ {
			_, n2, c2 := char(s, j)
			if c2 != classNumber {
				break
			}
			j += n2
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*` (o200k: [\r\n/]*)
	if r == ' ' && i+1 < len(s) {
		if _, n2, c2 := char(s, i+1); c2 == classOther {
			return newlines(s, run(s, i+1+n2, classOther), slash)
		}
	}
	if c == classOther {
		return newlines(s, run(s, i+n, classOther), slash)
	}
	// \s*[\r\n]+ : the longest whitespace run ending in \r or \n, that is,
	// up to and including the run's last \r or \n.
	j, lastNL := i, -1
	for j < len(s) {
		r2, n2, c2 := char(s, j)
		if c2 != classSpace {
			break
		}
		if r2 == '\r' || r2 == '\n' {
			lastNL = j
		}
		j += n2
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	return spaceRun(s, i)
}

// contraction returns the byte length of the contraction suffix ("s",
// "t", "re", "ve", "m", "ll", "d") at s[j:], or 0; fold makes it
// case-insensitive (see preStyle).
func contraction(s string, j int, fold bool) int {
	lower := func(k int) byte {
		if k >= len(s) {
			return 0
		}
		c := s[k]
		if fold && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	if fold && strings.HasPrefix(s[j:], "\u017f") {
		return len("\u017f") // "ſ" folds to "s"
	}
	switch lower(j) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if lower(j+1) == 'e' {
			return 2
		}
	case 'l':
		if lower(j+1) == 'l' {
			return 2
		}
	}
	return 0
}

// run returns the end of the run of class c that continues at s[j].
func run(s string, j int, c charClass) int {
	for j < len(s) {
		_, n, c2 := char(s, j)
		if c2 != c {
			break
		}
		j += n
	}
	return j
}

// newlines returns the end of the run of '\r' and '\n' at s[j]: [\r\n]*;
// slash adds '/': [\r\n/]*.
func newlines(s string, j int, slash bool) int {
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// spaceRun implements `\s+(?!\S)|\s+` at a whitespace character s[i]: the
// whole whitespace run if it ends the text; otherwise the run without its
// last character (which then prefixes the next word), unless the run is a
// single character.
func spaceRun(s string, i int) int {
	j, last := i, i
	for j < len(s) {
		_, n, c := char(s, j)
		if c != classSpace {
			break
		}
		last = j
		j += n
	}
	if j == len(s) || last == i {
		return j
	}
	return last
}
