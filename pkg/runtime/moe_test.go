package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// moeSpecs are tiny mixture-of-experts checkpoints: Mixtral (4 experts,
// top-2) and Qwen3-MoE (6 experts, top-2, a dense first layer, and every
// other layer sparse).
func moeSpecs() map[string]modeltest.Spec {
	return map[string]modeltest.Spec{
		"mixtral":  {Arch: "mixtral", Experts: 4, ExpertsUsed: 2, Seed: 21, RouterScale: 4},
		"qwen3moe": {Arch: "qwen3moe", Layers: 4, Experts: 6, ExpertsUsed: 2, ExpertHidden: 32, NormTopK: true, MLPOnly: []int{0}, SparseStep: 1, Seed: 22, RouterScale: 4},
	}
}

// writeMoE writes spec as a Hugging Face directory and a GGUF file.
func writeMoE(t *testing.T, spec modeltest.Spec) (hf, gg string) {
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

// TestMoEFormatsAgree loads each MoE family from its Hugging Face
// directory and its GGUF file (llama.cpp's layout: Mixtral as "llama"
// with expert_count, the experts stacked in 3-D tensors) and checks the
// config and the logits agree.
func TestMoEFormatsAgree(t *testing.T) {
	ids := tokens(40, modeltest.Vocab(), 3)
	for arch, spec := range moeSpecs() {
		for _, dt := range []string{"F32", "BF16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				spec.DType = dt
				hf, gg := writeMoE(t, spec)
				mh, mg := load(t, hf, runtime.LoadOptions{}), load(t, gg, runtime.LoadOptions{})
				for _, m := range []*runtime.Model{mh, mg} {
					c := m.Config
					if c.Arch != arch || c.Experts != spec.Experts || c.ExpertsUsed != spec.ExpertsUsed {
						t.Errorf("%s: arch %q, %d of %d experts; want %q, %d of %d", m.Format, c.Arch, c.ExpertsUsed, c.Experts, arch, spec.ExpertsUsed, spec.Experts)
					}
					if !slices.Equal(c.DenseLayers, mh.DenseLayers) || c.Routing != mh.Routing {
						t.Errorf("%s: dense layers %v, routing %v; HF %v, %v", m.Format, c.DenseLayers, c.Routing, mh.DenseLayers, mh.Routing)
					}
				}
				if arch == "qwen3moe" && (!slices.Equal(mh.DenseLayers, []int{0}) || mh.Routing != backend.SoftmaxTopKNorm || mh.Layers[0].Gate == nil || mh.Layers[1].Router == nil) {
					t.Errorf("qwen3moe: dense layers %v, routing %v; want [0], normalised", mh.DenseLayers, mh.Routing)
				}
				if arch == "mixtral" && mh.Routing != backend.TopKSoftmax {
					t.Errorf("mixtral: routing %v", mh.Routing)
				}
				a, b := allLogits(t, mh, ids), allLogits(t, mg, ids)
				if d := maxRelDiff(b, a); d > 1e-5 {
					t.Errorf("GGUF vs HF logits differ by %.2g", d)
				}
			})
		}
	}
}

// TestMoEExpertsMapped checks that a GGUF file's experts are views of its
// stacked tensor, each expert's bytes right after the previous one's: no
// expert is copied or converted at load, so one that no token chooses is
// never read from the file.
func TestMoEExpertsMapped(t *testing.T) {
	spec := moeSpecs()["mixtral"]
	spec.DType = "F16"
	_, gg := writeMoE(t, spec)
	m := load(t, gg, runtime.LoadOptions{})
	for li, l := range m.Layers {
		for _, ws := range [][]*tensor.Weight{l.ExpGate, l.ExpUp, l.ExpDown} {
			if len(ws) != spec.Experts {
				t.Fatalf("layer %d: %d experts, want %d", li, len(ws), spec.Experts)
			}
			for e := 1; e < len(ws); e++ {
				prev, cur := ws[e-1].U16, ws[e].U16
				if unsafe.Pointer(unsafe.SliceData(cur)) != unsafe.Add(unsafe.Pointer(unsafe.SliceData(prev)), 2*len(prev)) {
					t.Errorf("layer %d: expert %d of %s is not the stacked tensor's next part", li, e, ws[e].Name)
				}
			}
		}
	}
}

// TestMoEOneExpertIsDense: a Mixtral layer with one expert, used by every
// token (weight softmax([x]) = 1), is the Llama MLP of that expert's
// weights: the grouped expert path gives the dense block's logits bit for
// bit.
func TestMoEOneExpertIsDense(t *testing.T) {
	hf, _ := writeMoE(t, modeltest.Spec{Arch: "mixtral", Experts: 1, ExpertsUsed: 1, Seed: 9})
	m := load(t, hf, runtime.LoadOptions{})
	d := &runtime.Model{Config: m.Config, Embed: m.Embed, Norm: m.Norm, Output: m.Output, Tokenizer: m.Tokenizer}
	d.Arch, d.Experts, d.ExpertsUsed, d.ExpertHidden = "llama", 0, 0, 0
	for _, l := range m.Layers {
		l.Gate, l.Up, l.Down = l.ExpGate[0], l.ExpUp[0], l.ExpDown[0]
		l.Router, l.ExpGate, l.ExpUp, l.ExpDown = nil, nil, nil, nil
		d.Layers = append(d.Layers, l)
	}
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	ids := tokens(37, modeltest.Vocab(), 2)
	a, b := allLogits(t, m, ids), allLogits(t, d, ids)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: one-expert Mixtral %v, dense Llama %v", i, a[i], b[i])
		}
	}
}

// TestMoEStepShapes: a prompt's logits are the same whether it runs as one
// prefill (experts' tokens grouped) or one token at a time, and, with
// BatchInvariant, a sequence's logits are bit-identical whether its step
// runs alone or beside others routed elsewhere.
func TestMoEStepShapes(t *testing.T) {
	ids := tokens(30, modeltest.Vocab(), 5)
	for arch, spec := range moeSpecs() {
		t.Run(arch, func(t *testing.T) {
			hf, _ := writeMoE(t, spec)
			m := load(t, hf, runtime.LoadOptions{})
			all := allLogits(t, m, ids)
			r := newRunner(t, m)
			c := newCache(t, r, "fp32", 8)
			_ = c.AddSeq(0)
			V := m.Vocab
			for i, id := range ids {
				got := forward(t, r, c, runtime.Entry{Seq: 0, Tokens: []int{id}})[0]
				if d := maxRelDiff(got, all[i*V:(i+1)*V]); d > 1e-5 {
					t.Fatalf("token %d: one at a time vs prefill differ by %.2g", i, d)
				}
			}

			inv, err := runtime.NewRunner(m, runtime.RunnerOptions{BatchInvariant: true})
			if err != nil {
				t.Fatal(err)
			}
			run := func(others bool) [][]float32 {
				c := newCache(t, inv, "fp32", 16)
				batch := []runtime.Entry{{Seq: 0, Tokens: ids[:11], Logits: runtime.AllLogits}}
				if others {
					batch = append(batch, runtime.Entry{Seq: 1, Tokens: ids[11:], Logits: runtime.AllLogits}, runtime.Entry{Seq: 2, Tokens: ids[20:21]})
				}
				for _, e := range batch {
					_ = c.AddSeq(e.Seq)
				}
				out := forward(t, inv, c, batch...)
				dec := []runtime.Entry{{Seq: 0, Tokens: ids[29:]}}
				if others {
					dec = append(dec, runtime.Entry{Seq: 1, Tokens: ids[3:4]}, runtime.Entry{Seq: 2, Tokens: ids[7:9]})
				}
				return [][]float32{out[0], forward(t, inv, c, dec...)[0]}
			}
			alone, beside := run(false), run(true)
			for s := range alone {
				if !slices.Equal(alone[s], beside[s]) {
					t.Errorf("step %d: sequence 0's logits differ beside other sequences (max rel %.2g)", s, maxRelDiff(beside[s], alone[s]))
				}
			}
		})
	}
}

// TestMoEConfig: Qwen3-MoE's norm_topk_prob picks the routing (absent
// means false, as transformers' default) and changes the logits;
// decoder_sparse_step and mlp_only_layers pick the dense layers; and a
// checkpoint whose experts disagree with the config is refused naming the
// tensor.
func TestMoEConfig(t *testing.T) {
	spec := moeSpecs()["qwen3moe"]
	hf, gg := writeMoE(t, spec)
	base := allLogits(t, load(t, hf, runtime.LoadOptions{}), tokens(9, modeltest.Vocab(), 1))
	for _, tc := range []struct {
		edit    map[string]any
		routing backend.Routing
		dense   []int
	}{
		{map[string]any{"norm_topk_prob": false}, backend.SoftmaxTopK, []int{0}},
		{map[string]any{"norm_topk_prob": nil}, backend.SoftmaxTopK, []int{0}},
		{map[string]any{"decoder_sparse_step": 2, "mlp_only_layers": []int{}}, backend.SoftmaxTopKNorm, []int{0, 2}},
	} {
		dir := filepath.Join(t.TempDir(), "m")
		if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		editJSON(t, filepath.Join(dir, "config.json"), tc.edit)
		m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
		if tc.dense[len(tc.dense)-1] == 2 {
			// Layer 2's experts are in the file; the config makes it dense,
			// and its dense MLP is missing.
			if err == nil || !strings.Contains(err.Error(), "model.layers.2.mlp.gate_proj.weight") {
				t.Errorf("%v: error %v, want the missing dense MLP of layer 2", tc.edit, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Routing != tc.routing || !slices.Equal(m.DenseLayers, tc.dense) {
			t.Errorf("%v: routing %v, dense layers %v; want %v, %v", tc.edit, m.Routing, m.DenseLayers, tc.routing, tc.dense)
		}
		if got := allLogits(t, m, tokens(9, modeltest.Vocab(), 1)); maxRelDiff(got, base) < 1e-3 {
			t.Errorf("%v: logits as with norm_topk_prob true", tc.edit)
		}
		m.Close()
	}
	// GGUF: expert_weights_norm false; a config with more experts than the file.
	mg := load(t, gg, runtime.LoadOptions{})
	if mg.Routing != backend.SoftmaxTopKNorm {
		t.Errorf("GGUF routing %v", mg.Routing)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	editJSON(t, filepath.Join(dir, "config.json"), map[string]any{"num_experts": 7})
	_, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "model.layers.1.mlp.experts.6.gate_proj.weight") {
		t.Errorf("7 experts in the config, 6 in the file: error %v", err)
	}
	// Counts refused before any tensor is read.
	for _, tc := range []struct {
		edit map[string]any
		is   error
		want string
	}{
		{map[string]any{"num_experts": 1 << 30}, runtime.ErrUnsupported, "1073741824 experts"},
		{map[string]any{"num_experts_per_tok": 9}, runtime.ErrModel, "9 experts per token of 6"},
		{map[string]any{"num_experts_per_tok": nil}, runtime.ErrModel, "0 experts per token of 6"},
	} {
		editJSON(t, filepath.Join(dir, "config.json"), map[string]any{"num_experts": 6, "num_experts_per_tok": 2})
		editJSON(t, filepath.Join(dir, "config.json"), tc.edit)
		_, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%v: error %v, want %v naming config.json and %q", tc.edit, err, tc.is, tc.want)
		}
	}
}

func editJSON(t *testing.T, path string, edit map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range edit {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = v
		}
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMixtralSlidingWindow: Mixtral's sliding_window (config.json, or
// llama.attention.sliding_window in GGUF) limits attention: with one
// layer, the logits at position p equal the last logits of a sequence of
// only the window's tokens.
func TestMixtralSlidingWindow(t *testing.T) {
	const w = 5
	hf, gg := writeMoE(t, modeltest.Spec{Arch: "mixtral", Layers: 1, SlidingWindow: w, Experts: 4, ExpertsUsed: 2, Seed: 12})
	ids := tokens(17, modeltest.Vocab(), 4)
	for _, path := range []string{hf, gg} {
		m := load(t, path, runtime.LoadOptions{})
		if m.SlidingWindow != w {
			t.Fatalf("%s: SlidingWindow = %d, want %d", m.Format, m.SlidingWindow, w)
		}
		all := allLogits(t, m, ids)
		V := m.Vocab
		for _, p := range []int{w, 11, 16} {
			win := ids[p-w+1 : p+1]
			last := allLogits(t, m, win)[(len(win)-1)*V:]
			if d := maxRelDiff(all[p*V:(p+1)*V], last); d > 1e-5 {
				t.Errorf("%s position %d: windowed logits differ from the window-only sequence by %.2g", m.Format, p, d)
			}
		}
	}
}

// TestMoEGGUFBadInput: a GGUF file whose expert counts disagree with its
// tensors, or are absurd, is refused in one line naming the key or the
// tensor, without allocating from the count.
func TestMoEGGUFBadInput(t *testing.T) {
	spec := moeSpecs()["qwen3moe"]
	_, gg := writeMoE(t, spec)
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	for _, tc := range []struct {
		set  map[string]gguf.Value
		keep func(string) bool
		is   error
		want []string
	}{
		{map[string]gguf.Value{"qwen3moe.expert_count": gguf.ValueOf(uint32(5))}, nil, runtime.ErrModel, []string{"blk.1.ffn_gate_exps.weight", "[64 32 5]"}},
		{map[string]gguf.Value{"qwen3moe.expert_count": gguf.ValueOf(uint32(1 << 31))}, nil, runtime.ErrUnsupported, []string{"2147483648 experts"}},
		{map[string]gguf.Value{"qwen3moe.expert_used_count": gguf.ValueOf(uint32(7))}, nil, runtime.ErrModel, []string{"7 experts per token of 6"}},
		{nil, func(n string) bool { return n != "blk.2.ffn_down_exps.weight" }, runtime.ErrModel, []string{"missing tensor blk.2.ffn_down_exps.weight"}},
	} {
		rewriteGGUF(t, gg, bad, tc.set, tc.keep)
		checkOneLine(t, loadBounded(t, bad, runtime.LoadOptions{}), tc.is, append(tc.want, bad)...)
	}
}
