package tokenizer

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestTok512(t *testing.T) {
	tk := loadTok512(t)
	if got, want := tk.VocabSize(), 512; got != want {
		t.Fatalf("VocabSize() = %d, want %d", got, want)
	}
	if tk.BOS() != 1 || tk.EOS() != 2 || tk.Kind() != SentencePieceBPE {
		t.Fatalf("BOS, EOS, Kind = %d, %d, %v, want 1, 2, llama", tk.BOS(), tk.EOS(), tk.Kind())
	}
	// The file marks no types: byte tokens are found by spelling, BOS/EOS
	// become control tokens.
	for id, want := range map[int]TokenType{0: Unknown, 1: Control, 2: Control, 3: Byte, 258: Byte, 259: Normal, 511: Normal} {
		if got := tk.TokenType(id); got != want {
			t.Errorf("TokenType(%d) = %v, want %v", id, got, want)
		}
	}

	tests := []struct {
		name string
		in   string
		want []int // nil: only check the round trip
	}{
		// README of stories260K: run.c and llama.cpp agree on this.
		{"once upon a time", "Once upon a time", []int{1, 403, 407, 261, 378}},
		{"empty", "", []int{1}},
		// " " is piece 410; "\n" is not a piece, so byte token 0x0A+3 = 13.
		{"spaces and newlines", "  a\n\nb ", []int{1, 410, 410, 261, 13, 13, 430, 410}},
		{"ascii", `Tom said, "I can't find my red ball!" Then he looked under the bed.`, nil},
		// é, 世, 界 and 🙂 are not pieces: byte fallback, ids byte+3.
		{"byte fallback", "héllo 世界 🙂", []int{1, 270, 485, 306, 414, 410, 231, 187, 153, 234, 152, 143, 410, 243, 162, 156, 133}},
		{"control bytes", "\x00\x01\t~\x7f", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tk.Encode(tc.in, true)
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q, true) = %v, want %v", tc.in, got, tc.want)
			}
			if ref := newReference(tk, Vocab{}).encode(tc.in, true); !slices.Equal(got, ref) {
				t.Errorf("Encode(%q, true) = %v, reference %v", tc.in, got, ref)
			}
			if back := tk.Decode(got); back != tc.in {
				t.Errorf("Decode(%v) = %q, want %q", got, back, tc.in)
			}
		})
	}
}

// TestTok512EvalStories checks the token count of the shared eval text that
// its README states (16,544 tokens including BOS) and the round trip.
func TestTok512EvalStories(t *testing.T) {
	tk := loadTok512(t)
	b, err := os.ReadFile(sharedFile(t, "eval-stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode(string(b), true)
	if len(ids) != 16544 {
		t.Errorf("len(Encode(eval-stories.txt, true)) = %d, want 16544", len(ids))
	}
	if tk.Decode(ids) != string(b) {
		t.Errorf("Decode(Encode(eval-stories.txt)) differs from the text")
	}
}

// TestSentencePieceHand checks the hand-built "▁" vocabulary (see
// handSPMVocab for ids and scores). Byte token for byte b is b+3. Every input
// gets BOS (1) and the prefix space, so "x" is encoded as "▁x".
func TestSentencePieceHand(t *testing.T) {
	tk := mustNew(t, handSPMVocab())
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"empty", "", []int{1}},
		// ▁ a b c: candidate pairs ▁a -5, ab -3, bc -2; bc (highest) first:
		// ▁ a bc; then ▁a -5 vs a+bc = abc -4: abc; "▁abc" is no piece.
		{"score order", "abc", []int{1, 259, 272}},
		// ▁ b a a a: "▁b", "ba" are no pieces; aa -7 at two places ties, the
		// leftmost wins: ▁ b aa a; "baa", "aaa" are no pieces.
		{"tie leftmost", "baaa", []int{1, 259, 261, 275, 260}},
		// ▁ a ▁ ▁ b: ▁▁ -1 beats ▁a -5: ▁ a ▁▁ b, then ▁a: ▁a ▁▁ b.
		{"space run", "a  b", []int{1, 273, 269, 261}},
		// ▁▁▁▁: three tied ▁▁ pairs, leftmost first: ▁▁ ▁ ▁, then ▁▁ ▁▁.
		{"only spaces", "   ", []int{1, 269, 269}},
		// "\n" is no piece and stays alone: byte token 0x0A+3 = 13.
		{"newline", "a\nb", []int{1, 273, 13, 261}},
		{"newlines only", "\n\n", []int{1, 259, 13, 13}},
		// ▁ 1 2 3: only 12 (-6) is a piece: ▁ 12 3.
		{"digits", "123", []int{1, 259, 274, 265}},
		// ▁ I ' l l: ll -8 beats ▁I -9; "'" (0x27) is no piece: 0x27+3 = 42.
		{"contraction", "I'll", []int{1, 277, 42, 276}},
		// 世 is piece 266; 界 = E7 95 8C falls back to 234, 152, 143.
		{"cjk", "世界", []int{1, 259, 266, 234, 152, 143}},
		// 🙂 = F0 9F 99 82: 243, 162, 156, 133.
		{"emoji", "🙂", []int{1, 259, 243, 162, 156, 133}},
		// Plain Encode does not know special tokens: < | x | > are bytes
		// 0x3C 0x7C 0x78 0x7C 0x3E.
		{"special as text", "<|x|>", []int{1, 259, 63, 127, 123, 127, 65}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tk.Encode(tc.in, true)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q, true) = %v, want %v", tc.in, got, tc.want)
			}
			if back := tk.Decode(got); back != tc.in {
				t.Errorf("Decode(%v) = %q, want %q", got, back, tc.in)
			}
		})
	}
}

func TestSentencePieceSpecials(t *testing.T) {
	tk := mustNew(t, handSPMVocab())
	tests := []struct {
		name string
		in   string
		want []int
	}{
		// <s> is control id 1 (after the added BOS); the text after a
		// special gets the prefix space again, as in llama.cpp: "▁ab" is
		// ▁ ab (ab -3 beats ▁a -5); <|x|> is user-defined 278; "▁c" is ▁ c.
		{"control and user-defined", "<s>ab<|x|>c", []int{1, 1, 259, 270, spmUserDefined, 259, 262}},
		{"text first", "a</s>", []int{1, 273, 2}},
		{"only special", "</s>", []int{1, 2}},
		{"unknown token text", "<unk>", []int{1, 0}},
		{"no specials", "abc", []int{1, 259, 272}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tk.EncodeWithSpecials(tc.in, true); !slices.Equal(got, tc.want) {
				t.Errorf("EncodeWithSpecials(%q, true) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestSentencePieceReference compares the heap implementation with the
// O(n²) reference on random text.
func TestSentencePieceReference(t *testing.T) {
	vocabs := map[string]func(testing.TB) *Tokenizer{
		"hand": func(tb testing.TB) *Tokenizer { return mustNew(tb, handSPMVocab()) },
		"tok512": func(tb testing.TB) *Tokenizer {
			if _, ok := lookupShared("tok512.bin"); !ok && os.Getenv("CI") != "true" {
				return nil
			}
			return loadTok512(tb)
		},
	}
	for name, load := range vocabs {
		t.Run(name, func(t *testing.T) {
			tk := load(t)
			if tk == nil {
				t.Skip("shared fixture not available")
			}
			ref := newReference(tk, Vocab{})
			rng := rand.New(rand.NewPCG(3, 4))
			for range 1500 {
				s := randomText(rng, 30)
				got, want := tk.Encode(s, true), ref.encode(s, true)
				if !slices.Equal(got, want) {
					t.Fatalf("Encode(%q) = %v, reference %v", s, got, want)
				}
			}
		})
	}
}

// TestTok512Metaspace re-spells tok512 the way llama.cpp's converter does
// for stories260K.gguf ("▁" for spaces, <unk>/<s>/</s>, explicit types) and
// checks that both spellings encode and decode alike.
func TestTok512Metaspace(t *testing.T) {
	plain := loadTok512(t)
	v := Vocab{Kind: SentencePieceBPE, BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true, SpaceIsMetaspace: true}
	for id := range plain.VocabSize() {
		tok, typ := strings.ReplaceAll(plain.Token(id), " ", "▁"), plain.TokenType(id)
		switch id {
		case 0, 1, 2:
			tok = []string{"<unk>", "<s>", "</s>"}[id]
		}
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, plain.scores[id])
	}
	gguf := mustNew(t, v)
	rng := rand.New(rand.NewPCG(7, 8))
	text := corpus()
	for i := range 300 {
		s := randomText(rng, 30)
		if i%2 == 0 {
			start := rng.IntN(len(text))
			s = text[start:min(len(text), start+rng.IntN(300))]
		}
		s = strings.ReplaceAll(s, "▁", "_")
		got, want := gguf.Encode(s, true), plain.Encode(s, true)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) with ▁ spelling = %v, with spaces %v", s, got, want)
		}
		if back := gguf.Decode(got); back != s {
			t.Fatalf("Decode(%v) = %q, want %q", got, back, s)
		}
	}
}
