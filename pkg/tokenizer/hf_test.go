package tokenizer

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readHF returns testdata/hf/<dir>/tokenizer.json and, if present,
// tokenizer_config.json (nil otherwise).
func readHF(tb testing.TB, dir string) (tok, cfg []byte) {
	tb.Helper()
	tok, err := os.ReadFile(filepath.Join("testdata", "hf", dir, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err = os.ReadFile(filepath.Join("testdata", "hf", dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	return tok, cfg
}

// parseHFBytes calls ParseHF, with no config reader for a nil cfg.
func parseHFBytes(tok, cfg []byte) (Vocab, HFConfig, error) {
	if cfg == nil {
		return ParseHF(bytes.NewReader(tok), nil)
	}
	return ParseHF(bytes.NewReader(tok), bytes.NewReader(cfg))
}

// loadHF parses and builds a testdata/hf fixture.
func loadHF(tb testing.TB, dir string) (*Tokenizer, Vocab, HFConfig) {
	tb.Helper()
	tok, cfg := readHF(tb, dir)
	v, c, err := parseHFBytes(tok, cfg)
	if err != nil {
		tb.Fatalf("ParseHF(%s): %v", dir, err)
	}
	return mustNew(tb, v), v, c
}

// hfCase is one encoding of a fixture. Unless specials is set it is
// Encode(text, true); with specials, EncodeWithSpecials(text, false).
type hfCase struct {
	name     string
	text     string
	specials bool
	want     []int
}

func (c hfCase) encode(tk *Tokenizer) []int {
	if c.specials {
		return tk.EncodeWithSpecials(c.text, false)
	}
	return tk.Encode(c.text, true)
}

// The expected ids of the fixtures below were derived by hand from the
// fixture tables in hf_fixtures_test.go and the BPE rules; the comments
// give the derivations.
//
// llama2 (Prepend + Replace normalizer): ids 0 <unk>, 1 <s>, 2 </s>,
// 3..258 byte tokens (byte b is 3+b), then spmPiecesHF from 259: 259 "▁▁",
// 260 ll, 261 ▁H, 262 ell, 263 ▁Hell, 264 ▁Hello, 265 ▁w, 266 or, 267 ▁wor,
// 268 ld, 269 ▁world, 270 ▁Hi, 271 ▁t, 272 he, 273 ▁the, 274 ▁, 275 e,
// 276 l, 277 o, 278 H, 279 w, 280 r, 281 d, 282 i, 283 t, 284 h, 285 世,
// 286 !, 287 1, 288 2, 289 3, 290 a. Merge ranks follow spmMergesHF, with
// "▁ ▁" last.
var llama2HFCases = []hfCase{
	// "▁Hello▁world": l+l (rank 0), ▁+H, e+ll, ▁H+ell, ▁Hell+o give
	// ▁Hello; ▁+w, o+r, ▁w+or, l+d, ▁wor+ld give ▁world. BOS first
	// (add_bos_token).
	{"words", "Hello world", false, []int{1, 264, 269}},
	// The normalizer prepends "▁" even before a space: "▁▁Hello". ▁+H
	// (rank 1) wins over ▁+▁ (last): "▁", "▁Hello". (Llama 2's published
	// " Hello" is [1, 29871, 15043], the same shape.)
	{"leading space", " Hello", false, []int{1, 274, 264}},
	// "▁Hi▁▁▁the": ▁Hi and ▁the form first, the two ▁ left merge into ▁▁.
	{"space run", "Hi   the", false, []int{1, 270, 259, 273}},
	// 界 (E7 95 8C) is not a piece: byte tokens 3+0xE7, 3+0x95, 3+0x8C.
	{"cjk byte fallback", "世界!", false, []int{1, 274, 285, 234, 152, 143, 286}},
	// 🙂 = F0 9F 99 82.
	{"emoji", "🙂", false, []int{1, 274, 243, 162, 156, 133}},
	// '\n' is <0x0A> = 13; 'b' is no piece: <0x62> = 101.
	{"newline", "a\nb", false, []int{1, 274, 290, 13, 101}},
	{"digits", "123", false, []int{1, 274, 287, 288, 289}},
	{"empty", "", false, []int{1}},
	// Each stretch after a special token gets the prefix again (Prepend
	// normalizes every non-special segment).
	{"specials", "<s>Hello</s>", true, []int{1, 264, 2}},
	{"unk in text", "Hi<unk>", true, []int{270, 0}},
}

// mistral (Metaspace, prepend_scheme "first"): the same pieces two ids
// later (5 leading specials: 3 [INST], 4 [/INST]; byte b is 5+b): 261 "▁▁",
// 262 ll, 264 ell, 266 ▁Hello, 271 ▁world, 272 ▁Hi, 275 ▁the, 276 ▁,
// 279 o, 280 H, 284 i, 287 世, 288 !.
var mistralHFCases = []hfCase{
	{"words", "Hello world", false, []int{1, 266, 271}},
	// Metaspace replaces the space and sees "▁Hello", which starts with
	// "▁": nothing is prepended (tokenizers' Metaspace tests: " Hey" is
	// "▁Hey").
	{"leading space", " Hello", false, []int{1, 266}},
	{"space run", "Hi   the", false, []int{1, 272, 261, 275}},
	// After [INST] the text is not at offset 0: no prefix, so "Hello" is
	// H, ell, o (no merge makes "Hello" without "▁"). Compare transformers'
	// Llama test with legacy=False: "<s> Hello<s>how" is "<s>", "▁Hello",
	// "<s>", "how".
	{"after special", "[INST]Hello[/INST]", true, []int{3, 280, 264, 279, 4}},
	{"after special with space", "[INST] Hello[/INST]", true, []int{3, 266, 4}},
	// 世 is 287, "!" 288; 界's bytes are 5+0xE7, 5+0x95, 5+0x8C.
	{"cjk byte fallback", "世界!", false, []int{1, 276, 287, 236, 154, 145, 288}},
}

// llama3 (Split llama3 + ByteLevel, ignore_merges): ids 0..255 are the
// byte alphabet in GPT-2 order (printable ASCII c is c-33, ' ' 220, '\n'
// 198, byte 0xE7 163, 0x95 243, 0x8C 234, 0xF0 172, 0x9F 253, 0x99 247,
// 0x82 224), then 256 Ġw, 257 or, 258 Ġwor, 259 ld, 260 Ġworld, 261 12,
// 262 123, 263 'l, 264 'll, 265 ĠD, 266 ON, 267 ĠDON, 268 'T, 269 ĠĠ,
// 270 ĊĊ, 271 ä¸, 272 ä¸ĸ, 273 Ġb, 274 Hello, 275 456 (Hello and 456 have
// no merges), then 276 <|begin_of_text|> .. 280 <|eot_id|>.
var llama3HFCases = []hfCase{
	// "Hello" is found whole (ignore_merges) although no merge builds it;
	// " worlds" is not a token and merges to Ġworld + s (115-33 = 82).
	{"whole words", "Hello worlds", false, []int{276, 274, 260, 82}},
	// \p{N}{1,3}: "123" (whole token), "456" (whole, no merges), "7" (22).
	{"digits", "1234567", false, []int{276, 262, 275, 22}},
	// I (40), 'll, ĠDON, 'T: the contractions are case-insensitive.
	{"contractions", "I'll DON'T", false, []int{276, 40, 264, 267, 268}},
	// "a" (64), "  \n\n" (\s*[\r\n]+: ĠĠ + ĊĊ), " b" (Ġb).
	{"whitespace", "a  \n\n b", false, []int{276, 64, 269, 270, 273}},
	// 世 = E4 B8 96 merges to ä¸ĸ; 界 = E7 95 8C stays bytes.
	{"cjk", "世界", false, []int{276, 272, 163, 243, 234}},
	// 🙂! is one punctuation pre-token without merges: F0 9F 99 82 21.
	{"emoji", "🙂!", false, []int{276, 172, 253, 247, 224, 0}},
	{"specials", "<|begin_of_text|>Hi<|eot_id|>", true, []int{276, 39, 72, 280}},
}

// qwen25 (NFC, Split qwen2 + ByteLevel, no ignore_merges, no BOS): the
// byte alphabet, then 256 Ġw, 257 or, 258 Ġwor, 259 ld, 260 Ġworld, 261 He,
// 262 ll, 263 Hell, 264 Hello, 265 Ã© (é = C3 A9), 266 ca, 267 fÃ©,
// 268 ĠĠ, 269 :Ċ, 270 xyz (no merges), then 271 <|endoftext|>,
// 272 <|im_start|>, 273 <|im_end|>, 274 <tool_call> (not special).
var qwen25HFCases = []hfCase{
	{"words", "Hello world", false, []int{264, 260}},
	// NFC: "cafe\u0301" (NFD) becomes "café" and encodes like it: Ã+©,
	// c+a, f+Ã©.
	{"nfc", "café", false, []int{266, 267}},
	{"nfd", "cafe\u0301", false, []int{266, 267}},
	// \p{N}: one digit each ('1' is 16).
	{"digits", "12345", false, []int{16, 17, 18, 19, 20}},
	// "x", ":\n" (punctuation with its newline), "   " (the run of four
	// spaces gives one to " y"), " y": ĠĠ+Ġ and Ġ+y have no merge for the
	// second pair. The published Qwen2.5 encoding of ":\n    return" has
	// the same split (":Ċ", "ĠĠĠ", "Ġreturn").
	{"code", "x:\n    y", false, []int{87, 269, 268, 220, 220, 88}},
	// No whole-word lookup: the token "xyz" is not found.
	{"no ignore_merges", "xyz", false, []int{87, 88, 89}},
	{"chat", "<|im_start|>user\nHi<|im_end|><tool_call>", true, []int{272, 84, 82, 68, 81, 198, 39, 72, 273, 274}},
}

// gpt2 (ByteLevel with the GPT-2 regex): the byte alphabet, then 256 Ġt,
// 257 he, 258 Ġthe, 259 12, 260 123, 261 45, 262 's, 263 ĠĠ, 264 He,
// 265 ll, 266 Hell, 267 Hello, 268 <|endoftext|>. No config: no BOS/EOS.
var gpt2HFCases = []hfCase{
	// "Hello", " the", " 12345" (` ?\p{N}+` keeps the space): Ġ, 123, 45.
	{"words and digits", "Hello the 12345", false, []int{267, 258, 220, 260, 261}},
	// "it", "'s", " ", " x": the space run gives its last space to "x".
	{"contraction and spaces", "it's  x", false, []int{72, 83, 262, 220, 220, 87}},
	// "\n\n" before a letter splits into "\n", "\n".
	{"newlines", "a\n\nb", false, []int{64, 198, 198, 65}},
	{"special", "Hello<|endoftext|>", true, []int{267, 268}},
}

func TestParseHFFixtures(t *testing.T) {
	for _, fx := range []struct {
		dir   string
		cases []hfCase
	}{
		{"llama2", llama2HFCases},
		{"mistral", mistralHFCases},
		{"llama3", llama3HFCases},
		{"qwen25", qwen25HFCases},
		{"gpt2", gpt2HFCases},
	} {
		tk, v, _ := loadHF(t, fx.dir)
		ref := newReference(tk, v)
		for _, tc := range fx.cases {
			t.Run(fx.dir+"/"+tc.name, func(t *testing.T) {
				got := tc.encode(tk)
				if !slices.Equal(got, tc.want) {
					t.Errorf("encode(%q) = %v, want %v", tc.text, got, tc.want)
				}
				if !tc.specials {
					if r := ref.encode(tc.text, true); !slices.Equal(r, tc.want) {
						t.Errorf("reference(%q) = %v, want %v", tc.text, r, tc.want)
					}
				}
			})
		}
	}
}

// TestParseHFSettings checks what ParseHF reads besides the tokens.
func TestParseHFSettings(t *testing.T) {
	tests := []struct {
		dir  string
		want HFConfig
		// Vocab fields
		kind       Kind
		pre        string
		prefix     bool
		rule       PrefixRule
		metaspace  bool
		ignore     IgnoreMerges
		nfc        bool
		bos, eos   int
		unk, pad   int
		chatPrefix string
	}{
		{dir: "llama2", want: HFConfig{BOSToken: "<s>", EOSToken: "</s>", UnkToken: "<unk>", AddBOS: true, ModelMaxLength: math.MaxInt64},
			kind: SentencePieceBPE, prefix: true, rule: PrefixEachStretch, metaspace: true, bos: 1, eos: 2, unk: 0, pad: -1,
			chatPrefix: "{% for message in messages %}"},
		{dir: "mistral", want: HFConfig{BOSToken: "<s>", EOSToken: "</s>", UnkToken: "<unk>", AddBOS: true, ModelMaxLength: math.MaxInt64},
			kind: SentencePieceBPE, prefix: true, rule: PrefixFirstOnly, metaspace: true, bos: 1, eos: 2, unk: 0, pad: -1,
			chatPrefix: "{{ bos_token }}{% for message"}, // the "default" entry of the list
		{dir: "llama3", want: HFConfig{BOSToken: "<|begin_of_text|>", EOSToken: "<|eot_id|>", AddBOS: true, ModelMaxLength: math.MaxInt64},
			kind: ByteLevelBPE, pre: "llama3", ignore: IgnoreMergesOn, bos: 276, eos: 280, unk: -1, pad: -1,
			chatPrefix: "{% set loop_messages"},
		{dir: "qwen25", want: HFConfig{EOSToken: "<|im_end|>", PadToken: "<|endoftext|>", ModelMaxLength: 131072},
			kind: ByteLevelBPE, pre: "qwen2", ignore: IgnoreMergesOff, nfc: true, bos: -1, eos: 273, unk: -1, pad: 271,
			chatPrefix: "{%- for message"},
		{dir: "gpt2", want: HFConfig{},
			kind: ByteLevelBPE, pre: "gpt2", ignore: IgnoreMergesOff, bos: -1, eos: -1, unk: -1, pad: -1},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			tk, v, c := loadHF(t, tc.dir)
			gotTmpl := c.ChatTemplate
			c.ChatTemplate = ""
			if c != tc.want {
				t.Errorf("HFConfig = %+v, want %+v", c, tc.want)
			}
			if !strings.HasPrefix(gotTmpl, tc.chatPrefix) || (tc.chatPrefix == "") != (gotTmpl == "") {
				t.Errorf("ChatTemplate = %q, want prefix %q", gotTmpl, tc.chatPrefix)
			}
			if v.Kind != tc.kind || v.PreTokenizer != tc.pre || v.AddSpacePrefix != tc.prefix || v.PrefixRule != tc.rule ||
				v.SpaceIsMetaspace != tc.metaspace || v.IgnoreMerges != tc.ignore || v.NFC != tc.nfc || v.SplitOnSpace {
				t.Errorf("Vocab settings: Kind %v PreTokenizer %q AddSpacePrefix %v PrefixRule %v SpaceIsMetaspace %v IgnoreMerges %v NFC %v SplitOnSpace %v",
					v.Kind, v.PreTokenizer, v.AddSpacePrefix, v.PrefixRule, v.SpaceIsMetaspace, v.IgnoreMerges, v.NFC, v.SplitOnSpace)
			}
			if v.BOS != tc.bos || v.EOS != tc.eos || v.UNK != tc.unk || v.PAD != tc.pad {
				t.Errorf("BOS, EOS, UNK, PAD = %d, %d, %d, %d, want %d, %d, %d, %d", v.BOS, v.EOS, v.UNK, v.PAD, tc.bos, tc.eos, tc.unk, tc.pad)
			}
			if tk.BOS() != tc.bos || tk.EOS() != tc.eos {
				t.Errorf("Tokenizer BOS, EOS = %d, %d", tk.BOS(), tk.EOS())
			}
		})
	}
}

// TestParseHFTypes checks the token roles ParseHF assigns.
func TestParseHFTypes(t *testing.T) {
	tk, _, _ := loadHF(t, "llama2")
	for id, want := range map[int]TokenType{0: Unknown, 1: Control, 2: Control, 3: Byte, 13: Byte, 258: Byte, 259: Normal, 290: Normal} {
		if got := tk.TokenType(id); got != want {
			t.Errorf("llama2 TokenType(%d) = %v, want %v", id, got, want)
		}
	}
	tk, _, _ = loadHF(t, "qwen25")
	for id, want := range map[int]TokenType{0: Normal, 220: Normal, 270: Normal, 271: Control, 272: Control, 273: Control, 274: UserDefined} {
		if got := tk.TokenType(id); got != want {
			t.Errorf("qwen25 TokenType(%d) = %v, want %v", id, got, want)
		}
	}
}

// TestParseHFDecode checks decoding through the loaded vocabularies.
func TestParseHFDecode(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		ids  []int
		want string
	}{
		{"llama2", []int{1, 264, 269}, "Hello world"},
		{"llama2", []int{1, 274, 285, 234, 152, 143, 286}, "世界!"},
		// The space the user typed after [INST] stays: Decode drops a
		// leading space only at the start or after BOS (Hugging Face's
		// Strip decoder would drop it after skipping the specials).
		{"mistral", []int{1, 3, 266, 4}, " Hello"},
		{"mistral", []int{1, 266}, "Hello"},
		{"llama3", []int{276, 274, 260, 82}, "Hello worlds"},
		{"qwen25", []int{272, 84, 82, 68, 81, 198, 39, 72, 273, 274}, "user\nHi<tool_call>"},
		{"gpt2", []int{267, 258, 220, 260, 261}, "Hello the 12345"},
	} {
		tk, _, _ := loadHF(t, tc.dir)
		if got := tk.Decode(tc.ids); got != tc.want {
			t.Errorf("%s: Decode(%v) = %q, want %q", tc.dir, tc.ids, got, tc.want)
		}
	}
}

// TestHFPublishedQwen2Test runs the published vectors of transformers'
// tests/models/qwen2/test_tokenization_qwen2.py on its own vocabulary
// (testdata/hf/qwen2-transformers-test): test_python_full_tokenizer and
// test_slow_tokenizer_token_with_number_sign. The input covers NFC
// (U+03D2 U+0301 becomes U+03D3, bytes CF 93, the token "Ïĵ" = 267), digits
// split one by one (so the merge "0 1" never applies) and the newline kept
// with the punctuation before it (";}Ċ" = 266).
func TestHFPublishedQwen2Test(t *testing.T) {
	tk, _, _ := loadHF(t, "qwen2-transformers-test")
	for _, tc := range []struct {
		text string
		want []int
	}{
		{"lower lower newer 010;}\n<|endoftext|>\u03d2\u0301", []int{75, 78, 86, 260, 259, 260, 220, 77, 68, 86, 260, 220, 15, 16, 15, 266, 270, 267}},
		{" ###", []int{268, 269}},
	} {
		if got := tk.EncodeWithSpecials(tc.text, false); !slices.Equal(got, tc.want) {
			t.Errorf("EncodeWithSpecials(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// TestParseHFMergeForms checks that merges given as strings, as pairs and
// mixed give the same vocabulary.
func TestParseHFMergeForms(t *testing.T) {
	tok, _ := readHF(t, "gpt2")
	strs, _, err := parseHFBytes(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	pairs := bytes.Replace(tok, []byte(`"Ġ t"`), []byte(`["Ġ", "t"]`), 1)
	if bytes.Equal(pairs, tok) {
		t.Fatal("fixture changed: no merge \"Ġ t\"")
	}
	mixed, _, err := parseHFBytes(pairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(strs.Merges, mixed.Merges) {
		t.Errorf("mixed merges %q, want %q", mixed.Merges, strs.Merges)
	}
	// The llama3 fixture has pairs only.
	tk, v, _ := loadHF(t, "llama3")
	if v.Merges[0] != "Ġ w" || tk.VocabSize() != 281 {
		t.Errorf("llama3 Merges[0] = %q, VocabSize %d", v.Merges[0], tk.VocabSize())
	}
}

// TestParseHFMetaspaceVariants checks the Metaspace settings, including
// the defaults of files written by older tokenizers versions.
func TestParseHFMetaspaceVariants(t *testing.T) {
	tok, _ := readHF(t, "mistral")
	const orig = `"pre_tokenizer": {
    "type": "Metaspace",
    "replacement": "▁",
    "prepend_scheme": "first",
    "split": false
  }`
	if !bytes.Contains(tok, []byte(orig)) {
		t.Fatal("mistral fixture changed")
	}
	for _, tc := range []struct {
		name, pre string
		prefix    bool
		rule      PrefixRule
		split     bool
		spaced    []int // Encode(" Hi   the", false)
		plain     []int // Encode("Hi", false)
	}{
		// " Hi   the" starts with a space: no prefix, "▁Hi▁▁▁the". ▁t takes
		// the last ▁, and without split the other two merge into ▁▁ (261).
		{"first", `"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}`,
			true, PrefixFirstOnly, false, []int{272, 261, 275}, []int{272}},
		// With split the units "▁Hi", "▁", "▁", "▁the" merge separately.
		{"always split", `"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}`,
			true, PrefixUnlessSpace, true, []int{272, 276, 276, 275}, []int{272}},
		// Before tokenizers 0.19: add_prefix_space, always split.
		{"legacy", `"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}`,
			true, PrefixUnlessSpace, true, []int{272, 276, 276, 275}, []int{272}},
		// No prefix: "Hi" is H, i.
		{"never", `"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}`,
			false, PrefixEachStretch, true, []int{272, 276, 276, 275}, []int{280, 284}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Replace(tok, []byte(orig), []byte(tc.pre), 1)
			v, _, err := parseHFBytes(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.AddSpacePrefix != tc.prefix || v.PrefixRule != tc.rule || v.SplitOnSpace != tc.split || !v.SpaceIsMetaspace {
				t.Errorf("AddSpacePrefix %v PrefixRule %v SplitOnSpace %v SpaceIsMetaspace %v", v.AddSpacePrefix, v.PrefixRule, v.SplitOnSpace, v.SpaceIsMetaspace)
			}
			tk := mustNew(t, v)
			ref := newReference(tk, v)
			for _, c := range []struct {
				text string
				want []int
			}{{" Hi   the", tc.spaced}, {"Hi", tc.plain}} {
				if got := tk.Encode(c.text, false); !slices.Equal(got, c.want) {
					t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
				}
				if got := ref.encode(c.text, false); !slices.Equal(got, c.want) {
					t.Errorf("reference(%q) = %v, want %v", c.text, got, c.want)
				}
			}
		})
	}
}

// TestParseHFErrors edits the fixtures into broken or unsupported files.
func TestParseHFErrors(t *testing.T) {
	type edit struct{ old, new string }
	tests := []struct {
		name   string
		dir    string
		edits  []edit
		cfg    *string // replaces tokenizer_config.json
		target error
		msg    []string // substrings of the error
	}{
		{"unigram", "gpt2", []edit{{`"type": "BPE"`, `"type": "Unigram"`}}, nil, ErrUnsupported,
			[]string{"model.type", `"Unigram"`, "kvq supports BPE tokenizers"}},
		{"wordpiece", "gpt2", []edit{{`"type": "BPE"`, `"type": "WordPiece"`}}, nil, ErrUnsupported,
			[]string{"model.type", "WordPiece", "BPE"}},
		{"unknown merge token", "gpt2", []edit{{`"h e"`, `"h ☃"`}}, nil, ErrInvalidVocab,
			[]string{"model.merges[1]", `"☃" is not a token`}},
		{"merge result missing", "llama3", []edit{{`[
        "1",
        "2"
      ]`, `[
        "2",
        "1"
      ]`}}, nil, ErrInvalidVocab, []string{"model.merges[5]", `"21" is not a token`}},
		{"merge not a pair", "gpt2", []edit{{`"h e"`, `"h e x"`}}, nil, ErrHFFormat, []string{"model.merges[1]", `"h e x"`}},
		{"merge of a special", "gpt2", []edit{{`"h e"`, `"<|endoftext|> e"`}}, nil, ErrInvalidVocab, []string{"model.merges[1]", "special"}},
		{"duplicate id", "gpt2", []edit{{`"he": 257`, `"he": 256`}}, nil, ErrInvalidVocab,
			[]string{`model.vocab["he"]`, `id 256 already used by "Ġt"`}},
		{"id out of range", "gpt2", []edit{{`"he": 257`, `"he": 100000`}}, nil, ErrInvalidVocab,
			[]string{`model.vocab["he"]`, "id 100000 out of range"}},
		{"negative id", "gpt2", []edit{{`"he": 257`, `"he": -1`}}, nil, ErrInvalidVocab, []string{`model.vocab["he"]`, "out of range"}},
		{"fractional id", "gpt2", []edit{{`"he": 257`, `"he": 2.5`}}, nil, ErrHFFormat, []string{`model.vocab["he"]`, "not an integer"}},
		{"added id out of range", "gpt2", []edit{{`"id": 268`, `"id": 5000`}}, nil, ErrInvalidVocab, []string{"added_tokens[0]", "out of range"}},
		{"added id clash", "gpt2", []edit{{`"id": 268`, `"id": 5`}}, nil, ErrInvalidVocab, []string{"added_tokens[0]", "id 5 already used"}},
		{"added token missing content", "gpt2", []edit{{`"content": "<|endoftext|>",`, ``}}, nil, ErrHFFormat, []string{"added_tokens[0].content"}},
		{"vocab not an object", "gpt2", []edit{{`"vocab": {`, `"vocab": [{`}, {`"Hello": 267
    },`, `"Hello": 267
    }],`}}, nil, ErrHFFormat, []string{"model.vocab"}},
		{"unknown split pattern", "llama3", []edit{{`\\p{N}{1,3}`, `\\p{N}{1,2}`}}, nil, ErrUnknownPreTokenizer,
			[]string{"pre_tokenizer.pretokenizers[0].pattern.Regex", `\\p{N}{1,2}`, "GPT-2, Llama 3 and Qwen2"}},
		{"unknown normalizer", "qwen25", []edit{{`"type": "NFC"`, `"type": "NFKC"`}}, nil, ErrUnsupported, []string{"normalizer.type", "NFKC"}},
		{"byte level prefix space", "gpt2", []edit{{`"add_prefix_space": false`, `"add_prefix_space": true`}}, nil, ErrUnsupported,
			[]string{"pre_tokenizer.add_prefix_space"}},
		{"dropout", "gpt2", []edit{{`"dropout": null`, `"dropout": 0.1`}}, nil, ErrUnsupported, []string{"model.dropout"}},
		{"missing model", "gpt2", []edit{{`"model": {`, `"modelx": {`}}, nil, ErrHFFormat, []string{"model: missing"}},
		{"unknown unk", "llama2", []edit{{`"unk_token": "<unk>"`, `"unk_token": "<nope>"`}}, nil, ErrInvalidVocab, []string{"model.unk_token"}},
		{"missing byte token", "gpt2", []edit{{`"!": 0,`, `"!x": 0,`}}, nil, ErrInvalidVocab, []string{"model.vocab", `no token "!" for byte 0x21`}},
		{"wrong type", "gpt2", []edit{{`"fuse_unk": false`, `"fuse_unk": "no"`}}, nil, ErrHFFormat, []string{"model.fuse_unk", "string"}},
		{"template id mismatch", "llama3", []edit{{`"ids": [
              276
            ]`, `"ids": [
              277
            ]`}}, nil, ErrInvalidVocab, []string{`post_processor.processors[1].special_tokens["<|begin_of_text|>"]`}},
		{"config bos unknown", "llama3", nil, ptr(`{"bos_token": "<s>"}`), ErrInvalidVocab, []string{"tokenizer_config.json", "bos_token", `"<s>"`}},
		{"config add_eos without eos", "qwen25", nil, ptr(`{"add_eos_token": true, "eos_token": null}`), ErrInvalidVocab,
			[]string{"tokenizer_config.json", "add_eos_token"}},
		{"config bad template", "qwen25", nil, ptr(`{"chat_template": 3}`), ErrHFFormat, []string{"tokenizer_config.json", "chat_template"}},
		{"config syntax", "qwen25", nil, ptr("{\n  \"eos_token\": ,\n}"), ErrHFFormat, []string{"tokenizer_config.json:2:16"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, cfg := readHF(t, tc.dir)
			for _, e := range tc.edits {
				if !bytes.Contains(tok, []byte(e.old)) {
					t.Fatalf("fixture %s has no %q", tc.dir, e.old)
				}
				tok = bytes.Replace(tok, []byte(e.old), []byte(e.new), 1)
			}
			if tc.cfg != nil {
				cfg = []byte(*tc.cfg)
			}
			_, _, err := parseHFBytes(tok, cfg)
			if err == nil {
				t.Fatalf("ParseHF succeeded, want %v", tc.target)
			}
			var he *HFError
			if !errors.Is(err, tc.target) || !errors.As(err, &he) {
				t.Errorf("ParseHF error = %v (%T), want an *HFError wrapping %v", err, err, tc.target)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("ParseHF error = %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestParseHFSyntaxError checks the line and column of malformed JSON.
func TestParseHFSyntaxError(t *testing.T) {
	data := []byte("{\n  \"version\": \"1.0\",\n  \"model\": {\"type\": \"BPE\",, }\n}")
	_, _, err := parseHFBytes(data, nil)
	var he *HFError
	if !errors.As(err, &he) || !errors.Is(err, ErrHFFormat) {
		t.Fatalf("ParseHF error = %v, want an *HFError wrapping ErrHFFormat", err)
	}
	if he.Line != 3 || he.Column != 27 || !strings.Contains(err.Error(), "tokenizer.json:3:27") {
		t.Errorf("error at %d:%d (%v), want 3:27", he.Line, he.Column, err)
	}
	for _, s := range []string{"", "null", "[]", "\"x\"", "{}", "{\"model\": 3}"} {
		if _, _, err := parseHFBytes([]byte(s), nil); !errors.Is(err, ErrHFFormat) {
			t.Errorf("ParseHF(%q) error = %v, want ErrHFFormat", s, err)
		}
	}
}

// TestParseHFConfigValues checks the config value forms.
func TestParseHFConfigValues(t *testing.T) {
	tok, _ := readHF(t, "llama3")
	for _, tc := range []struct {
		cfg  string
		want HFConfig
	}{
		// No config keys: the template's BOS.
		{`{}`, HFConfig{BOSToken: "<|begin_of_text|>", AddBOS: true}},
		// add_bos_token false overrides the template.
		{`{"add_bos_token": false, "eos_token": {"content": "<|end_of_text|>"}}`, HFConfig{BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>"}},
		{`{"model_max_length": 8192, "chat_template": []}`, HFConfig{BOSToken: "<|begin_of_text|>", AddBOS: true, ModelMaxLength: 8192}},
		{`{"model_max_length": 1e30, "chat_template": [{"name": "rag", "template": "R"}, {"name": "x", "template": "X"}]}`,
			HFConfig{BOSToken: "<|begin_of_text|>", AddBOS: true, ModelMaxLength: math.MaxInt64, ChatTemplate: "R"}},
		{`{"add_eos_token": true, "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>"}`,
			HFConfig{BOSToken: "<|begin_of_text|>", EOSToken: "<|eot_id|>", PadToken: "<|end_of_text|>", AddBOS: true, AddEOS: true}},
	} {
		_, c, err := parseHFBytes(tok, []byte(tc.cfg))
		if err != nil {
			t.Errorf("config %s: %v", tc.cfg, err)
			continue
		}
		if c != tc.want {
			t.Errorf("config %s: HFConfig = %+v, want %+v", tc.cfg, c, tc.want)
		}
	}
	// Without a config the template still adds BOS.
	v, c, err := parseHFBytes(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.AddBOS || c.BOSToken != "<|begin_of_text|>" || v.BOS != 276 || !v.AddBOS {
		t.Errorf("no config: %+v, BOS %d AddBOS %v", c, v.BOS, v.AddBOS)
	}
}

// TestHFMatchesReference compares the fixtures' tokenizers with the O(n²)
// reference on random text, with and without special tokens in it.
func TestHFMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := []string{"[INST]", "<s>", "<|eot_id|>", "<|im_start|>", "<tool_call>", "Hello", " world", "世界", "e\u0301", "1234", "▁▁", "Hi", "the"}
	for _, dir := range []string{"llama2", "mistral", "llama3", "qwen25", "gpt2", "qwen2-transformers-test"} {
		tk, v, _ := loadHF(t, dir)
		ref := newReference(tk, v)
		for range 500 {
			s := randomText(rng, 12)
			if rng.IntN(2) == 0 {
				s += pool[rng.IntN(len(pool))] + randomText(rng, 6)
			}
			got, want := tk.Encode(s, true), ref.encode(s, true)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: Encode(%q) = %v, reference %v", dir, s, got, want)
			}
			// Byte-level decoding is exact except where NFC changed the
			// text.
			if v.Kind == ByteLevelBPE && !v.NFC {
				if back := tk.DecodeWithSpecials(tk.EncodeWithSpecials(s, false)); back != s {
					t.Fatalf("%s: DecodeWithSpecials(EncodeWithSpecials(%q)) = %q", dir, s, back)
				}
			}
		}
	}
}

// TestNewRankedSentencePiece checks the Vocab fields that ParseHF sets for
// SentencePiece-style vocabularies, through New directly.
func TestNewRankedSentencePiece(t *testing.T) {
	base := func() Vocab {
		return Vocab{Kind: SentencePieceBPE, Tokens: []string{"<unk>", "▁", "a", "b", "▁a", "ab"},
			Types:  []TokenType{Unknown, Normal, Normal, Normal, Normal, Normal},
			Merges: []string{"▁ a", "a b"}, BOS: -1, EOS: -1, UNK: 0, PAD: -1,
			AddSpacePrefix: true, SpaceIsMetaspace: true}
	}
	for _, tc := range []struct {
		name string
		edit func(*Vocab)
		text string
		want []int
	}{
		// "▁ab": ▁+a (rank 0) before a+b (rank 1).
		{"rank order", func(*Vocab) {}, "ab", []int{4, 3}},
		{"rank order swapped", func(v *Vocab) { v.Merges = []string{"a b", "▁ a"} }, "ab", []int{1, 5}},
		// No byte tokens: each unknown character is one UNK, or one per
		// run with FuseUnknown.
		{"unk per character", func(*Vocab) {}, "a世界b", []int{4, 0, 0, 3}},
		{"fused unk", func(v *Vocab) { v.FuseUnknown = true }, "a世界b", []int{4, 0, 3}},
		// IgnoreMerges: a unit that is a token is taken whole.
		{"ignore merges", func(v *Vocab) { v.Merges = []string{}; v.IgnoreMerges = IgnoreMergesOn; v.Tokens[5] = "▁ab" }, "ab", []int{5}},
		{"empty merges", func(v *Vocab) { v.Merges = []string{} }, "ab", []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			tc.edit(&v)
			tk := mustNew(t, v)
			if got := tk.Encode(tc.text, false); !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
			}
			if got := newReference(tk, v).encode(tc.text, false); !slices.Equal(got, tc.want) {
				t.Errorf("reference(%q) = %v, want %v", tc.text, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		edit func(*Vocab)
		msg  string
	}{
		{"bad prefix rule", func(v *Vocab) { v.PrefixRule = 7 }, "prefix rule"},
		{"bad ignore merges", func(v *Vocab) { v.IgnoreMerges = 9 }, "IgnoreMerges"},
		{"ignore merges without merges", func(v *Vocab) { v.Merges = nil; v.Scores = make([]float32, 6); v.IgnoreMerges = IgnoreMergesOn }, "without merges"},
		{"merge of unknown token", func(v *Vocab) { v.Merges = []string{"▁ c"} }, `right half "c"`},
	} {
		v := base()
		tc.edit(&v)
		if _, err := New(v); !errors.Is(err, ErrInvalidVocab) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: New error = %v, want ErrInvalidVocab containing %q", tc.name, err, tc.msg)
		}
	}
}
