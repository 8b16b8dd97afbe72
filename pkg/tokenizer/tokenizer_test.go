package tokenizer

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNewErrors(t *testing.T) {
	spm := handSPMVocab
	bpe := func() Vocab { return handBPEVocab("gpt2") }
	tests := []struct {
		name   string
		vocab  func() Vocab
		target error
		msg    string // substring of the error
	}{
		{"no tokens", func() Vocab { return Vocab{Kind: SentencePieceBPE} }, ErrInvalidVocab, "no tokens"},
		{"no kind", func() Vocab { v := spm(); v.Kind = 0; return v }, ErrInvalidVocab, "unknown kind"},
		{"no scores", func() Vocab { v := spm(); v.Scores = nil; return v }, ErrInvalidVocab, "without scores"},
		{"short scores", func() Vocab { v := spm(); v.Scores = v.Scores[:10]; return v }, ErrInvalidVocab, "10 scores for 279 tokens"},
		{"nan score", func() Vocab { v := spm(); v.Scores[260] = float32(math.NaN()); return v }, ErrInvalidVocab, `token 260 "a" has a NaN score`},
		{"short types", func() Vocab { v := spm(); v.Types = v.Types[:1]; return v }, ErrInvalidVocab, "1 token types"},
		{"bad type", func() Vocab { v := spm(); v.Types[7] = 9; return v }, ErrInvalidVocab, "token 7"},
		{"bos out of range", func() Vocab { v := spm(); v.BOS = 279; return v }, ErrInvalidVocab, "BOS id 279"},
		{"eos negative", func() Vocab { v := spm(); v.EOS = -2; return v }, ErrInvalidVocab, "EOS id -2"},
		{"add bos without bos", func() Vocab { v := spm(); v.BOS = -1; return v }, ErrInvalidVocab, "AddBOS"},
		{"add eos without eos", func() Vocab { v := spm(); v.EOS, v.AddEOS = -1, true; return v }, ErrInvalidVocab, "AddEOS"},
		{"spm pre-tokenizer", func() Vocab { v := spm(); v.PreTokenizer = "gpt2"; return v }, ErrInvalidVocab, "pre-tokenizer"},
		{"spm bad byte token", func() Vocab { v := spm(); v.Tokens[3] = "<0xZZ>"; return v }, ErrInvalidVocab, `byte token 3 spelled "<0xZZ>"`},
		{"spm missing byte token", func() Vocab { v := spm(); v.Types[3+0x41], v.UNK = Normal, -1; v.Types[0] = Normal; return v }, ErrInvalidVocab, "<0x41>"},
		{"unknown pre-tokenizer", func() Vocab { v := bpe(); v.PreTokenizer = "falcon"; return v }, ErrUnknownPreTokenizer, `"falcon"; known: "gpt2"`},
		{"missing byte", func() Vocab { v := bpe(); v.Tokens[0x41] = "not A"; return v }, ErrInvalidVocab, `no token "A" for byte 0x41`},
		{"bad merge", func() Vocab { v := bpe(); v.Merges[3] = "ll"; return v }, ErrInvalidVocab, `merge 3 "ll"`},
		{"merge trailing space", func() Vocab { v := bpe(); v.Merges[3] = "l "; return v }, ErrInvalidVocab, `merge 3 "l "`},
		{"merge unknown left", func() Vocab { v := bpe(); v.Merges[2] = "Ġq he"; return v }, ErrInvalidVocab, `left half "Ġq"`},
		{"merge unknown right", func() Vocab { v := bpe(); v.Merges[2] = "Ġt hex"; return v }, ErrInvalidVocab, `right half "hex"`},
		{"merge unknown result", func() Vocab { v := bpe(); v.Merges[2] = "Ġt Ġt"; return v }, ErrInvalidVocab, `result "ĠtĠt"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := New(tc.vocab())
			if err == nil {
				t.Fatalf("New() = %v, nil; want error %v", tk, tc.target)
			}
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("New() error = %q, want %v containing %q", err, tc.target, tc.msg)
			}
		})
	}
}

func TestNewOptional(t *testing.T) {
	t.Run("spm unk instead of bytes", func(t *testing.T) {
		// No byte tokens at all: unknown characters become one UNK each.
		v := Vocab{Kind: SentencePieceBPE, Tokens: []string{"<unk>", "▁", "a"}, Scores: []float32{0, -1, -2},
			UNK: 0, BOS: -1, EOS: -1, PAD: -1, AddSpacePrefix: true, SpaceIsMetaspace: true}
		tk := mustNew(t, v)
		if got, want := tk.Encode("a世🙂", true), []int{1, 2, 0, 0}; !slices.Equal(got, want) {
			t.Errorf("Encode = %v, want %v", got, want)
		}
	})
	t.Run("byte-level unk for missing byte", func(t *testing.T) {
		v := handBPEVocab("gpt2")
		v.Tokens[0xFF] = "unused"
		v.Types[0xFF] = Unused
		v.UNK = 0xFF
		tk := mustNew(t, v)
		if got, want := tk.Encode("a\xff", false), []int{97, 0xFF}; !slices.Equal(got, want) {
			t.Errorf("Encode = %v, want %v", got, want)
		}
	})
	t.Run("add eos", func(t *testing.T) {
		v := handSPMVocab()
		v.AddEOS = true
		tk := mustNew(t, v)
		if got, want := tk.Encode("a", true), []int{1, 273, 2}; !slices.Equal(got, want) {
			t.Errorf("Encode(%q, true) = %v, want %v", "a", got, want)
		}
		if got, want := tk.Encode("a", false), []int{273}; !slices.Equal(got, want) {
			t.Errorf("Encode(%q, false) = %v, want %v", "a", got, want)
		}
	})
	t.Run("types from spelling", func(t *testing.T) {
		// Without Types, "<0xHH>" (either case) are byte tokens and the
		// special ids get their roles.
		v := handSPMVocab()
		v.Types = nil
		v.Tokens[3+0xAB] = "<0xab>"
		tk := mustNew(t, v)
		for id, want := range map[int]TokenType{0: Unknown, 1: Control, 2: Control, 3 + 0xAB: Byte, spmUserDefined: Normal} {
			if got := tk.TokenType(id); got != want {
				t.Errorf("TokenType(%d) = %v, want %v", id, got, want)
			}
		}
		if got, want := tk.Decode([]int{3 + 0xAB}), "\xab"; got != want {
			t.Errorf("Decode(<0xab>) = %q, want %q", got, want)
		}
	})
	t.Run("vocab copied", func(t *testing.T) {
		v := handSPMVocab()
		tk := mustNew(t, v)
		v.Tokens[260], v.Scores[272] = "zzz", 100
		if got, want := tk.Encode("abc", false), []int{259, 272}; !slices.Equal(got, want) {
			t.Errorf("after changing the Vocab, Encode = %v, want %v", got, want)
		}
	})
	t.Run("kind names", func(t *testing.T) {
		if SentencePieceBPE.String() != "llama" || ByteLevelBPE.String() != "gpt2" || Kind(9).String() != "Kind(9)" {
			t.Errorf("Kind names = %q, %q, %q", SentencePieceBPE, ByteLevelBPE, Kind(9))
		}
		if Byte.String() != "byte" || TokenType(0).String() != "normal" {
			t.Errorf("TokenType names = %q, %q", Byte, TokenType(0))
		}
	})
}

func TestDecode(t *testing.T) {
	tk := mustNew(t, handSPMVocab())
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		// The first piece, or the one after BOS, loses one leading space.
		{"after bos", []int{1, 273, 269, 261}, "a  b"},
		{"at start", []int{273, 269, 261}, "a  b"},
		{"only spaces", []int{1, 269, 269}, "   "},
		// Not after BOS (here after EOS) the space stays.
		{"after eos", []int{2, 273}, " a"},
		// Every BOS starts a text, so its next piece loses the space too.
		{"second sentence", []int{1, 273, 2, 1, 273}, "aa"},
		{"byte tokens", []int{1, 259, 243, 162, 156, 133}, "🙂"},
		{"split character", []int{243, 162}, "\xf0\x9f"},
		{"control", []int{0, 1, 2}, ""},
		{"out of range", []int{-1, 279, 1 << 40, 260}, "a"},
		{"user defined", []int{spmUserDefined, 260}, "<|x|>a"},
		{"empty", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tk.Decode(tc.ids); got != tc.want {
				t.Errorf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
	if got, want := tk.DecodeWithSpecials([]int{1, 273, 2, 0}), "<s>a</s><unk>"; got != want {
		t.Errorf("DecodeWithSpecials = %q, want %q", got, want)
	}
}

func TestTokenPiece(t *testing.T) {
	tk := mustNew(t, handSPMVocab())
	tests := []struct {
		name     string
		prev, id int
		want     string
	}{
		{"after bos", 1, 273, "a"},
		{"at start", -1, 273, "a"},
		{"mid text", 260, 273, " a"},
		{"metaspace", 260, 269, "  "},
		{"byte", 260, 3 + 0xF0, "\xf0"},
		{"control", 260, 2, ""},
		{"out of range", 260, 999, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tk.TokenPiece(tc.prev, tc.id); got != tc.want {
				t.Errorf("TokenPiece(%d, %d) = %q, want %q", tc.prev, tc.id, got, tc.want)
			}
		})
	}
	if got := tk.Token(259); got != "▁" {
		t.Errorf("Token(259) = %q, want %q", got, "▁")
	}
	if got := tk.Token(-5); got != "" {
		t.Errorf("Token(-5) = %q, want empty", got)
	}
}

func TestDecoder(t *testing.T) {
	spm := mustNew(t, handSPMVocab())
	bpe := mustNew(t, handBPEVocab("gpt2"))
	tests := []struct {
		name  string
		tk    *Tokenizer
		ids   []int
		parts []string // result of each Next, then Flush
	}{
		// 🙂 as four byte tokens: nothing until the fourth.
		{"byte tokens", spm, []int{1, 273, 259, 243, 162, 156, 133, 260}, []string{"", "a", " ", "", "", "", "🙂", "a", ""}},
		// ðŁĻ is three bytes of 🙂, 0x82 completes it.
		{"byte-level", bpe, []int{97, 272, 130, 33}, []string{"a", "", "🙂", "!", ""}},
		// An incomplete character at the end comes out of Flush.
		{"flush", spm, []int{260, 243, 162}, []string{"a", "", "", "\xf0\x9f"}},
		// A byte that cannot start or continue a character is passed on.
		{"invalid byte", spm, []int{260, 3 + 0xFF, 260}, []string{"a", "\xff", "a", ""}},
		// A lead byte interrupted by ASCII: both come out at once.
		{"interrupted", spm, []int{3 + 0xE4, 260}, []string{"", "\xe4a", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.tk.NewDecoder()
			var got []string
			for _, id := range tc.ids {
				got = append(got, d.Next(id))
			}
			got = append(got, d.Flush())
			if !slices.Equal(got, tc.parts) {
				t.Errorf("Next/Flush over %v = %q, want %q", tc.ids, got, tc.parts)
			}
			if all, want := strings.Join(got, ""), tc.tk.Decode(tc.ids); all != want {
				t.Errorf("joined = %q, Decode = %q", all, want)
			}
		})
	}
}

// TestConcurrentUse encodes and decodes from several goroutines at once;
// run with -race.
func TestConcurrentUse(t *testing.T) {
	for _, v := range []Vocab{handSPMVocab(), handBPEVocab("llama3")} {
		tk := mustNew(t, v)
		text := "I'll see 世界 🙂 <|eot_id|> 1234 the  end\n"
		want := tk.EncodeWithSpecials(text, true)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					if got := tk.EncodeWithSpecials(text, true); !slices.Equal(got, want) {
						t.Errorf("concurrent EncodeWithSpecials = %v, want %v", got, want)
						return
					}
					tk.Decode(want)
				}
			})
		}
		wg.Wait()
	}
}
