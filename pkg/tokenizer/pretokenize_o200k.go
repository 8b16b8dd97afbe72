package tokenizer

import "unicode"

// The o200k pre-tokenizer (OpenAI's o200k_base and o200k_harmony, GPT-4o
// and GPT-OSS; llama.cpp's "gpt-4o"):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with the same semantics as the other styles (find-all, leftmost-first
// alternation with backtracking). A word is an optional non-letter,
// non-digit, non-newline character, then "upper" characters (Lu, Lt, Lm,
// Lo, M) and "lower" ones (Ll, Lm, Lo, M) — Lm, Lo and marks are both —
// and an optional contraction. llama.cpp approximates the classes with
// [^a-z] and [^A-Z] over letters, which differs from this outside ASCII.
const hfPatternO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// caseOf says whether a character is in o200k's upper class
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and its lower class
// [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func caseOf(r rune, c charClass) (upper, lower bool) {
	switch {
	case r < 0x80:
		return 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z'
	case c == classLetter:
		switch {
		case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
			return true, false
		case unicode.Is(unicode.Ll, r):
			return false, true
		}
		return true, true // Lm, Lo
	case c == classOther && unicode.Is(unicode.M, r):
		return true, true
	}
	return false, false
}

// o200kWord matches `U*W+` (upperFirst false) or `U+W*` (true), then the
// optional contraction, at s[j]; it returns the end, or -1.
func o200kWord(s string, j int, upperFirst bool) int {
	// The characters of the run of U ∪ W at s[j], with their classes.
	type ch struct {
		end          int
		upper, lower bool
	}
	var buf [32]ch
	run := buf[:0]
	for k := j; k < len(s); {
		r, n, c := char(s, k)
		u, l := caseOf(r, c)
		if !u && !l {
			break
		}
		k += n
		run = append(run, ch{k, u, l})
	}
	u := 0 // the maximal U prefix
	for u < len(run) && run[u].upper {
		u++
	}
	start := -1 // where the W part starts
	if upperFirst {
		if u == 0 {
			return -1
		}
		start = u
	} else {
		// U* gives back characters until the next one is in W (W+ needs
		// one).
		for k := u; k >= 0; k-- {
			if k < len(run) && run[k].lower {
				start = k
				break
			}
		}
		if start < 0 {
			return -1
		}
	}
	w := start
	for w < len(run) && run[w].lower {
		w++
	}
	end := j
	if w > 0 {
		end = run[w-1].end
	}
	if end < len(s) && s[end] == '\'' {
		if k := contraction(s, end+1, true); k > 0 {
			end += 1 + k
		}
	}
	return end
}

func nextO200k(s string, i int) int {
	r, n, c := char(s, i)
	// [^\r\n\p{L}\p{N}]? before the words: with it (when the character
	// allows), then without.
	prefix := c != classLetter && c != classNumber && r != '\r' && r != '\n' && i+n < len(s)
	for _, upperFirst := range []bool{false, true} {
		if prefix {
			if e := o200kWord(s, i+n, upperFirst); e >= 0 {
				return e
			}
		}
		if e := o200kWord(s, i, upperFirst); e > i {
			return e
		}
	}
	// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ (as llama3,
	// with '/' after the punctuation).
	return llama3Tail(s, i, r, n, c, 3, true)
}
