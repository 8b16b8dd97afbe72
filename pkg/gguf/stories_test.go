package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The stories260K fixtures are real llama.cpp output: our conversion with
// llama-convert-llama2c-to-ggml, and the publisher's file from ggml-org.
var storiesFiles = []string{"stories260K.gguf", "stories260K-ggmlorg.gguf"}

// storiesKeys are the metadata keys of both files, in file order.
var storiesKeys = []string{
	"tokenizer.ggml.tokens",
	"tokenizer.ggml.scores",
	"tokenizer.ggml.token_type",
	"tokenizer.ggml.model",
	"general.architecture",
	"general.name",
	"tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.bos_token_id",
	"tokenizer.ggml.eos_token_id",
	"tokenizer.ggml.seperator_token_id", // sic: llama.cpp's spelling
	"tokenizer.ggml.padding_token_id",
	"llama.context_length",
	"llama.embedding_length",
	"llama.feed_forward_length",
	"llama.attention.head_count",
	"llama.attention.head_count_kv",
	"llama.block_count",
	"llama.rope.dimension_count",
	"llama.attention.layer_norm_rms_epsilon",
}

func readStories(t *testing.T, dir, name string) (*File, []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReader{r: fh}
	f, err := Parse(cr, st.Size())
	if err != nil {
		t.Fatalf("Parse(%s) = %v", path, err)
	}
	if cr.maxEnd > readBufSize {
		t.Errorf("Parse(%s) read up to offset %d; the metadata ends at %d", name, cr.maxEnd, f.DataOffset)
	}
	all, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, all
}

func TestStories260K(t *testing.T) {
	dir := modelDir(t)
	contextLength := map[string]uint64{"stories260K.gguf": 128, "stories260K-ggmlorg.gguf": 2048}
	for _, name := range storiesFiles {
		t.Run(name, func(t *testing.T) {
			f, all := readStories(t, dir, name)
			if f.Version != 3 || f.Alignment != 32 || f.DataOffset != 14176 {
				t.Errorf("Version, Alignment, DataOffset = %d, %d, %d, want 3, 32, 14176", f.Version, f.Alignment, f.DataOffset)
			}
			var keys []string
			for _, kv := range f.KV {
				keys = append(keys, kv.Key)
			}
			if !slices.Equal(keys, storiesKeys) {
				t.Errorf("keys =\n%q\nwant\n%q", keys, storiesKeys)
			}

			uints := map[string]uint64{
				"llama.block_count":                 5,
				"llama.embedding_length":            64,
				"llama.feed_forward_length":         172,
				"llama.attention.head_count":        8,
				"llama.attention.head_count_kv":     4,
				"llama.rope.dimension_count":        8,
				"llama.context_length":              contextLength[name],
				"tokenizer.ggml.unknown_token_id":   0,
				"tokenizer.ggml.bos_token_id":       1,
				"tokenizer.ggml.eos_token_id":       2,
				"tokenizer.ggml.seperator_token_id": 1<<32 - 1,
				"tokenizer.ggml.padding_token_id":   1<<32 - 1,
			}
			for key, want := range uints {
				if got, err := f.Uint(key); got != want || err != nil {
					t.Errorf("Uint(%q) = %d, %v, want %d", key, got, err, want)
				}
			}
			for key, want := range map[string]string{
				"tokenizer.ggml.model": "llama",
				"general.architecture": "llama",
				"general.name":         "llama",
			} {
				if got, err := f.String(key); got != want || err != nil {
					t.Errorf("String(%q) = %q, %v, want %q", key, got, err, want)
				}
			}
			if eps, err := f.Float("llama.attention.layer_norm_rms_epsilon"); float32(eps) != 1e-5 || err != nil {
				t.Errorf("rms epsilon = %g, %v, want 1e-5", eps, err)
			}

			tokens, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(tokens) != 512 {
				t.Fatalf("tokens: %d, %v, want 512", len(tokens), err)
			}
			wantTokens := map[int]string{0: "<unk>", 1: "<s>", 2: "</s>", 3: "<0x00>", 258: "<0xFF>", 259: "▁t", 260: "he"}
			for i, want := range wantTokens {
				if tokens[i] != want {
					t.Errorf("tokens[%d] = %q, want %q", i, tokens[i], want)
				}
			}
			scores, err := f.Float32s("tokenizer.ggml.scores")
			if err != nil || len(scores) != 512 || scores[260] != -1 || scores[511] != -252 {
				t.Errorf("scores: len %d, [260]=%v, [511]=%v, %v; want 512, -1, -252", len(scores), scores[260], scores[511], err)
			}
			types, err := f.Int32s("tokenizer.ggml.token_type")
			if err != nil || len(types) != 512 {
				t.Fatalf("token types: %d, %v", len(types), err)
			}
			counts := map[int32]int{}
			for _, ty := range types {
				counts[ty]++
			}
			// 1 normal, 2 unknown, 3 control, 6 byte.
			if want := map[int32]int{1: 253, 2: 1, 3: 2, 6: 256}; !reflect.DeepEqual(counts, want) {
				t.Errorf("token type counts = %v, want %v", counts, want)
			}

			// 48 tensors: token_embd, output_norm, output, and 9 per block.
			if len(f.Tensors) != 48 {
				t.Fatalf("%d tensors, want 48", len(f.Tensors))
			}
			checkTensor := func(name string, dims ...uint64) {
				t.Helper()
				ti, ok := f.Tensor(name)
				if !ok || !slices.Equal(ti.Dims, dims) || ti.Type != F32 || ti.Size != 4*ti.NumElements() {
					t.Errorf("Tensor(%q) = %+v, %v, want dims %v f32", name, ti, ok, dims)
				}
			}
			checkTensor("token_embd.weight", 64, 512)
			checkTensor("output.weight", 64, 512)
			checkTensor("output_norm.weight", 64)
			for b := range 5 {
				p := "blk." + string(rune('0'+b)) + "."
				checkTensor(p+"attn_q.weight", 64, 64)
				checkTensor(p+"attn_k.weight", 64, 32)
				checkTensor(p+"attn_v.weight", 64, 32)
				checkTensor(p+"attn_output.weight", 64, 64)
				checkTensor(p+"attn_norm.weight", 64)
				checkTensor(p+"ffn_gate.weight", 64, 172)
				checkTensor(p+"ffn_down.weight", 172, 64)
				checkTensor(p+"ffn_up.weight", 64, 172)
				checkTensor(p+"ffn_norm.weight", 64)
			}

			// The data section is the tensors back to back (every size here is
			// a multiple of 32), ending exactly at the end of the file.
			sorted := slices.Clone(f.Tensors)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
			next := f.DataOffset
			var params int64
			for _, ti := range sorted {
				if ti.Offset != next {
					t.Errorf("tensor %s at %d, want %d", ti.Name, ti.Offset, next)
				}
				next = ti.Offset + alignUp(ti.Size, f.Alignment)
				params += ti.NumElements()
			}
			if next != int64(len(all)) {
				t.Errorf("tensor data ends at %d, file is %d bytes", next, len(all))
			}
			// The llama2.c checkpoint's 264,128 floats less its 4,096 unused
			// RoPE table entries, plus the classifier written out separately.
			if params != 264128-4096+512*64 {
				t.Errorf("%d parameters, want %d", params, 264128-4096+512*64)
			}

			// llama2c shares the classifier with the embedding; the
			// converter wrote it twice.
			emb, _ := f.Tensor("token_embd.weight")
			out, _ := f.Tensor("output.weight")
			if !bytes.Equal(all[emb.Offset:emb.Offset+emb.Size], all[out.Offset:out.Offset+out.Size]) {
				t.Error("output.weight differs from token_embd.weight")
			}
			// The embedding is the llama2.c checkpoint's first table, right
			// after its 28-byte header.
			if bin, err := os.ReadFile(filepath.Join(dir, "stories260K.bin")); err == nil {
				if !bytes.Equal(bin[28:28+emb.Size], all[emb.Offset:emb.Offset+emb.Size]) {
					t.Error("token_embd.weight differs from stories260K.bin's token_embedding_table")
				}
			}

			// Writing the parsed file back gives the same bytes: the Writer
			// lays files out as llama.cpp does.
			w := NewWriter(f.Version)
			for _, kv := range f.KV {
				w.AddKV(kv.Key, kv.Value)
			}
			for _, ti := range f.Tensors {
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, all[ti.Offset:ti.Offset+ti.Size]); err != nil {
					t.Fatal(err)
				}
			}
			if again := encode(t, w); !bytes.Equal(again, all) {
				t.Errorf("rewritten file differs (%d bytes, original %d)", len(again), len(all))
			}
		})
	}
}

// The two files differ only in llama.context_length.
func TestStories260KFilesAgree(t *testing.T) {
	dir := modelDir(t)
	a, aBytes := readStories(t, dir, storiesFiles[0])
	b, bBytes := readStories(t, dir, storiesFiles[1])
	if !reflect.DeepEqual(a.Tensors, b.Tensors) {
		t.Error("tensor infos differ")
	}
	if !bytes.Equal(aBytes[a.DataOffset:], bBytes[b.DataOffset:]) {
		t.Error("tensor data differ")
	}
	var differ []string
	for i := range a.KV {
		if !reflect.DeepEqual(a.KV[i], b.KV[i]) {
			differ = append(differ, a.KV[i].Key)
		}
	}
	if got := strings.Join(differ, ","); got != "llama.context_length" {
		t.Errorf("keys that differ: %s, want llama.context_length", got)
	}
}
