package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestByteAlphabet(t *testing.T) {
	for b, want := range map[byte]string{' ': "Ġ", '\n': "Ċ", '!': "!", 'a': "a", 0xE4: "ä", 0x96: "ĸ", 0xA0: "ł", 0xAD: "Ń", 0x00: "Ā"} {
		if got := byteAlphabet[b]; got != want {
			t.Errorf("byteAlphabet[%#x] = %q, want %q", b, got, want)
		}
	}
	seen := map[string]bool{}
	for b := range 256 {
		s := byteAlphabet[b]
		if seen[s] {
			t.Fatalf("byteAlphabet[%#x] = %q is not unique", b, s)
		}
		seen[s] = true
		if got := decodeByteAlphabet(s); got != string([]byte{byte(b)}) {
			t.Errorf("decodeByteAlphabet(%q) = %q, want %q", s, got, []byte{byte(b)})
		}
	}
}

// TestByteLevelHand checks the hand-built vocabulary (see handBPEVocab: ids
// 0..255 are the bytes themselves, merges in bpeMerges) under each
// pre-tokenizer. The pre-token splits come from TestPreTokenizer; within a
// pre-token the lowest-ranked merge applies first.
func TestByteLevelHand(t *testing.T) {
	tests := []struct {
		name                string
		in                  string
		gpt2, llama3, qwen2 []int
	}{
		// "I" | "'ll": ' l l -> ll (rank 3) -> 'll (rank 4) = 260.
		{"contraction", "I'll", []int{73, 260}, []int{73, 260}, []int{73, 260}},
		// "DON" -> ON (10) -> DON (11) = 267. gpt2 is case-sensitive: "'"
		// (39) and "T" (84) are separate pre-tokens; llama3/qwen2 keep "'T"
		// together and merge it (rank 12) = 268.
		{"contraction uppercase", "DON'T", []int{267, 39, 84}, []int{267, 268}, []int{267, 268}},
		// gpt2 "1234": 12 (5) and 34 (6) before 12+3 (7): 12 34 = 261 262.
		// llama3 "123" | "4": 12 then 123 = 263, and 52. qwen2: each digit.
		{"digits", "1234", []int{261, 262}, []int{263, 52}, []int{49, 50, 51, 52}},
		// gpt2 "a" " " " b" "\n" "\n" "c" "  "; llama3 keeps "\n\n" (rank
		// 9, 265). "  " at the end merges to ĠĠ (rank 8, 264); " b" has no
		// merge: Ġ b = 32 98.
		{"spaces and newlines", "a  b\n\nc  ",
			[]int{97, 32, 32, 98, 10, 10, 99, 264},
			[]int{97, 32, 32, 98, 265, 99, 264},
			[]int{97, 32, 32, 98, 265, 99, 264}},
		// " the" twice: Ġt (0), he (1), Ġthe (2) = 258.
		{"words", " the the", []int{258, 258}, []int{258, 258}, []int{258, 258}},
		// 世 = E4 B8 96 -> ä¸ (13) -> ä¸ĸ (14) = 270; 界 = E7 95 8C has no
		// merges: 231 149 140.
		{"cjk", "世界", []int{270, 231, 149, 140}, []int{270, 231, 149, 140}, []int{270, 231, 149, 140}},
		// 🙂! is one punctuation pre-token: F0 9F -> ðŁ (15), + 99 -> ðŁĻ
		// (16) = 272; 0x82 = 130 and "!" = 33 stay bytes.
		{"emoji", "🙂!", []int{272, 130, 33}, []int{272, 130, 33}, []int{272, 130, 33}},
		// a a a: the two "a a" pairs tie at rank 17; leftmost: aa a.
		{"tie leftmost", "aaa", []int{273, 97}, []int{273, 97}, []int{273, 97}},
		// "xyz" is token 274 but no merge builds it: only llama3, which
		// looks whole pre-tokens up first (ignore_merges), finds it.
		{"whole word lookup", "xyz", []int{120, 121, 122}, []int{bpeXYZ}, []int{120, 121, 122}},
		// Plain Encode treats special text as text; the gpt2 pieces are
		// "<|" "eot" "_" "id" "|>", the llama3 ones "<|" "eot" "_id" "|>",
		// with the same bytes and no merges.
		{"special as text", "<|eot_id|>",
			[]int{60, 124, 101, 111, 116, 95, 105, 100, 124, 62},
			[]int{60, 124, 101, 111, 116, 95, 105, 100, 124, 62},
			[]int{60, 124, 101, 111, 116, 95, 105, 100, 124, 62}},
		{"empty", "", nil, nil, nil},
	}
	for _, style := range []string{"gpt2", "llama3", "qwen2"} {
		v := handBPEVocab(style)
		tk := mustNew(t, v)
		ref := newReference(tk, v)
		for _, tc := range tests {
			want := map[string][]int{"gpt2": tc.gpt2, "llama3": tc.llama3, "qwen2": tc.qwen2}[style]
			t.Run(style+"/"+tc.name, func(t *testing.T) {
				got := tk.Encode(tc.in, false)
				if !slices.Equal(got, want) {
					t.Errorf("Encode(%q, false) = %v, want %v", tc.in, got, want)
				}
				if r := ref.encode(tc.in, false); !slices.Equal(got, r) {
					t.Errorf("Encode(%q, false) = %v, reference %v", tc.in, got, r)
				}
				if back := tk.Decode(got); back != tc.in {
					t.Errorf("Decode(%v) = %q, want %q", got, back, tc.in)
				}
				withBOS := tk.Encode(tc.in, true)
				if len(withBOS) == 0 || withBOS[0] != bpeBOT || !slices.Equal(withBOS[1:], got) {
					t.Errorf("Encode(%q, true) = %v, want BOS %d then %v", tc.in, withBOS, bpeBOT, got)
				}
			})
		}
	}
}

func TestByteLevelSpecials(t *testing.T) {
	tk := mustNew(t, handBPEVocab("llama3"))
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"chat markers", "<|begin_of_text|>I'll<|eot_id|>", []int{bpeBOT, 73, 260, bpeEOT}},
		// "<|end" (user-defined) and "<|endoftext|>" (control) both start
		// here; the longest match wins.
		{"longest match", "<|endoftext|>", []int{bpeEndOfText}},
		{"shorter match", "<|endof", []int{bpeEndUser, 111, 102}},
		{"adjacent", "<|eot_id|><|eot_id|>", []int{bpeEOT, bpeEOT}},
		// Text between specials is pre-tokenized on its own: " the" keeps
		// its space.
		{"text between", "a<|eot_id|> the", []int{97, bpeEOT, 258}},
		{"no specials", "aaa", []int{273, 97}},
		{"partial marker", "<|eot_id", []int{60, 124, 101, 111, 116, 95, 105, 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tk.EncodeWithSpecials(tc.in, false); !slices.Equal(got, tc.want) {
				t.Errorf("EncodeWithSpecials(%q, false) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	if got, want := tk.DecodeWithSpecials([]int{bpeBOT, 73, 260, bpeEOT}), "<|begin_of_text|>I'll<|eot_id|>"; got != want {
		t.Errorf("DecodeWithSpecials = %q, want %q", got, want)
	}
	if got, want := tk.Decode([]int{bpeBOT, 73, 260, bpeEOT}), "I'll"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
}

// TestByteLevelReference compares the heap implementation with the O(n²)
// reference on random text, for the hand-built vocabulary under every
// pre-tokenizer and for a vocabulary trained on the stories text.
func TestByteLevelReference(t *testing.T) {
	vocabs := map[string]Vocab{
		"hand-gpt2":   handBPEVocab("gpt2"),
		"hand-llama3": handBPEVocab("llama3"),
		"hand-qwen2":  handBPEVocab("qwen2"),
		"trained":     trainedBPE(),
	}
	for name, v := range vocabs {
		t.Run(name, func(t *testing.T) {
			tk := mustNew(t, v)
			ref := newReference(tk, v)
			rng := rand.New(rand.NewPCG(5, 6))
			text := corpus()
			for i := range 1500 {
				s := randomText(rng, 30)
				if i%3 == 0 { // real words, where merges apply
					start := rng.IntN(len(text))
					s = text[start:min(len(text), start+rng.IntN(200))]
				}
				if got, want := tk.Encode(s, false), ref.encode(s, false); !slices.Equal(got, want) {
					t.Fatalf("Encode(%q) = %v, reference %v", s, got, want)
				}
			}
		})
	}
}
