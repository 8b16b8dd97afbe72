package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

func load(t *testing.T, path string, opts runtime.LoadOptions) *runtime.Model {
	t.Helper()
	m, err := runtime.Load(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func allLogits(t *testing.T, m *runtime.Model, ids []int) []float32 {
	t.Helper()
	r := newRunner(t, m)
	c := newCache(t, r, "fp32", 8)
	_ = c.AddSeq(0)
	return forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
}

// TestCheckpointFormatsAgree writes the same random weights as a Hugging Face
// directory, a GGUF file and (for llama) a llama2.c checkpoint, and checks
// that all give the same logits.
func TestCheckpointFormatsAgree(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for _, arch := range []string{"llama", "mistral", "qwen2", "qwen3"} {
		for _, dt := range []string{"F32", "BF16", "F16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				dir := t.TempDir()
				spec := modeltest.Spec{Arch: arch, DType: dt, Seed: 5, Tied: arch == "qwen2"}
				hf := filepath.Join(dir, "hf")
				if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
					t.Fatal(err)
				}
				gg := filepath.Join(dir, "m.gguf")
				if err := modeltest.WriteGGUF(gg, spec); err != nil {
					t.Fatal(err)
				}
				mh := load(t, hf, runtime.LoadOptions{})
				mg := load(t, gg, runtime.LoadOptions{})
				if mh.Arch != arch || mg.Arch != arch {
					t.Errorf("arch: HF %q, GGUF %q, want %q", mh.Arch, mg.Arch, arch)
				}
				a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
				if d := maxRelDiff(b, a); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
				if arch == "llama" && dt == "F32" {
					bin, tok := filepath.Join(dir, "m.bin"), filepath.Join(dir, "tok.bin")
					if err := modeltest.WriteLlama2C(bin, tok, spec); err != nil {
						t.Fatal(err)
					}
					ml := load(t, bin, runtime.LoadOptions{Tokenizer: tok})
					if d := maxRelDiff(allLogits(t, ml, ids), a); d > 1e-5 {
						t.Errorf("llama2.c vs HF logits differ by %.2g", d)
					}
				}
			})
		}
	}
}

func TestShardedEqualsUnsharded(t *testing.T) {
	dir := t.TempDir()
	spec := modeltest.Spec{Arch: "qwen3", DType: "BF16", Seed: 8}
	one, three := filepath.Join(dir, "one"), filepath.Join(dir, "three")
	if err := modeltest.WriteHF(one, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(three, spec, modeltest.HFOptions{Shards: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(three, "model-00003-of-00003.safetensors")); err != nil {
		t.Fatal(err)
	}
	ids := tokens(20, modeltest.Vocab(), 1)
	a, b := allLogits(t, load(t, one, runtime.LoadOptions{}), ids), allLogits(t, load(t, three, runtime.LoadOptions{}), ids)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: sharded %v, unsharded %v", i, b[i], a[i])
		}
	}
}

// TestSlidingWindow: with one layer, RoPE makes attention depend only on
// relative positions, so a windowed model's logits at position p equal the
// last logits of a fresh sequence holding only the window's tokens.
func TestSlidingWindow(t *testing.T) {
	const w = 5
	dir := t.TempDir()
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "mistral", Layers: 1, SlidingWindow: w, Seed: 2}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m := load(t, dir, runtime.LoadOptions{})
	if m.SlidingWindow != w {
		t.Fatalf("SlidingWindow = %d, want %d", m.SlidingWindow, w)
	}
	ids := tokens(17, modeltest.Vocab(), 4)
	all := allLogits(t, m, ids)
	V := m.Vocab
	for _, p := range []int{w - 1, w, 11, 16} {
		win := ids[max(0, p-w+1) : p+1]
		got := allLogits(t, m, win)
		last := got[(len(win)-1)*V:]
		if d := maxRelDiff(all[p*V:(p+1)*V], last); d > 1e-5 {
			t.Errorf("position %d: windowed logits differ from the window-only sequence by %.2g", p, d)
		}
	}
}

func TestHFBadInput(t *testing.T) {
	write := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "m")
		if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 1}, modeltest.HFOptions{Shards: 2}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	edit := func(t *testing.T, path, old, new string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s does not contain %q", path, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   []string
		is     error
	}{
		{"no config", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "config.json")) }, []string{"config.json"}, runtime.ErrModel},
		{"no tokenizer", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "tokenizer.json")) }, []string{"tokenizer.json"}, runtime.ErrModel},
		{"missing shard", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "model-00002-of-00002.safetensors")) }, []string{"model-00002-of-00002.safetensors", "index"}, runtime.ErrModel},
		{"shape vs config", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "config.json"), `"intermediate_size": 96`, `"intermediate_size": 100`)
		}, []string{"gate", "[96 64]", "[100 64]"}, runtime.ErrModel},
		{"unknown architecture", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "config.json"), "LlamaForCausalLM", "GPTNeoXForCausalLM")
		}, []string{"GPTNeoXForCausalLM", "config.json"}, runtime.ErrUnsupported},
		{"malformed config", func(t *testing.T, d string) {
			edit(t, filepath.Join(d, "config.json"), `"hidden_size": 64,`, `"hidden_size": 64,,`)
		}, []string{"config.json:"}, runtime.ErrModel},
		{"pickle only", func(t *testing.T, d string) {
			for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"} {
				os.Remove(filepath.Join(d, f))
			}
			os.WriteFile(filepath.Join(d, "pytorch_model.bin"), []byte("PK"), 0o644)
		}, []string{"safetensors only", "pickle"}, runtime.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t)
			tc.break_(t, dir)
			_, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestChatPrompt(t *testing.T) {
	dir := t.TempDir()
	spec := modeltest.Spec{Seed: 1}
	hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(gg, spec); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{hf, gg} {
		m := load(t, path, runtime.LoadOptions{})
		ids, text, err := m.ChatPrompt([]chat.Message{{Role: "user", Content: " the hen "}})
		if err != nil {
			t.Fatal(err)
		}
		if want := "<|begin_of_text|><|user|>the hen<|assistant|>"; text != want {
			t.Errorf("%s: rendered %q, want %q", path, text, want)
		}
		bos := m.Tokenizer.BOS()
		if len(ids) == 0 || ids[0] != bos || ids[1] == bos {
			t.Errorf("%s: ids %v should start with exactly one BOS %d", path, ids, bos)
		}
		if got := m.Tokenizer.DecodeWithSpecials(ids); got != text {
			t.Errorf("%s: ids decode to %q, want %q", path, got, text)
		}
	}
}

// TestGGUFKeyOrder: a block-format key cache on a Hugging Face checkpoint
// groups other dimensions than on its GGUF conversion (rotate_half vs
// interleaved RoPE pairs), so their logits differ; quant.InterleaveKeys on
// the HF model stores keys in GGUF order and gives the GGUF model's logits.
func TestGGUFKeyOrder(t *testing.T) {
	dir := t.TempDir()
	spec := modeltest.Spec{Arch: "llama", Dim: 128, Heads: 2, KVHeads: 1, Seed: 9}
	hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(gg, spec); err != nil {
		t.Fatal(err)
	}
	mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
	if !mh.RopeNeoX || mg.RopeNeoX {
		t.Fatalf("RoPE pairing: HF neox=%v, GGUF neox=%v", mh.RopeNeoX, mg.RopeNeoX)
	}
	ids := tokens(60, modeltest.Vocab(), 4)
	logits := func(m *runtime.Model, k quant.Format) []float32 {
		r := newRunner(t, m)
		l, err := kvcache.NewLayout(m.Geometry(), quant.Spec{K: k, V: quant.FP16}, 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.NewCache(l, kvcache.Options{Blocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.AddSeq(0)
		return forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	}
	q40 := quant.Formats().MustLookup("q4_0")
	want := logits(mg, q40)
	plain, inter := logits(mh, q40), logits(mh, quant.InterleaveKeys(q40))
	dPlain, dInter := maxRelDiff(plain, want), maxRelDiff(inter, want)
	if dInter > 1e-4 || dPlain < 10*dInter {
		t.Errorf("q4_0 keys on the HF model vs the GGUF model: %.2g as stored, %.2g in GGUF order; want the second under 1e-4 and far below the first", dPlain, dInter)
	}
	t.Logf("q4_0 keys, HF model vs GGUF model: %.2g as stored, %.2g in GGUF order", dPlain, dInter)
	// Exact formats are unchanged by the order, but for the summation
	// order of the dot products (1.2e-5 measured with the generic kernels;
	// a wrong permutation would be of order 1).
	if d := maxRelDiff(logits(mh, quant.InterleaveKeys(quant.FP32)), logits(mh, quant.FP32)); d > 1e-4 {
		t.Errorf("fp32 keys in GGUF order differ by %.2g", d)
	}
}
