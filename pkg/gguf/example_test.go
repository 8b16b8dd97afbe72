package gguf_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"

	"github.com/kvqlabs/kvq/pkg/gguf"
)

// Write a tiny model file, parse it back and look up metadata and a tensor.
// With a file on disk, pass the *os.File and its size from Stat to Parse.
func Example() {
	w := gguf.NewWriter(3)
	w.AddString("general.architecture", "llama")
	w.AddUint32("llama.block_count", 2)
	w.AddStrings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>"})
	emb := make([]byte, 8*3*4) // f32, rows of 8, one row per token
	if err := w.AddTensor("token_embd.weight", gguf.F32, []uint64{8, 3}, emb); err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		log.Fatal(err)
	}

	f, err := gguf.Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		log.Fatal(err)
	}
	arch, _ := f.String("general.architecture")
	blocks, _ := f.Uint("llama.block_count")
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	fmt.Println(arch, blocks, tokens)

	t, _ := f.Tensor("token_embd.weight")
	fmt.Println(t.Name, t.Dims, t.Type, t.Size, "bytes at", t.Offset)

	_, err = f.Uint("llama.embedding_length")
	fmt.Println(err, errors.Is(err, gguf.ErrKeyNotFound))
	// Output:
	// llama 2 [<unk> <s> </s>]
	// token_embd.weight [8 3] f32 96 bytes at 256
	// gguf: key not found: "llama.embedding_length" true
}

// Malformed files give a *FormatError that says where and what, wrapping a
// sentinel error.
func ExampleParse_errors() {
	data := []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\x00\x00")
	_, err := gguf.Parse(bytes.NewReader(data), int64(len(data)))
	fmt.Println(errors.Is(err, gguf.ErrTruncated))

	var fe *gguf.FormatError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field, "at offset", fe.Offset)
	}
	// Output:
	// true
	// header.metadata_kv_count at offset 16
}
