package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tokenizer.json fixtures under testdata/hf are small vocabularies in
// the exact shape of the published files: the normalizer, pre_tokenizer,
// post_processor, decoder and model blocks (and their key order) follow
// meta-llama/Llama-2-7b-hf and TinyLlama-1.1B-Chat-v1.0 (llama2),
// mistralai/Mistral-7B-Instruct-v0.3 (mistral), meta-llama/Meta-Llama-3-8B
// (llama3), Qwen/Qwen2.5-0.5B (qwen25), openai-community/gpt2 (gpt2), as
// they appear on the Hugging Face hub; only the vocabularies, merges and
// added tokens are ours (hfFixtures). The files are generated from the
// tables below; go test -run TestHFFixtures -update-hf rewrites them, and
// TestHFFixtures fails when they drift. The tokenizer_config.json files
// next to them are written by hand in the shape of the same models'
// configs.
//
// qwen2-transformers-test is different: its vocabulary and merges are the
// ones of Hugging Face transformers' tests/models/qwen2/
// test_tokenization_qwen2.py (setUpClass), so its expected ids are
// published ones (see TestHFPublishedQwen2Test).

var updateHF = flag.Bool("update-hf", false, "rewrite testdata/hf/*/tokenizer.json from the fixture tables")

// hfFixture is one generated tokenizer.json.
type hfFixture struct {
	dir      string
	skeleton string   // the file with %[1]s = added_tokens, %[2]s = vocab, %[3]s = merges
	specials []string // added tokens, in id order, after the model vocabulary unless leading
	leading  int      // how many specials come first (ids 0..leading-1, also in model.vocab)
	byteToks bool     // SentencePiece <0x00>..<0xFF> after the leading specials
	alphabet bool     // the 256 GPT-2 byte-alphabet tokens first, in GPT-2 order
	pieces   []string // further model tokens, in id order
	merges   [][2]string
	pairs    bool            // write merges as ["a", "b"] pairs
	normal   map[string]bool // specials that are not "special" (UserDefined)
	bosID    int             // %[4]d of the skeleton: the template's BOS id
}

// jsonQuote writes s as a JSON string the way the hub files do: "<" and
// ">" unescaped.
func jsonQuote(s string) string {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = ' ' <= s[i] && s[i] < 0x7F && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		return `"` + s + `"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // strings always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// gpt2Order lists the bytes in the order of GPT-2's bytes_to_unicode:
// '!'..'~', '¡'..'¬', '®'..'ÿ', then the other 68 bytes ascending. The
// GPT-2, Llama 3 and Qwen2 vocabularies all start with these 256 tokens
// in this order (' ' is id 220, '\n' 198).
var gpt2Order = func() (order [256]byte) {
	k := 0
	for b := range 256 {
		if '!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF {
			order[k] = byte(b)
			k++
		}
	}
	for b := range 256 {
		if !('!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF) {
			order[k] = byte(b)
			k++
		}
	}
	return order
}()

// spmPiecesHF are the pieces of the llama2 and mistral fixtures after the
// byte tokens; spmMergesHF build them. "▁▁" merges last, as the published
// Llama 2 encodings show (" Hello" is "▁", "▁Hello", not "▁▁", "Hello").
var (
	spmPiecesHF = []string{
		"▁▁", "ll", "▁H", "ell", "▁Hell", "▁Hello", "▁w", "or", "▁wor", "ld", "▁world",
		"▁Hi", "▁t", "he", "▁the",
		"▁", "e", "l", "o", "H", "w", "r", "d", "i", "t", "h", "世", "!", "1", "2", "3", "a",
	}
	spmMergesHF = [][2]string{
		{"l", "l"}, {"▁", "H"}, {"e", "ll"}, {"▁H", "ell"}, {"▁Hell", "o"},
		{"▁", "w"}, {"o", "r"}, {"▁w", "or"}, {"l", "d"}, {"▁wor", "ld"},
		{"▁H", "i"}, {"▁", "t"}, {"h", "e"}, {"▁t", "he"},
		{"▁", "▁"},
	}
)

var hfFixtures = []hfFixture{
	{
		dir:      "llama2",
		skeleton: llama2Skeleton,
		specials: []string{"<unk>", "<s>", "</s>"},
		leading:  3,
		byteToks: true,
		pieces:   spmPiecesHF,
		merges:   spmMergesHF,
	},
	{
		dir:      "mistral",
		skeleton: mistralSkeleton,
		specials: []string{"<unk>", "<s>", "</s>", "[INST]", "[/INST]"},
		leading:  5,
		byteToks: true,
		pieces:   spmPiecesHF,
		merges:   spmMergesHF,
		pairs:    true,
	},
	{
		dir:      "llama3",
		skeleton: llama3Skeleton,
		specials: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
		alphabet: true,
		// "Hello" and "456" have no merges: only the whole-pre-token
		// lookup (ignore_merges) finds them.
		pieces: []string{"Ġw", "or", "Ġwor", "ld", "Ġworld", "12", "123", "'l", "'ll", "ĠD", "ON", "ĠDON", "'T",
			"ĠĠ", "ĊĊ", "ä¸", "ä¸ĸ", "Ġb", "Hello", "456"},
		merges: [][2]string{{"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"}, {"1", "2"}, {"12", "3"},
			{"'", "l"}, {"'l", "l"}, {"Ġ", "D"}, {"O", "N"}, {"ĠD", "ON"}, {"'", "T"},
			{"Ġ", "Ġ"}, {"Ċ", "Ċ"}, {"ä", "¸"}, {"ä¸", "ĸ"}, {"Ġ", "b"}},
		pairs: true,
		bosID: 276,
	},
	{
		dir:      "qwen25",
		skeleton: qwen25Skeleton,
		specials: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>"},
		normal:   map[string]bool{"<tool_call>": true},
		alphabet: true,
		// "xyz" has no merges, and Qwen2 does not look pre-tokens up
		// whole: it is never produced.
		pieces: []string{"Ġw", "or", "Ġwor", "ld", "Ġworld", "He", "ll", "Hell", "Hello", "Ã©", "ca", "fÃ©",
			"ĠĠ", ":Ċ", "xyz"},
		merges: [][2]string{{"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"},
			{"H", "e"}, {"l", "l"}, {"He", "ll"}, {"Hell", "o"}, {"Ã", "©"}, {"c", "a"}, {"f", "Ã©"},
			{"Ġ", "Ġ"}, {":", "Ċ"}},
		pairs: true,
	},
	{
		dir:      "gpt2",
		skeleton: gpt2Skeleton,
		specials: []string{"<|endoftext|>"},
		alphabet: true,
		pieces:   []string{"Ġt", "he", "Ġthe", "12", "123", "45", "'s", "ĠĠ", "He", "ll", "Hell", "Hello"},
		merges: [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"1", "2"}, {"12", "3"}, {"4", "5"},
			{"'", "s"}, {"Ġ", "Ġ"}, {"H", "e"}, {"l", "l"}, {"He", "ll"}, {"Hell", "o"}},
	},
	{
		// transformers tests/models/qwen2/test_tokenization_qwen2.py:
		// vocab = bytes_to_unicode().values() + these 14 tokens, the
		// merges below ("#version" line dropped), and <|endoftext|>
		// added by the tokenizer as id 270.
		dir:      "qwen2-transformers-test",
		skeleton: qwen25Skeleton,
		specials: []string{"<|endoftext|>"},
		alphabet: true,
		pieces: []string{"Ġl", "Ġn", "Ġlo", "Ġlow", "er", "Ġlowest", "Ġnewer", "Ġwider", "01", ";}", ";}Ċ",
			"Ïĵ", "Ġ#", "##"},
		merges: [][2]string{{"Ġ", "l"}, {"Ġl", "o"}, {"Ġlo", "w"}, {"e", "r"}, {"0", "1"}, {";", "}"},
			{";}", "Ċ"}, {"Ï", "ĵ"}, {"Ġ", "#"}, {"#", "#"}},
	},
}

// build returns the fixture's tokenizer.json.
func (fx *hfFixture) build() ([]byte, error) {
	var vocab []string
	vocab = append(vocab, fx.specials[:fx.leading]...)
	if fx.byteToks {
		for b := range 256 {
			vocab = append(vocab, fmt.Sprintf("<0x%02X>", b))
		}
	}
	if fx.alphabet {
		for _, b := range gpt2Order {
			vocab = append(vocab, byteAlphabet[b])
		}
	}
	vocab = append(vocab, fx.pieces...)

	quote := jsonQuote
	var added []string
	addedID := func(i int) int {
		if i < fx.leading {
			return i
		}
		return len(vocab) + i - fx.leading
	}
	for i, s := range fx.specials {
		added = append(added, fmt.Sprintf(`{"id": %d, "content": %s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": %v, "special": %v}`,
			addedID(i), quote(s), fx.normal[s], !fx.normal[s]))
	}
	var v []string
	for id, s := range vocab {
		v = append(v, fmt.Sprintf("%s: %d", quote(s), id))
	}
	var m []string
	for _, mg := range fx.merges {
		if fx.pairs {
			m = append(m, fmt.Sprintf("[%s, %s]", quote(mg[0]), quote(mg[1])))
		} else {
			m = append(m, quote(mg[0]+" "+mg[1]))
		}
	}
	raw := fmt.Sprintf(fx.skeleton, "["+strings.Join(added, ", ")+"]", "{"+strings.Join(v, ", ")+"}", "["+strings.Join(m, ", ")+"]", fx.bosID)
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(raw), "", "  "); err != nil {
		return nil, fmt.Errorf("%s: %w", fx.dir, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// TestHFFixtures checks that testdata/hf/*/tokenizer.json match the fixture
// tables (and rewrites them with -update-hf).
func TestHFFixtures(t *testing.T) {
	for i := range hfFixtures {
		fx := &hfFixtures[i]
		t.Run(fx.dir, func(t *testing.T) {
			want, err := fx.build()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "hf", fx.dir, "tokenizer.json")
			if *updateHF {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestHFFixtures -update-hf)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from its fixture table; run go test -run TestHFFixtures -update-hf", path)
			}
		})
	}
}

// The skeletons copy the blocks of the published files. %[1]s is
// added_tokens, %[2]s model.vocab, %[3]s model.merges.

// llama2Skeleton: meta-llama/Llama-2-7b-hf and TinyLlama-1.1B-Chat-v1.0.
const llama2Skeleton = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": %[1]s,
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
      {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
    "vocab": %[2]s,
    "merges": %[3]s}
}`

// mistralSkeleton: mistralai/Mistral-7B-Instruct-v0.3 (Metaspace with
// prepend_scheme "first" and split false, no normalizer, merges as pairs).
const mistralSkeleton = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": %[1]s,
  "normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
      {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
    "vocab": %[2]s,
    "merges": %[3]s}
}`

// llama3Skeleton: meta-llama/Meta-Llama-3-8B (Split with the Llama 3
// regex, ByteLevel without its own regex, ignore_merges, the BOS template
// behind a ByteLevel post-processor). %[4]d is the id of <|begin_of_text|>.
const llama3Skeleton = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": %[1]s,
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
  "post_processor": {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
    {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [%[4]d], "tokens": ["<|begin_of_text|>"]}}}]},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
    "vocab": %[2]s,
    "merges": %[3]s}
}`

// qwen25Skeleton: Qwen/Qwen2.5-0.5B (NFC, Split with the Qwen2 regex,
// ByteLevel, no BOS).
const qwen25Skeleton = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": %[1]s,
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": %[2]s,
    "merges": %[3]s}
}`

// gpt2Skeleton: openai-community/gpt2 (ByteLevel with its built-in GPT-2
// regex).
const gpt2Skeleton = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": %[1]s,
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
    "vocab": %[2]s,
    "merges": %[3]s}
}`
