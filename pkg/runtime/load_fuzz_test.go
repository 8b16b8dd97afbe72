package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// The loader fuzzers feed runtime.Load the bytes of whole checkpoints —
// GGUF files, llama2.c checkpoints with their tokenizer, Hugging Face
// directories — and check that it never panics, never allocates more than
// a bound proportional to the input whatever the headers say, and that a
// model it accepts runs one forward step.

// tinySpecs are the seed models: a few KB each, so that the fuzzer mutates
// headers rather than spending its time on weights.
var tinySpecs = []modeltest.Spec{
	{Arch: "llama", Dim: 8, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Context: 16, DType: "F16", Seed: 1},
	{Arch: "qwen3", Dim: 8, Hidden: 8, Layers: 2, Heads: 2, KVHeads: 2, HeadDim: 4, Context: 16, DType: "BF16", Seed: 2, Tied: true},
}

// loadLimit bounds what loading n bytes of checkpoint may allocate: the
// parsed metadata and tokenizer, and F16/BF16 vectors converted to F32,
// are at most a small multiple of the input.
func loadLimit(n int) uint64 { return 4<<20 + 256*uint64(n) }

// fuzzLoad loads path and checks the allocation bound and, on success,
// that the model runs.
func fuzzLoad(t *testing.T, path string, inputBytes int, opts runtime.LoadOptions) {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	m, err := runtime.Load(context.Background(), path, opts)
	goruntime.ReadMemStats(&after)
	if n, limit := after.TotalAlloc-before.TotalAlloc, loadLimit(inputBytes); n > limit {
		t.Fatalf("Load of %d bytes allocated %d bytes (limit %d); err %v", inputBytes, n, limit, err)
	}
	if err != nil {
		if err.Error() == "" {
			t.Fatal("Load failed with an empty message")
		}
		return
	}
	defer m.Close()
	step(t, m)
}

// step runs one token through an accepted model and reports whether it
// could: a model the runner or the cache refuses is not a loader bug.
func step(t *testing.T, m *runtime.Model) bool {
	t.Helper()
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		return false
	}
	defer r.Close()
	spec, err := quant.Formats().ParseSpec("fp16")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		return false
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: 1})
	if err != nil {
		return false
	}
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	logits, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: []int{0}}})
	if err != nil {
		t.Fatalf("Forward on a loaded model: %v", err)
	}
	if len(logits) != 1 || len(logits[0]) != m.Vocab {
		t.Fatalf("Forward gave %d rows of %d logits, want 1 of %d", len(logits), len(logits[0]), m.Vocab)
	}
	return true
}

func readFile(f *testing.F, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzLoadGGUF loads arbitrary bytes as a .gguf file.
func FuzzLoadGGUF(f *testing.F) {
	dir := f.TempDir()
	for i, s := range tinySpecs {
		p := filepath.Join(dir, s.Arch+".gguf")
		if err := modeltest.WriteGGUF(p, s); err != nil {
			f.Fatal(err)
		}
		f.Add(readFile(f, p))
		if i == 0 {
			f.Add(readFile(f, p)[:200]) // truncated inside the metadata
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "m.gguf")
		writeFiles(t, filepath.Dir(p), map[string][]byte{"m.gguf": data})
		fuzzLoad(t, p, len(data), runtime.LoadOptions{})
	})
}

// FuzzLoadLlama2C loads arbitrary bytes as a llama2.c checkpoint (model.bin)
// with a tokenizer file (tokenizer.bin).
func FuzzLoadLlama2C(f *testing.F) {
	dir := f.TempDir()
	s := tinySpecs[0]
	s.DType = "F32"
	for _, tied := range []bool{true, false} {
		s.Tied = tied
		mp, tp := filepath.Join(dir, "model.bin"), filepath.Join(dir, "tokenizer.bin")
		if err := modeltest.WriteLlama2C(mp, tp, s); err != nil {
			f.Fatal(err)
		}
		f.Add(readFile(f, mp), readFile(f, tp))
	}
	f.Add([]byte("Once upon a time, a text file was mistaken for a checkpoint."), []byte{})
	f.Fuzz(func(t *testing.T, model, tok []byte) {
		d := t.TempDir()
		writeFiles(t, d, map[string][]byte{"model.bin": model, "tokenizer.bin": tok})
		fuzzLoad(t, filepath.Join(d, "model.bin"), len(model)+len(tok), runtime.LoadOptions{})
	})
}

// FuzzLoadHF loads a Hugging Face directory whose config.json and
// model.safetensors are arbitrary bytes (the tokenizer files are a valid
// test tokenizer, fuzzed on their own in pkg/tokenizer).
func FuzzLoadHF(f *testing.F) {
	dir := f.TempDir()
	tokenizer := map[string][]byte{}
	tokBytes := 0
	for i, s := range tinySpecs {
		d := filepath.Join(dir, s.Arch)
		if err := modeltest.WriteHF(d, s, modeltest.HFOptions{}); err != nil {
			f.Fatal(err)
		}
		f.Add(readFile(f, filepath.Join(d, "config.json")), readFile(f, filepath.Join(d, "model.safetensors")))
		if i == 0 {
			for _, n := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
				tokenizer[n] = readFile(f, filepath.Join(d, n))
				tokBytes += len(tokenizer[n])
			}
		}
	}
	f.Fuzz(func(t *testing.T, config, weights []byte) {
		d := t.TempDir()
		writeFiles(t, d, tokenizer)
		writeFiles(t, d, map[string][]byte{"config.json": config, "model.safetensors": weights})
		fuzzLoad(t, d, tokBytes+len(config)+len(weights), runtime.LoadOptions{})
	})
}

// TestTinySpecsLoad checks that the fuzzers' seed models load and run in
// every format, so that the fuzzers start from files the loaders accept.
func TestTinySpecsLoad(t *testing.T) {
	for _, s := range tinySpecs {
		dir := t.TempDir()
		paths := map[string]runtime.LoadOptions{filepath.Join(dir, "m.gguf"): {}, filepath.Join(dir, "hf"): {}}
		if err := modeltest.WriteGGUF(filepath.Join(dir, "m.gguf"), s); err != nil {
			t.Fatal(err)
		}
		if err := modeltest.WriteHF(filepath.Join(dir, "hf"), s, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		if s.Arch == "llama" {
			s.DType = "F32"
			if err := modeltest.WriteLlama2C(filepath.Join(dir, "m.bin"), filepath.Join(dir, "tokenizer.bin"), s); err != nil {
				t.Fatal(err)
			}
			paths[filepath.Join(dir, "m.bin")] = runtime.LoadOptions{}
		}
		for p, opts := range paths {
			m, err := runtime.Load(context.Background(), p, opts)
			if err != nil {
				t.Fatalf("%s %s: %v", s.Arch, filepath.Base(p), err)
			}
			if !step(t, m) {
				t.Errorf("%s %s: the model loads but does not run", s.Arch, filepath.Base(p))
			}
			m.Close()
		}
	}
}
