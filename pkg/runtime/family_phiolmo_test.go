package runtime_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// goldenSpecs are the checkpoints of testdata/llamacpp, written by
// modeltest (F32; head_dim 32).
var goldenSpecs = map[string]modeltest.Spec{
	"olmo2":        {Arch: "olmo2", Dim: 128, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, Seed: 38},
	"phi3":         {Arch: "phi3", Dim: 128, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, Seed: 38},
	"phi3-long":    {Arch: "phi3", Dim: 128, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, OriginalContext: 32, Seed: 38},
	"phi4-mini":    {Arch: "phi3", Dim: 128, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, RopeDim: 24, Tied: true, OriginalContext: 32, Seed: 38},
	"phi3-partial": {Arch: "phi3", Dim: 128, Hidden: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, RopeDim: 24, Tied: true, Seed: 38},
}

// goldenPrompt is the prompt of testdata/llamacpp.
var goldenPrompt = []int{264, 10, 100, 200, 33, 77, 150, 5}

// goldenTol bounds |kvq − llama.cpp| of a logit: both run in float32 but
// sum in different orders, ggml computes RoPE angles in float32 (kvq in
// float64) and its own exp and SiLU; the differences seen are below 2e-6
// on logits near 3.
const goldenTol = 1e-4

// TestLlamaCppGolden checks kvq against llama.cpp on tiny random OLMo 2
// and Phi-3 checkpoints (plain; LongRoPE with short factors and the
// attention factor; partial rotary with tied embeddings, without and with
// LongRoPE as Phi-4-mini): from the GGUF
// file llama.cpp ran and from the same weights as a Hugging Face
// directory, the top-5 logits of every prompt position and of 8 greedy
// steps agree within goldenTol and the greedy tokens are equal.
//
// The numbers come from a program of ours over llama.cpp's C API
// (llama_decode, llama_get_logits_ith; commit 1eeb523c3e0c, CPU, one
// thread, f32 KV cache, flash attention off, n_ctx as the file's header
// says: 32 for phi3-long and phi4-mini, below their original context of 32 so that
// llama.cpp picks the short factors), run on the GGUF files
// modeltest.WriteGGUF writes for goldenSpecs.
func TestLlamaCppGolden(t *testing.T) {
	for name, spec := range goldenSpecs {
		t.Run(name, func(t *testing.T) {
			g := readGolden(t, name)
			if len(g.prompt) != len(goldenPrompt) || len(g.gen) != len(g.greedy) || len(g.greedy) == 0 {
				t.Fatalf("golden file: %d prompt rows, %d steps, %d greedy tokens", len(g.prompt), len(g.gen), len(g.greedy))
			}
			// The greedy choices must be clear: each step's top two
			// differ by well over the tolerance.
			for i, row := range append(g.prompt[len(g.prompt)-1:], g.gen[:len(g.gen)-1]...) {
				if gap := float32(row[0].logit) - float32(row[1].logit); gap < 10*goldenTol {
					t.Fatalf("golden step %d: top two logits %v apart, not a clear choice", i, gap)
				}
			}
			dir := t.TempDir()
			gg, hf := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
			if err := modeltest.WriteGGUF(gg, spec); err != nil {
				t.Fatal(err)
			}
			if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{gg, hf} {
				m := load(t, path, runtime.LoadOptions{})
				check := func(what string, want []idLogit, got []float32) {
					t.Helper()
					if best := slices.Index(got, slices.Max(got)); best != want[0].id {
						t.Errorf("%s %s: argmax %d, llama.cpp %d", filepath.Base(path), what, best, want[0].id)
					}
					for _, w := range want {
						wl := float32(w.logit)
						if d := got[w.id] - wl; d > goldenTol || d < -goldenTol {
							t.Errorf("%s %s: logit of %d is %v, llama.cpp %v", filepath.Base(path), what, w.id, got[w.id], wl)
						}
					}
				}
				V := m.Vocab
				all := allLogits(t, m, goldenPrompt)
				for i, want := range g.prompt {
					check("prompt "+strconv.Itoa(i), want, all[i*V:(i+1)*V])
				}
				r := newRunner(t, m)
				c := newCache(t, r, "fp32", 8)
				_ = c.AddSeq(0)
				last := forward(t, r, c, runtime.Entry{Seq: 0, Tokens: goldenPrompt, Logits: runtime.LastLogits})[0]
				var toks []int
				for i := range g.greedy {
					next := slices.Index(last, slices.Max(last))
					toks = append(toks, next)
					last = forward(t, r, c, runtime.Entry{Seq: 0, Tokens: []int{next}, Logits: runtime.LastLogits})[0]
					check("step "+strconv.Itoa(i), g.gen[i], last)
				}
				if !slices.Equal(toks, g.greedy) {
					t.Errorf("%s: greedy %v, llama.cpp %v", filepath.Base(path), toks, g.greedy)
				}
			}
		})
	}
}

// TestPhiOlmoLoad checks what the loaders make of OLMo 2 and Phi-3
// checkpoints: both formats give the same logits in every dtype; Phi-3's
// fused matrices become views of their rows; its declared sliding window,
// LongRoPE factors and partial rotary arrive; a checkpoint missing a fused
// tensor, or whose fused matrix has the wrong rows, is refused naming it.
func TestPhiOlmoLoad(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for _, arch := range []string{"olmo2", "phi3"} {
		for _, dt := range []string{"F32", "BF16", "F16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				dir := t.TempDir()
				spec := modeltest.Spec{Arch: arch, DType: dt, Seed: 5, SlidingWindow: 7, Context: 128}
				if arch == "phi3" {
					spec.OriginalContext = 64
				}
				hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
				if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := modeltest.WriteGGUF(gg, spec); err != nil {
					t.Fatal(err)
				}
				mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
				if mh.Arch != arch || mg.Arch != arch {
					t.Errorf("arch: HF %q, GGUF %q", mh.Arch, mg.Arch)
				}
				if d := maxRelDiff(allLogits(t, mg, ids), allLogits(t, mh, ids)); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
				if arch != "phi3" {
					return
				}
				for _, m := range []*runtime.Model{mh, mg} {
					if m.SlidingWindow != 7 || m.Scaling.Type != "longrope" || m.Scaling.OriginalContext != 64 || len(m.Scaling.ShortFactor) != 8 {
						t.Errorf("%s: window %d, scaling %+v", m.Format, m.SlidingWindow, m.Scaling)
					}
					l := &m.Layers[0]
					if l.Wq.Rows != 64 || l.Wk.Rows != 32 || l.Wv.Rows != 32 || l.Gate.Rows != 96 || l.Up.Rows != 96 {
						t.Errorf("%s: split rows q %d k %d v %d gate %d up %d", m.Format, l.Wq.Rows, l.Wk.Rows, l.Wv.Rows, l.Gate.Rows, l.Up.Rows)
					}
				}
				if mh.Params() != mg.Params() || mh.WeightBytes() != mg.WeightBytes() && dt == "F32" {
					t.Errorf("params HF %d GGUF %d, bytes HF %d GGUF %d", mh.Params(), mg.Params(), mh.WeightBytes(), mg.WeightBytes())
				}
			})
		}
	}
	t.Run("phi3 partial rotary", func(t *testing.T) {
		dir := t.TempDir()
		if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "phi3", RopeDim: 8, Tied: true}, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		m := load(t, dir, runtime.LoadOptions{})
		if m.RopeDim != 8 || !m.TiedEmbeddings {
			t.Errorf("RopeDim %d, tied %v", m.RopeDim, m.TiedEmbeddings)
		}
	})
	t.Run("refused", func(t *testing.T) {
		dir := t.TempDir()
		hf := filepath.Join(dir, "hf")
		if err := modeltest.WriteHF(hf, modeltest.Spec{Arch: "phi3"}, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(hf, "config.json"), func(c map[string]any) { c["num_key_value_heads"] = 1 })
		// 1 KV head instead of 2: the fused qkv has the rows of 2.
		_, err := runtime.Load(t.Context(), hf, runtime.LoadOptions{})
		if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "model.layers.0.self_attn.qkv_proj.weight has 128 rows, the config implies 96") {
			t.Errorf("fused qkv of the wrong rows: %v", err)
		}
		hf2 := filepath.Join(dir, "hf2")
		if err := modeltest.WriteHF(hf2, modeltest.Spec{Arch: "olmo2"}, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(hf2, "config.json"), func(c map[string]any) { c["architectures"] = []string{"Phi3ForCausalLM"} })
		_, err = runtime.Load(t.Context(), hf2, runtime.LoadOptions{})
		if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "missing tensor model.layers.0.input_layernorm.weight") {
			t.Errorf("OLMo 2 weights as Phi-3: %v", err)
		}
		gg := filepath.Join(dir, "olmo3.gguf")
		if err := modeltest.WriteGGUF(gg, modeltest.Spec{Arch: "olmo2"}); err != nil {
			t.Fatal(err)
		}
		m := load(t, gg, runtime.LoadOptions{})
		m.SlidingWindow = 4096
		if err := m.Prepare(); !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "OLMo 3") {
			t.Errorf("olmo2 with a sliding window: %v", err)
		}
		hf3 := filepath.Join(dir, "hf3")
		if err := modeltest.WriteHF(hf3, modeltest.Spec{Arch: "phi3", Context: 128, OriginalContext: 64}, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(hf3, "config.json"), func(c map[string]any) {
			c["rope_scaling"].(map[string]any)["short_factor"] = []float64{1, 2}
		})
		_, err = runtime.Load(t.Context(), hf3, runtime.LoadOptions{})
		if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "LongRoPE has 2 short and 8 long factors, want 8 each") {
			t.Errorf("LongRoPE factors of the wrong length: %v", err)
		}
	})
}

func editJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPhi4MiniPreRoPEKeys: caches of keys before RoPE re-rotate Phi-3's
// keys as the runner did (partial rotary with the LongRoPE short factors;
// the attention factor is the queries'), over a sliding window: the logits
// equal those of a cache of rotated keys.
func TestPhi4MiniPreRoPEKeys(t *testing.T) {
	dir := t.TempDir()
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "phi3", RopeDim: 8, Tied: true, Context: 512, OriginalContext: 128, SlidingWindow: 20, Seed: 9}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m := load(t, dir, runtime.LoadOptions{})
	r := newRunner(t, m)
	ids := tokens(45, m.Vocab, 5)
	post := newCache(t, r, "fp32", 4)
	l, err := kvcache.NewLayout(m.Geometry(), quant.Spec{K: preRoPE32{}, V: quant.FP32}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := r.NewCache(l, kvcache.Options{Blocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	_ = post.AddSeq(0)
	_ = pre.AddSeq(0)
	a := forward(t, r, post, runtime.Entry{Seq: 0, Tokens: ids[:30], Logits: runtime.AllLogits})[0]
	b := forward(t, r, pre, runtime.Entry{Seq: 0, Tokens: ids[:30], Logits: runtime.AllLogits})[0]
	if d := maxRelDiff(b, a); d > 1e-5 {
		t.Errorf("prefill: pre-RoPE cache logits differ by %.2g", d)
	}
	for _, id := range ids[30:] {
		a = forward(t, r, post, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
		b = forward(t, r, pre, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
		if d := maxRelDiff(b, a); d > 1e-5 {
			t.Fatalf("decode: pre-RoPE cache logits differ by %.2g", d)
		}
	}
}

// TestGGUFPreTokenizerNames: files with the pre-tokenizer names llama.cpp's
// converter gives cl100k-style vocabularies (OLMo 2, Phi-4) load and split
// as llama.cpp does: "dbrx" as "llama-bpe" (llama3's regex), "olmo" as
// "default" (GPT-2's). (pkg/tokenizer tests the regexes themselves.)
func TestGGUFPreTokenizerNames(t *testing.T) {
	text := "The 12345 cats' HOUSE's\n\n  don't   stop!!"
	enc := func(pre string) []int {
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := modeltest.WriteGGUF(p, modeltest.Spec{Arch: "olmo2", GGUFPre: pre}); err != nil {
			t.Fatal(err)
		}
		return load(t, p, runtime.LoadOptions{}).Tokenizer.Encode(text, false)
	}
	if a, b := enc("dbrx"), enc("llama-bpe"); !slices.Equal(a, b) {
		t.Errorf("dbrx %v, llama-bpe %v", a, b)
	}
	if a, b := enc("olmo"), enc("default"); !slices.Equal(a, b) {
		t.Errorf("olmo %v, default %v", a, b)
	}
}

// TestPhi3ConfigVariants: config.json's older LongRoPE spelling ("su")
// loads as "longrope"; rope_scaling.attention_factor, where given, is the
// attention factor; and a batch-invariant runner gives the Phi-4-mini shape
// (whose queries take a diagonal product over heads·tokens rows) the same
// bits in a batch as alone.
func TestPhi3ConfigVariants(t *testing.T) {
	dir := t.TempDir()
	spec := modeltest.Spec{Arch: "phi3", RopeDim: 8, Tied: true, Context: 512, OriginalContext: 128, Seed: 10}
	if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	ids := tokens(20, modeltest.Vocab(), 2)
	base := allLogits(t, load(t, dir, runtime.LoadOptions{}), ids)
	editJSON(t, filepath.Join(dir, "config.json"), func(c map[string]any) { c["rope_scaling"].(map[string]any)["type"] = "su" })
	m := load(t, dir, runtime.LoadOptions{})
	if m.Scaling.Type != "longrope" || !slices.Equal(allLogits(t, m, ids), base) {
		t.Errorf(`rope_scaling type "su": %q, or other logits`, m.Scaling.Type)
	}
	editJSON(t, filepath.Join(dir, "config.json"), func(c map[string]any) { c["rope_scaling"].(map[string]any)["attention_factor"] = 1.5 })
	if m := load(t, dir, runtime.LoadOptions{}); m.Scaling.AttnFactor != 1.5 || slices.Equal(allLogits(t, m, ids), base) {
		t.Errorf("attention_factor 1.5: AttnFactor %v, or the same logits", m.Scaling.AttnFactor)
	}

	r, err := runtime.NewRunner(m, runtime.RunnerOptions{BatchInvariant: true, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	alone := newCache(t, r, "fp32", 8)
	both := newCache(t, r, "fp32", 8)
	_ = alone.AddSeq(0)
	_ = both.AddSeq(0)
	_ = both.AddSeq(1)
	a := forward(t, r, alone, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	b := forward(t, r, both, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits}, runtime.Entry{Seq: 1, Tokens: ids[:7], Logits: runtime.AllLogits})[0]
	if !slices.Equal(a, b) {
		t.Errorf("batch-invariant logits differ in a batch by %.2g", maxRelDiff(a, b))
	}
}
