package runtime_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// gemmaSpecs are the tiny Gemma checkpoints of the tests: head_dim 32 so
// that the block caches apply, a window shorter than the prompts, Gemma
// 2's softcaps low enough to bend the scores and logits, and Gemma 3's
// seven layers (five sliding, one global, one sliding) with linear RoPE
// scaling on the global layer.
var gemmaSpecs = map[string]modeltest.Spec{
	"gemma2": {Arch: "gemma2", Dim: 64, Hidden: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, SlidingWindow: 6,
		AttnSoftcap: 2, FinalSoftcap: 8, Seed: 21},
	"gemma3": {Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 32, SlidingWindow: 6,
		RopeTheta: 1e6, RopeScaling: 8, Seed: 22},
}

// writeGemma writes spec as a Hugging Face directory and a GGUF file.
func writeGemma(t *testing.T, spec modeltest.Spec) (hf, gg string) {
	t.Helper()
	dir := t.TempDir()
	hf, gg = filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(gg, spec); err != nil {
		t.Fatal(err)
	}
	return hf, gg
}

// TestGemmaFormatsAgree loads each Gemma checkpoint from its Hugging Face
// directory and its GGUF file (norms stored as w and as 1+w, different
// tensor names and metadata keys) and checks that both read the same
// config and give the same logits.
func TestGemmaFormatsAgree(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for _, arch := range []string{"gemma2", "gemma3"} {
		for _, dt := range []string{"F32", "BF16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				spec := gemmaSpecs[arch]
				spec.DType = dt
				hf, gg := writeGemma(t, spec)
				mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
				for _, m := range []*runtime.Model{mh, mg} {
					c := m.Config
					if c.Arch != arch || c.SlidingWindow != 6 || len(c.SlidingLayers) != spec.Layers || !c.TiedEmbeddings {
						t.Fatalf("%s: arch %q, window %d, sliding layers %v, tied %v", m.Format, c.Arch, c.SlidingWindow, c.SlidingLayers, c.TiedEmbeddings)
					}
					for li := range spec.Layers {
						want := li%2 == 0
						if arch == "gemma3" {
							want = li != 5
						}
						if c.Sliding(li) != want {
							t.Errorf("%s: layer %d sliding = %v, want %v", m.Format, li, c.Sliding(li), want)
						}
					}
				}
				if mh.AttnSoftcap != mg.AttnSoftcap || mh.FinalSoftcap != mg.FinalSoftcap || mh.RopeLocalTheta != mg.RopeLocalTheta || !reflect.DeepEqual(mh.Scaling, mg.Scaling) {
					t.Errorf("HF softcaps %v/%v, local base %v, scaling %+v; GGUF %v/%v, %v, %+v", mh.AttnSoftcap, mh.FinalSoftcap, mh.RopeLocalTheta, mh.Scaling,
						mg.AttnSoftcap, mg.FinalSoftcap, mg.RopeLocalTheta, mg.Scaling)
				}
				a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
				if d := maxRelDiff(b, a); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
			})
		}
	}
}

// gemmaGoldenPrompt is the 16-token prompt of llama.cpp's numbers for
// gemmaSpecs' F32 GGUF files (testdata/llamacpp/gemma2.txt and
// gemma3.txt): the top 3 logits of every position of the prompt and of 8
// greedy decode steps, and the greedy tokens.
var gemmaGoldenPrompt = []int{51, 83, 117, 153, 191, 231, 7, 51, 97, 145, 195, 247, 35, 91, 149, 209}

// gemmaGoldenTol bounds |kvq − llama.cpp| of a logit. llama.cpp's CPU GELU
// looks its input up in a table of float16 values (GGML_GELU_FP16: the
// input and the output rounded to 11 bits), which moves the MLP outputs
// by up to about 5e-4 relative; kvq computes the tanh GELU in float32.
// Everything else is float32 in both (F32 weights, an F32 KV cache in
// llama.cpp). Measured: at most 0.0013 (logits here are about 2 to 5).
const gemmaGoldenTol = 0.005

// TestGemmaMatchesLlamaCpp checks kvq against llama.cpp on the same
// Gemma 2 and Gemma 3 checkpoints, read from the GGUF file llama.cpp ran
// and from the Hugging Face directory of the same weights: every position's
// top 3 token ids equal and their logits within gemmaGoldenTol, through a
// prompt longer than the sliding window, and the same greedy
// continuation, decoded one token at a time through the cache.
//
// The numbers come from a program outside the repository that links
// llama.cpp's libllama (commit in the files' header), loads the GGUF with an
// F32 KV cache, flash attention off and a full-size SWA cache, decodes the
// prompt in one batch with logits at every position, then greedily one
// token at a time, and prints the top 3 logits of each position.
func TestGemmaMatchesLlamaCpp(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		g := readGolden(t, arch)
		top := append(slices.Clip(g.prompt), g.gen...)
		hf, gg := writeGemma(t, gemmaSpecs[arch])
		for _, path := range []string{gg, hf} {
			m := load(t, path, runtime.LoadOptions{})
			t.Run(arch+"/"+m.Format, func(t *testing.T) {
				r := newRunner(t, m)
				c := newCache(t, r, "fp32", 8)
				_ = c.AddSeq(0)
				V := m.Vocab
				var rows [][]float32
				all := forward(t, r, c, runtime.Entry{Seq: 0, Tokens: gemmaGoldenPrompt, Logits: runtime.AllLogits})[0]
				for i := range gemmaGoldenPrompt {
					rows = append(rows, all[i*V:(i+1)*V])
				}
				var greedy []int
				last := rows[len(rows)-1]
				for range g.greedy {
					next := argmax(last)
					greedy = append(greedy, next)
					last = forward(t, r, c, runtime.Entry{Seq: 0, Tokens: []int{next}, Logits: runtime.LastLogits})[0]
					rows = append(rows, last)
				}
				if !slices.Equal(greedy, g.greedy) {
					t.Errorf("greedy %v, llama.cpp %v", greedy, g.greedy)
				}
				if len(rows) != len(top) {
					t.Fatalf("%d positions, golden %d", len(rows), len(top))
				}
				worst := 0.0
				for pos, row := range top {
					for k, e := range row {
						id := e.id
						if got := topK(rows[pos], 3)[k]; got != id {
							t.Errorf("position %d: top %d is token %d, llama.cpp %d", pos, k+1, got, id)
						}
						d := math.Abs(float64(rows[pos][id]) - e.logit)
						worst = max(worst, d)
						if d > gemmaGoldenTol {
							t.Errorf("position %d token %d: logit %.5f, llama.cpp %.5f", pos, id, rows[pos][id], e.logit)
						}
					}
				}
				t.Logf("largest logit difference from llama.cpp: %.2g", worst)
			})
		}
	}
}

func argmax(x []float32) int { return topK(x, 1)[0] }

// topK returns the indices of the k largest values, largest first.
func topK(x []float32, k int) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] > x[idx[b]] })
	return idx[:k]
}

// TestGemma3Multimodal loads the text model of a multimodal Gemma 3
// checkpoint (Gemma3ForConditionalGeneration: text_config without the
// fields at Gemma3TextConfig's defaults, tensors under
// language_model.model.) and checks it gives the logits of the same
// weights as a Gemma3ForCausalLM directory.
func TestGemma3Multimodal(t *testing.T) {
	spec := gemmaSpecs["gemma3"]
	dir := t.TempDir()
	mm, plain := filepath.Join(dir, "mm"), filepath.Join(dir, "plain")
	if err := modeltest.WriteHF(mm, spec, modeltest.HFOptions{Multimodal: true}); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(plain, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := load(t, mm, runtime.LoadOptions{}), load(t, plain, runtime.LoadOptions{})
	if a.Arch != "gemma3" || a.RopeLocalTheta != 10000 || a.SlidingWindow != 6 || a.Sliding(5) || !a.Sliding(4) || a.QueryScalar != 32 {
		t.Errorf("multimodal config: %+v", a.Config)
	}
	ids := tokens(20, modeltest.Vocab(), 5)
	if d := maxRelDiff(allLogits(t, a, ids), allLogits(t, b, ids)); d != 0 {
		t.Errorf("multimodal vs causal-LM logits differ by %.2g", d)
	}
}

// TestGemma3PreRoPEKeys checks caches that keep keys before RoPE on a
// model whose layers rotate by two tables (Gemma 3's local and global
// bases): refused when the local layers would keep them too, accepted when
// sliding=fp16 keeps those post-RoPE, and then close to the fp32 cache
// (re-rotated with the global layers' table).
func TestGemma3PreRoPEKeys(t *testing.T) {
	_, gg := writeGemma(t, gemmaSpecs["gemma3"])
	m := load(t, gg, runtime.LoadOptions{})
	r := newRunner(t, m)
	s, err := quant.Formats().ParseSpec("kvquant4")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kvcache.NewLayout(m.Geometry(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.NewCache(l, kvcache.Options{Blocks: 8}); !errors.Is(err, kvcache.ErrGeometry) {
		t.Errorf("kvquant4 on every layer: %v, want ErrGeometry", err)
	}
	ids := tokens(30, m.Vocab, 9)
	logits := func(spec string) []float32 {
		c := newCache(t, r, spec, 8)
		_ = c.AddSeq(0)
		return forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	}
	exact, pre := logits("fp32"), logits("kvquant4,sliding=fp16")
	if d := maxRelDiff(pre, exact); !(d > 0 && d < 0.05) {
		t.Errorf("kvquant4,sliding=fp16 logits differ from fp32 by %.3g, want a 4-bit cache's small difference", d)
	}
}

// TestGemmaRefusals checks what the Gemma family refuses, naming it: an
// activation other than the tanh GELU, a Gemma 3 checkpoint without its
// q/k norms, a layer_types list of the wrong length, and a backend without
// the GeGLU, scale and softcapped attention ops.
func TestGemmaRefusals(t *testing.T) {
	edit := func(arch, from, to string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), arch)
		spec := gemmaSpecs[arch]
		if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "config.json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), from, to, 1)
		if s == string(b) {
			t.Fatalf("config.json has no %q", from)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	ctx := context.Background()
	for _, tc := range []struct {
		dir  string
		kind error
		want string
	}{
		{edit("gemma2", `"hidden_activation": "gelu_pytorch_tanh"`, `"hidden_activation": "silu"`), runtime.ErrUnsupported, `hidden_activation "silu"`},
		{edit("gemma2", `"Gemma2ForCausalLM"`, `"Gemma3ForCausalLM"`), runtime.ErrModel, "missing tensor model.layers.0.self_attn.q_norm.weight"},
		{edit("gemma3", `"sliding_window_pattern": 6`, `"layer_types": ["full_attention"]`), runtime.ErrModel, "layer_types has 1 entries for 7 layers"},
	} {
		_, err := runtime.Load(ctx, tc.dir, runtime.LoadOptions{})
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v naming %q", tc.dir, err, tc.kind, tc.want)
		}
	}
	_, gg := writeGemma(t, gemmaSpecs["gemma2"])
	m := load(t, gg, runtime.LoadOptions{})
	plain := struct{ backend.Backend }{cpu.New(1)} // the Backend methods only
	if _, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: plain}); !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "GeGLU") {
		t.Errorf("a backend without SoftcapOps: %v, want ErrUnsupported", err)
	}
}

// TestGemmaEveryFormat runs a Gemma 3 checkpoint through a cache of every
// registered format (pre-RoPE ones with sliding=fp16, since the local and
// global layers rotate differently), K alone and with the sliding layers
// exempted: every run gives finite logits near the fp32 cache's, and for a
// quantized format the exempted run is no farther from them than the plain
// one.
func TestGemmaEveryFormat(t *testing.T) {
	hf, _ := writeGemma(t, gemmaSpecs["gemma3"])
	m := load(t, hf, runtime.LoadOptions{})
	r := newRunner(t, m)
	ids := tokens(24, m.Vocab, 4)
	run := func(spec string) []float32 {
		t.Helper()
		s, err := quant.Formats().ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		l, err := kvcache.NewLayout(m.Geometry(), s, 0)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		opts := kvcache.Options{Blocks: 8}
		c, err := r.NewCache(l, opts)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		_ = c.AddSeq(0)
		return forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
	}
	base := run("fp32")
	for _, name := range quant.Formats().Names() {
		suffix := ""
		s, _ := quant.Formats().ParseSpec(name)
		if l, err := kvcache.NewLayout(m.Geometry(), s, 0); err == nil && l.AnyPreRoPE() {
			suffix = ",sliding=fp16"
		}
		plain := maxRelDiff(run(name+suffix), base)
		kOnly := maxRelDiff(run("k="+name+",v=fp16"+suffix), base)
		exempt := maxRelDiff(run(name+",sliding=fp16"), base)
		for _, d := range []float64{plain, kOnly, exempt} {
			if math.IsNaN(d) || math.IsInf(d, 0) || d > 2 {
				t.Errorf("%s: logits differ from fp32 by %.3g (plain), %.3g (K only), %.3g (sliding=fp16)", name, plain, kOnly, exempt)
				break
			}
		}
		if quant.Quantized(s.K) && exempt > plain+1e-6 { // fp16 rounds less than a quantized format
			t.Errorf("%s: exempting the sliding layers moved the logits farther from fp32 (%.3g > %.3g)", name, exempt, plain)
		}
	}
}
