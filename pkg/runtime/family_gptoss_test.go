package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/chat"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// gptossSpec is the tiny GPT-OSS of the tests: 4 layers (0 and 2 slide
// over 4 positions), 4 experts of 64 (top 2), head_dim 32, YaRN factor 4
// over an original context of 32, truncated as llama.cpp computes it.
var gptossSpec = modeltest.GPTOSS{YarnFactor: 4, SinkScale: 2, Seed: 39}

func writeGPTOSS(t *testing.T, s modeltest.GPTOSS) (hf, gg string) {
	t.Helper()
	dir := t.TempDir()
	hf, gg = filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteGPTOSSHF(hf, s); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGPTOSSGGUF(gg, s); err != nil {
		t.Fatal(err)
	}
	return hf, gg
}

// TestGPTOSSFormatsAgree loads the same GPT-OSS weights from a Hugging
// Face directory (MXFP4 blocks and scales, gate and up interleaved) and a
// GGUF file (GGML MXFP4, gate and up split) and checks the configs and
// every position's logits agree.
func TestGPTOSSFormatsAgree(t *testing.T) {
	hf, gg := writeGPTOSS(t, gptossSpec)
	mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
	for _, m := range []*runtime.Model{mh, mg} {
		c := m.Config
		if c.Arch != "gpt-oss" || c.Experts != 4 || c.ExpertsUsed != 2 || c.SlidingWindow != 4 || c.Scaling.Type != "yarn" || c.SwiGLULimit != 7 {
			t.Fatalf("%s: config %+v", m.Format, c)
		}
		if len(c.SlidingLayers) != 4 || !c.SlidingLayers[0] || c.SlidingLayers[1] || !c.SlidingLayers[2] || c.SlidingLayers[3] {
			t.Errorf("%s: sliding layers %v, want the even ones", m.Format, c.SlidingLayers)
		}
		if m.Layers[1].Sinks == nil || m.Layers[1].ExpGateB == nil || len(m.Layers[1].ExpGate) != 4 {
			t.Errorf("%s: layer 1 lacks sinks or expert biases", m.Format)
		}
	}
	// The directory's MXFP4 experts are repacked on first use: none is
	// written before a forward pass, each chosen one after it.
	filled := func() (n int) {
		for li := range mh.Layers {
			for _, w := range mh.Layers[li].ExpGate {
				if slices.ContainsFunc(w.Raw, func(b byte) bool { return b != 0 }) {
					n++
				}
			}
		}
		return n
	}
	if n := filled(); n != 0 || mh.Layers[0].ExpPrepare == nil {
		t.Fatalf("%d experts written at load (ExpPrepare set: %v)", n, mh.Layers[0].ExpPrepare != nil)
	}
	// One token uses 2 of the 4 experts in each of the 4 layers.
	r1 := newRunner(t, mh)
	c1 := newCache(t, r1, "fp32", 2)
	_ = c1.AddSeq(0)
	forward(t, r1, c1, runtime.Entry{Seq: 0, Tokens: []int{42}, Logits: runtime.LastLogits})
	if n := filled(); n != 8 {
		t.Errorf("%d experts written after one token, want the 8 it chose", n)
	}
	ids := []int{264, 10, 100, 200, 33, 45, 120, 7, 99, 250, 12, 80}
	a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
	var worst float64
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
	}
	t.Logf("largest |HF − GGUF| logit: %.2g", worst)
	if worst > 1e-5 {
		t.Errorf("HF and GGUF logits differ by %g", worst)
	}
	// The same experts unquantized (transposed [E][in][out] F32 tensors,
	// gate and up interleaved): float32 products of the same values.
	plain := filepath.Join(t.TempDir(), "plain")
	s := gptossSpec
	s.PlainExperts = true
	if err := modeltest.WriteGPTOSSHF(plain, s); err != nil {
		t.Fatal(err)
	}
	mp := load(t, plain, runtime.LoadOptions{})
	if dt := mp.Layers[0].ExpGate[0].DType; dt != tensor.F32 {
		t.Fatalf("plain experts loaded as %v", dt)
	}
	// The MXFP4 side on float32 activations (its decode products quantize
	// them to Q8_0 otherwise, as llama.cpp's do: 0.06 apart here).
	a = f32Logits(t, mh, ids)
	c := allLogits(t, mp, ids)
	worst = 0
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i]-c[i])))
	}
	t.Logf("largest |HF MXFP4 − HF unquantized| logit: %.2g", worst)
	if worst > 1e-5 {
		t.Errorf("MXFP4 and unquantized experts' logits differ by %g", worst)
	}
}

// f32Logits is allLogits on the CPU backend with float32 activations
// (cpu.Backend.F32Activations).
func f32Logits(t *testing.T, m *runtime.Model, ids []int) []float32 {
	t.Helper()
	r := f32Runner(t, m)
	c := newCache(t, r, "fp32", 8)
	_ = c.AddSeq(0)
	return forward(t, r, c, runtime.Entry{Seq: 0, Tokens: ids, Logits: runtime.AllLogits})[0]
}

// f32Runner is newRunner on the CPU backend with float32 activations.
func f32Runner(t *testing.T, m *runtime.Model) *runtime.Runner {
	t.Helper()
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: cpu.New(0).F32Activations()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gptossGolden are llama.cpp's numbers for gptossSpec, in
// testdata/llamacpp/gptoss-NAME.txt: the prompt gptossPrompt (no BOS),
// then 8 greedy steps; the files hold the top-5 logits of the prompt's
// last position and of each step, and the 9 argmax ids.
// The prompt and the steps run past the 4-position window of layers 0
// and 2. Two files of the same weights: "f32" written with ExpertsF32
// (the MXFP4 experts decoded to F32, so that llama.cpp multiplies in
// float32), "mxfp4" with GGML MXFP4 experts (llama.cpp's MXFP4 products
// quantize the activations to Q8_0, and so do kvq's decode products).
//
// Produced with llama.cpp 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (Sep
// 21 2025), CPU build, by a small program over libllama outside this
// repository: llama_model_load_from_file (n_gpu_layers 0),
// llama_init_from_model (n_ctx 256, n_batch 256, 1 thread, flash
// attention off, swa_full, type_k and type_v GGML_TYPE_F32), llama_decode
// of the prompt as one llama_batch_get_one, then one token at a time,
// reading llama_get_logits_ith(ctx, -1) after each decode.
var gptossGolden = []struct {
	name string
	tol  float64
}{
	// kvq lands within 2e-6 of llama.cpp's printed values (±5e-7): "f32"
	// from the F32-expert file, and from the MXFP4 files on float32
	// activations (cpu.Backend.F32Activations); "mxfp4" from the MXFP4
	// files with kvq's Q8_0 activations (1.1e-6; they differed by 0.03
	// while kvq kept float32 activations). The tolerance is 10× that, and
	// every greedy margin is above 10× the tolerance.
	{name: "f32", tol: 2e-5},
	{name: "mxfp4", tol: 2e-5},
}

var gptossPrompt = []int{264, 10, 100, 200, 33, 45, 120, 7, 99, 250, 12, 80}

// TestGPTOSSGoldenLlamaCpp reproduces llama.cpp's logits and greedy tokens
// on the tiny GPT-OSS, from the MXFP4 GGUF file, the F32-expert one and
// the Hugging Face directory (MXFP4 blocks and scales): the same weights.
func TestGPTOSSGoldenLlamaCpp(t *testing.T) {
	golds := make([]llamaCppGolden, len(gptossGolden))
	tops := make([][][]idLogit, len(gptossGolden))
	for i, g := range gptossGolden {
		golds[i] = readGolden(t, "gptoss-"+g.name)
		tops[i] = golds[i].lastAndSteps(t, "gptoss-"+g.name)
	}
	for i, top := range tops[0] {
		if m := top[0].logit - top[1].logit; m < 10*gptossGolden[0].tol {
			t.Fatalf("step %d: golden margin %.2g is below 10× the tolerance", i, m)
		}
	}
	hf, gg := writeGPTOSS(t, gptossSpec)
	f32 := filepath.Join(t.TempDir(), "f32.gguf")
	s := gptossSpec
	s.ExpertsF32 = true
	if err := modeltest.WriteGPTOSSGGUF(f32, s); err != nil {
		t.Fatal(err)
	}
	for gi, g := range gptossGolden {
		for _, path := range []string{gg, f32, hf} {
			m := load(t, path, runtime.LoadOptions{})
			r := newRunner(t, m) // mxfp4: Q8_0 activations in the MXFP4 files
			switch {
			case g.name == "f32" && path != f32:
				r = f32Runner(t, m)
			case g.name == "mxfp4" && path == f32:
				continue // float32 products of the decoded experts
			}
			t.Run(g.name+"/"+filepath.Base(path), func(t *testing.T) {
				checkGreedyStepsOn(t, r, gptossPrompt, tops[gi], golds[gi].greedy, g.tol)
			})
		}
	}
}

// TestGPTOSSHarmonyChat renders kvq generate --chat --system's prompt on
// GPT-OSS checkpoints (a Hugging Face directory and a GGUF file) whose
// chat template is the released harmony template, and checks it against
// Python Jinja2's rendering of the same conversation (pkg/chat's golden
// file; the date line is the template's strftime_now, so today's date),
// the template read from tokenizer_config.json, from chat_template.jinja
// (as the released directories hold it) and from the GGUF file.
func TestGPTOSSHarmonyChat(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "golden", "openai-gpt-oss-120b__system.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := gptossSpec
	s.ChatTemplate = string(tmpl)
	hf, gg := writeGPTOSS(t, s)
	// The released checkpoints keep the template in chat_template.jinja,
	// not in tokenizer_config.json.
	sep := filepath.Join(t.TempDir(), "separate")
	s.ChatTemplate = ""
	if err := modeltest.WriteGPTOSSHF(sep, s); err != nil {
		t.Fatal(err)
	}
	tc := filepath.Join(sep, "tokenizer_config.json")
	b, err := os.ReadFile(tc)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "chat_template")
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sep, "chat_template.jinja"), tmpl, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{hf, gg, sep} {
		m := load(t, path, runtime.LoadOptions{})
		before := time.Now().Format("2006-01-02")
		ids, text, err := m.ChatPrompt([]chat.Message{{Role: "system", Content: "You are a concise assistant."}, {Role: "user", Content: "What is 2+2?"}})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		after := time.Now().Format("2006-01-02")
		if want := strings.Replace(string(golden), "Current date: 2024-07-26", "Current date: "+before, 1); text != want {
			if want2 := strings.Replace(string(golden), "Current date: 2024-07-26", "Current date: "+after, 1); text != want2 {
				t.Errorf("%s: harmony prompt\n%q\nwant\n%q", m.Format, text, want)
			}
		}
		gen, err := m.GenerationPrompt("What is 2+2?", true, "You are a concise assistant.")
		if err != nil || !slices.Equal(gen, ids) {
			t.Errorf("%s: GenerationPrompt = %v, %v; ChatPrompt's tokens %v", m.Format, gen, err, ids)
		}
	}
}

// TestGPTOSSNeedsSinks checks that a backend without attention sinks, or
// without experts' biases and the clamped SwiGLU, is refused rather than
// run without them.
func TestGPTOSSNeedsSinks(t *testing.T) {
	_, gg := writeGPTOSS(t, gptossSpec)
	m := load(t, gg, runtime.LoadOptions{})
	cpuBe := cpu.New(1)
	type moeOnly struct {
		backend.Backend
		backend.MoE
	}
	type noExtras struct {
		backend.Backend
		backend.MoE
		backend.Sinks
	}
	for _, tc := range []struct {
		name string
		be   backend.Backend
		want string
	}{
		{"no sinks", moeOnly{cpuBe, cpuBe}, "attention sinks"},
		{"no expert extras", noExtras{cpuBe, cpuBe, cpuBe}, "clamped SwiGLU"},
	} {
		_, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: tc.be})
		if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewRunner error %v, want ErrUnsupported naming %q", tc.name, err, tc.want)
		}
	}
}

// TestGPTOSSBadConfig checks that a GPT-OSS config.json with bad
// layer_types or swiglu_limit is refused, naming the file and the field.
func TestGPTOSSBadConfig(t *testing.T) {
	for _, tc := range []struct {
		key  string
		val  any
		want string
	}{
		{"layer_types", []string{"sliding_attention"}, "layer_types has 1 entries"},
		{"layer_types", []string{"sliding_attention", "full_attention", "chunked_attention", "full_attention"}, `layer_types[2] is "chunked_attention"`},
		{"swiglu_limit", 0, "swiglu_limit"},
	} {
		hf, _ := writeGPTOSS(t, gptossSpec)
		p := filepath.Join(hf, "config.json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg[tc.key] = tc.val
		if b, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = runtime.Load(context.Background(), hf, runtime.LoadOptions{})
		if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s %v: error %v, want ErrModel naming config.json and %q", tc.key, tc.val, err, tc.want)
		}
	}
}

// TestGPTOSSYarnTruncate: a directory's rope_scaling truncate (false in
// the released GPT-OSS configs) reaches the RoPE frequencies, while a GGUF
// file is always truncated (llama.cpp has no such key): the two then
// differ in the pairs of the correction range only.
func TestGPTOSSYarnTruncate(t *testing.T) {
	s := gptossSpec
	s.NoTruncate = true
	hf, gg := writeGPTOSS(t, s)
	mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
	if mh.Scaling.Truncate || !mg.Scaling.Truncate {
		t.Fatalf("truncate: directory %v, GGUF %v; want false, true", mh.Scaling.Truncate, mg.Scaling.Truncate)
	}
	fh, fg := runtime.InvFreq(&mh.Config, nil), runtime.InvFreq(&mg.Config, nil)
	differ := 0
	for i := range fh {
		if fh[i] != fg[i] {
			differ++
		}
	}
	if differ == 0 || differ == len(fh) || fh[0] != fg[0] || fh[len(fh)-1] != fg[len(fg)-1] {
		t.Errorf("%d of %d frequencies differ between truncated and untruncated YaRN, want some in the middle only", differ, len(fh))
	}
}
