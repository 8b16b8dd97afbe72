package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/kvqerr"
	"github.com/kvqlabs/kvq/pkg/llama2c"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// rewriteGGUF writes a copy of the GGUF file src to dst with the metadata
// values in set replaced (or added) and only the tensors keep accepts.
func rewriteGGUF(t *testing.T, src, dst string, set map[string]gguf.Value, keep func(name string) bool) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter(f.Version)
	done := map[string]bool{}
	for _, kv := range f.KV {
		v := kv.Value
		if nv, ok := set[kv.Key]; ok {
			v, done[kv.Key] = nv, true
		}
		w.AddKV(kv.Key, v)
	}
	for k, v := range set {
		if !done[k] {
			w.AddKV(k, v)
		}
	}
	for _, ti := range f.Tensors {
		if keep != nil && !keep(ti.Name) {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data[ti.Offset:ti.Offset+ti.Size]); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadBounded loads path and returns the error, failing the test if the
// load takes long or allocates much: a header's sizes must be checked
// before they size anything.
func loadBounded(t *testing.T, path string, opts runtime.LoadOptions) error {
	t.Helper()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	start := time.Now()
	m, err := runtime.Load(context.Background(), path, opts)
	took := time.Since(start)
	goruntime.ReadMemStats(&after)
	if err == nil {
		m.Close()
	}
	if took > 5*time.Second {
		t.Errorf("Load took %v", took)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("Load allocated %d MiB", n>>20)
	}
	return err
}

// checkOneLine fails unless err is a single line wrapping is and
// mentioning each of want.
func checkOneLine(t *testing.T, err, is error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded")
	}
	if !errors.Is(err, is) {
		t.Errorf("error %v is not %v", err, is)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || len(msg) > 400 {
		t.Errorf("error is not one short line (%d bytes): %q", len(msg), msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

// TestGGUFHeaderSizes gives a GGUF file sizes its tensors do not have,
// from wrong to absurd: each fails at once, in one line naming the file,
// the key and the value, without allocating from the value.
func TestGGUFHeaderSizes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.gguf")
	if err := modeltest.WriteGGUF(src, modeltest.Spec{Arch: "llama", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	u32 := func(x uint32) gguf.Value { return gguf.ValueOf(x) }
	for _, tc := range []struct {
		key   string
		value gguf.Value
		text  string
	}{
		{"llama.block_count", u32(0xFFFFFFFF), "4294967295"},
		{"llama.block_count", u32(1_000_000), "1000000"},
		{"llama.block_count", gguf.ValueOf(uint64(1) << 40), "1099511627776"},
		{"llama.block_count", gguf.ValueOf(uint64(math.MaxUint64)), "18446744073709551615"},
		{"llama.block_count", u32(3), "3"},
		{"llama.block_count", u32(0), "0"},
		{"llama.embedding_length", u32(0xFFFFFFFF), "4294967295"},
		{"llama.embedding_length", u32(65), "65"},
		{"llama.feed_forward_length", u32(1_000_000), "1000000"},
		{"llama.attention.head_count", u32(1_000_000), "1000000"},
		{"llama.attention.head_count", u32(0), "0"},
		{"llama.attention.head_count_kv", u32(1_000_000), "1000000"},
		{"llama.attention.key_length", u32(1 << 30), "1073741824"},
		{"llama.vocab_size", u32(1_000_000_000), "1000000000"},
		{"llama.context_length", u32(0xFFFFFFFF), "4294967295"},
	} {
		t.Run(fmt.Sprintf("%s=%s", tc.key, tc.text), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.gguf")
			rewriteGGUF(t, src, path, map[string]gguf.Value{tc.key: tc.value}, nil)
			err := loadBounded(t, path, runtime.LoadOptions{})
			checkOneLine(t, err, runtime.ErrModel, path, tc.key+" = "+tc.text)
		})
	}
	t.Run("more tokens than embedding rows", func(t *testing.T) {
		data, _ := os.ReadFile(src)
		f, _ := gguf.Parse(bytes.NewReader(data), int64(len(data)))
		toks, _ := f.Strings("tokenizer.ggml.tokens")
		path := filepath.Join(t.TempDir(), "bad.gguf")
		rewriteGGUF(t, src, path, map[string]gguf.Value{"tokenizer.ggml.tokens": gguf.ArrayOf(append(toks, "extra"))}, nil)
		checkOneLine(t, loadBounded(t, path, runtime.LoadOptions{}), runtime.ErrModel, path, fmt.Sprintf("len(tokenizer.ggml.tokens) = %d", len(toks)+1))
	})
	t.Run("layer with no tensors", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.gguf")
		rewriteGGUF(t, src, path, nil, func(name string) bool { return !strings.HasPrefix(name, "blk.0.") })
		checkOneLine(t, loadBounded(t, path, runtime.LoadOptions{}), runtime.ErrModel, path, "llama.block_count = 2", "1 layers")
	})
	t.Run("many missing tensors", func(t *testing.T) {
		// Layer 1 keeps only its attention norm: 8 required tensors are
		// missing; the error lists a few and counts the rest.
		path := filepath.Join(t.TempDir(), "bad.gguf")
		rewriteGGUF(t, src, path, nil, func(name string) bool {
			return !strings.HasPrefix(name, "blk.1.") || name == "blk.1.attn_norm.weight"
		})
		err := loadBounded(t, path, runtime.LoadOptions{})
		if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "missing tensor blk.1.attn_q.weight") {
			t.Fatalf("Load = %v, want a missing tensor", err)
		}
		if n := strings.Count(err.Error(), "\n") + 1; n > 9 {
			t.Errorf("error has %d lines, want at most 9:\n%v", n, err)
		}
	})
}

// TestHFHeaderSizes does the same for config.json.
func TestHFHeaderSizes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m")
	if err := modeltest.WriteHF(src, modeltest.Spec{Arch: "qwen3", Seed: 2}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, old, new string }{
		{"num_hidden_layers", `"num_hidden_layers": 2`, `"num_hidden_layers": 1000000000`},
		{"num_hidden_layers", `"num_hidden_layers": 2`, `"num_hidden_layers": -1`},
		{"num_hidden_layers", `"num_hidden_layers": 2`, `"num_hidden_layers": 3`},
		{"hidden_size", `"hidden_size": 64`, `"hidden_size": 1000000000`},
		{"intermediate_size", `"intermediate_size": 96`, `"intermediate_size": 1000000000`},
		{"num_attention_heads", `"num_attention_heads": 4`, `"num_attention_heads": 1000000000`},
		{"num_key_value_heads", `"num_key_value_heads": 2`, `"num_key_value_heads": 1000000000`},
		{"head_dim", `"head_dim": 16`, `"head_dim": 1000000000`},
		{"head_dim", `"head_dim": 16`, `"head_dim": 0`},
		{"vocab_size", `"vocab_size": 266`, `"vocab_size": 1000000000`},
		{"max_position_embeddings", `"max_position_embeddings": 512`, `"max_position_embeddings": 1000000000`},
		{"max_position_embeddings", `"max_position_embeddings": 512`, `"max_position_embeddings": -5`},
	} {
		value := strings.TrimSpace(strings.SplitN(tc.new, ":", 2)[1])
		t.Run(tc.key+"="+value, func(t *testing.T) {
			if !bytes.Contains(cfg, []byte(tc.old)) {
				t.Fatalf("config.json has no %s:\n%s", tc.old, cfg)
			}
			dir := filepath.Join(t.TempDir(), "m")
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			bad := bytes.Replace(cfg, []byte(tc.old), []byte(tc.new), 1)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), bad, 0o644); err != nil {
				t.Fatal(err)
			}
			err := loadBounded(t, dir, runtime.LoadOptions{})
			checkOneLine(t, err, runtime.ErrModel, filepath.Join(dir, "config.json"), tc.key+" = "+value)
		})
	}
}

// TestNotAModel checks that a file that is neither GGUF nor a well-formed
// llama2.c checkpoint is refused as such, whatever its size or name.
func TestNotAModel(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.bin")
	if err := modeltest.WriteLlama2C(good, filepath.Join(dir, "tokenizer.bin"), modeltest.Spec{Arch: "llama", Dim: 16, Hidden: 32, Heads: 2, KVHeads: 1, Context: 8, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ckpt, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(ckpt) // the other classifier layout, same size
	v := int32(binary.LittleEndian.Uint32(flipped[20:]))
	binary.LittleEndian.PutUint32(flipped[20:], uint32(-v))
	text := []byte(strings.Repeat("Once upon a time there was a model file. ", 20))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i>>3)
	}
	for _, tc := range []struct {
		name string
		data []byte
		is   error // besides runtime.ErrFormat
		msg  string
	}{
		{"text.bin", text, llama2c.ErrHeader, "dim = "},
		{"notes.txt", text, llama2c.ErrHeader, "dim = "},
		{"random", random, llama2c.ErrHeader, "bad header"},
		{"small.bin", []byte("tiny"), llama2c.ErrHeader, "header needs 28"},
		{"empty.bin", nil, llama2c.ErrHeader, "0 bytes"},
		{"truncated.bin", ckpt[:len(ckpt)-4], llama2c.ErrTruncated, "file has"},
		{"padded.bin", append(bytes.Clone(ckpt), 0, 0, 0, 0), llama2c.ErrTruncated, "file has"},
		{"classifier.bin", flipped, llama2c.ErrTruncated, "classifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := loadBounded(t, path, runtime.LoadOptions{Tokenizer: filepath.Join(dir, "tokenizer.bin")})
			checkOneLine(t, err, runtime.ErrFormat, path, "neither GGUF", "llama2.c", tc.msg)
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
	if m, err := runtime.Load(context.Background(), good, runtime.LoadOptions{}); err != nil {
		t.Errorf("the well-formed checkpoint: %v", err)
	} else {
		m.Close()
	}
}

// TestLoadInputKind: what Load refuses about the files the user named — a
// missing model, a missing tokenizer, a file that is no model — is of the
// input kind (kvqerr.IsInput), and keeps its cause for errors.Is.
func TestLoadInputKind(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.bin")
	if err := modeltest.WriteLlama2C(good, filepath.Join(dir, "tokenizer.bin"), modeltest.Spec{Arch: "llama", Dim: 16, Hidden: 32, Heads: 2, KVHeads: 1, Context: 8, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	notModel := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notModel, []byte(strings.Repeat("not a model ", 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, tokenizer string
		is                    error
	}{
		{"missing model", filepath.Join(dir, "absent.gguf"), "", fs.ErrNotExist},
		{"missing model directory", filepath.Join(dir, "absent", "model"), "", fs.ErrNotExist},
		{"missing tokenizer", good, filepath.Join(dir, "absent-tokenizer.bin"), fs.ErrNotExist},
		{"not a model", notModel, "", runtime.ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := runtime.Load(context.Background(), tc.path, runtime.LoadOptions{Tokenizer: tc.tokenizer})
			if err == nil {
				m.Close()
				t.Fatalf("Load(%s) = nil error", tc.path)
			}
			if !kvqerr.IsInput(err) {
				t.Errorf("Load(%s) = %v, not an input error", tc.path, err)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("Load(%s) = %v, not %v", tc.path, err, tc.is)
			}
		})
	}
}
