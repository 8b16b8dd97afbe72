package tokenizer_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"strings"

	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// A SentencePiece vocabulary as GGUF stores it: "▁" for spaces, scores that
// order the merges, and UNK for characters it cannot spell (it has no byte
// tokens).
func ExampleNew() {
	tk, err := tokenizer.New(tokenizer.Vocab{
		Kind:   tokenizer.SentencePieceBPE,
		Tokens: []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "hi", "▁hi"},
		Scores: []float32{0, 0, 0, -10, -11, -12, -2, -1, -3},
		Types: []tokenizer.TokenType{tokenizer.Unknown, tokenizer.Control, tokenizer.Control,
			tokenizer.Normal, tokenizer.Normal, tokenizer.Normal, tokenizer.Normal, tokenizer.Normal, tokenizer.Normal},
		BOS: 1, EOS: 2, UNK: 0, PAD: -1,
		AddBOS: true, AddSpacePrefix: true, SpaceIsMetaspace: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	// "▁hi▁hi!": "hi" (score -1) merges first, leftmost first, then
	// "▁hi" (-3); "!" is not in the vocabulary and becomes UNK, which
	// decodes to nothing.
	ids := tk.Encode("hi hi!", true)
	fmt.Println(ids)
	fmt.Printf("%q\n", tk.Decode(ids))
	// Output:
	// [1 8 8 0]
	// "hi hi"
}

// Reading a llama2.c tokenizer file; here a tiny one built in memory.
func ExampleParseLlama2C() {
	var file bytes.Buffer
	write := func(v any) { binary.Write(&file, binary.LittleEndian, v) }
	write(int32(2)) // max_token_length
	for _, tok := range []struct {
		text  string
		score float32
	}{{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}, {" ", -2}, {"o", -3}, {"k", -4}, {" o", -1}, {"ok", -1.5}} {
		write(math.Float32bits(tok.score))
		write(int32(len(tok.text)))
		file.WriteString(tok.text)
	}

	v, err := tokenizer.ParseLlama2C(bytes.NewReader(file.Bytes()), int64(file.Len()), 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	tk, err := tokenizer.New(v)
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tk.Encode("ok", true)
	fmt.Println(ids, tk.Decode(ids))
	// Output:
	// [1 6 5] ok
}

// Streaming generated tokens: a Decoder holds back the byte tokens of an
// incomplete character.
func ExampleDecoder() {
	tokens := []string{"<unk>", "<s>", "</s>", "▁", "a"}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
	}
	tk, err := tokenizer.New(tokenizer.Vocab{
		Kind: tokenizer.SentencePieceBPE, Tokens: tokens, Scores: make([]float32, len(tokens)),
		BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddSpacePrefix: true, SpaceIsMetaspace: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	byteID := func(b byte) int { return 5 + int(b) }
	d := tk.NewDecoder()
	for _, id := range []int{1, 3, 4, 3, byteID(0xF0), byteID(0x9F), byteID(0x99), byteID(0x82)} {
		fmt.Printf("%q ", d.Next(id))
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// "" "" "a" " " "" "" "" "🙂" ""
}

// Reading a Hugging Face tokenizer.json and tokenizer_config.json; here a
// tiny one in the Llama 2 shape.
func ExampleParseHF() {
	const tokenizerJSON = `{
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "h": 4, "i": 5, "▁h": 6, "▁hi": 7},
    "merges": [["▁", "h"], ["▁h", "i"]]}
}`
	const config = `{"add_bos_token": true, "eos_token": "</s>", "model_max_length": 4096}`
	v, cfg, err := tokenizer.ParseHF(strings.NewReader(tokenizerJSON), strings.NewReader(config))
	if err != nil {
		fmt.Println(err)
		return
	}
	tk, err := tokenizer.New(v)
	if err != nil {
		fmt.Println(err)
		return
	}
	// "▁hi▁hi!": ▁+h, then ▁h+i; "!" has no token and no byte token, so
	// it becomes <unk>, which decodes to nothing.
	ids := tk.Encode("hi hi!", true)
	fmt.Println(ids, cfg.EOSToken, cfg.ModelMaxLength)
	fmt.Printf("%q\n", tk.Decode(ids))
	// Output:
	// [1 7 7 0] </s> 4096
	// "hi hi"
}
