package runtime_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// writeHFAs writes a random llama checkpoint whose config.json names
// architecture arch.
func writeHFAs(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 1}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "LlamaForCausalLM", arch)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFamilyRegistry checks that the loaders recognise checkpoints through
// the model layer's registry: an unknown architecture is refused with the
// list of those kvq runs, a Qwen3 checkpoint needs the q/k norms its
// family marks optional, and a hand-made model of an unknown architecture
// does not prepare.
func TestFamilyRegistry(t *testing.T) {
	ctx := context.Background()
	_, err := runtime.Load(ctx, writeHFAs(t, "GemmaForCausalLM"), runtime.LoadOptions{})
	if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "kvq runs LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM") {
		t.Errorf("Gemma checkpoint: %v, want ErrUnsupported listing the four architectures", err)
	}
	_, err = runtime.Load(ctx, writeHFAs(t, "Qwen3ForCausalLM"), runtime.LoadOptions{})
	if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "missing tensor model.layers.0.self_attn.q_norm.weight") {
		t.Errorf("Qwen3 checkpoint without q/k norms: %v, want a missing q_norm", err)
	}
	m, err := runtime.Load(ctx, writeHFAs(t, "MistralForCausalLM"), runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.Arch != "mistral" {
		t.Errorf("Arch = %q, want mistral", m.Arch)
	}
	m.Arch = "gemma"
	if err := m.Prepare(); !errors.Is(err, runtime.ErrUnsupported) {
		t.Errorf("Prepare of an unknown architecture: %v, want ErrUnsupported", err)
	}
}

// TestFamilyPerLayerGeometry runs families that state their geometry per
// layer: a family whose every layer states a window and the model's RoPE
// is bit-identical to the Llama family with the config's sliding window; one
// whose second layer rotates by another RoPE base runs, differs, and
// refuses caches of pre-RoPE keys in layers of both tables (their
// re-rotation knows one table), not in the layers of one; one
// whose layers differ in KV heads is refused (caches hold one geometry).
func TestFamilyPerLayerGeometry(t *testing.T) {
	ctx := context.Background()
	newModel := func(arch string, window int) *runtime.Model {
		m, err := modeltest.RandomModel(runtime.Config{Arch: arch, Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
			Vocab: 97, ContextLen: 256, SlidingWindow: window}, tensor.F32, 7)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	run := func(m *runtime.Model) []float32 {
		r := newRunner(t, m)
		defer r.Close()
		c := newCache(t, r, "fp32", 8)
		if err := c.AddSeq(0); err != nil {
			t.Fatal(err)
		}
		out, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: tokens(40, m.Vocab, 3), Logits: runtime.AllLogits}})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	llama := runtime.LlamaFamily()
	windowed := llama
	windowed.Archs = []runtime.Arch{{Name: "test-window"}}
	windowed.Layer = func(c *runtime.Config, invFreq []float64, li int) runtime.LayerGeometry {
		g := llama.Layer(c, invFreq, li)
		g.Window = 8
		return g
	}
	twoBases := llama
	twoBases.Archs = []runtime.Arch{{Name: "test-bases"}}
	twoBases.Layer = func(c *runtime.Config, invFreq []float64, li int) runtime.LayerGeometry {
		g := llama.Layer(c, invFreq, li)
		if li%2 == 1 {
			g.InvFreq = make([]float64, len(invFreq))
			for i := range g.InvFreq {
				g.InvFreq[i] = 1 / math.Pow(1e6, float64(2*i)/float64(g.RopeDim))
			}
		}
		return g
	}
	badKV := llama
	badKV.Archs = []runtime.Arch{{Name: "test-kv"}}
	badKV.Layer = func(c *runtime.Config, invFreq []float64, li int) runtime.LayerGeometry {
		g := llama.Layer(c, invFreq, li)
		g.KVHeads = 1
		return g
	}
	for _, f := range []*runtime.Family{&windowed, &twoBases, &badKV} {
		defer runtime.AddFamily(f)()
	}

	want := run(newModel("llama", 8))
	if got := run(newModel("test-window", 0)); !slices.Equal(got, want) {
		t.Errorf("per-layer window 8: logits differ from the Llama family's with sliding window 8 (max rel diff %.2g)", maxRelDiff(got, want))
	}
	if got := run(newModel("test-window", 0)); slices.Equal(got, run(newModel("llama", 0))) {
		t.Error("per-layer window 8: logits equal those without a window (40 tokens)")
	}

	m := newModel("test-bases", 0)
	if got := run(m); slices.Equal(got, run(newModel("llama", 0))) {
		t.Error("a second RoPE base changes nothing")
	}
	r := newRunner(t, m)
	l, err := kvcache.NewLayout(m.Geometry(), mustSpec(t, "fp32"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Layers[0].K.PreRoPE = true
	l.Layers[1].K.PreRoPE = true
	if _, err := r.NewCache(l, kvcache.Options{Blocks: 4}); !errors.Is(err, kvcache.ErrGeometry) {
		t.Errorf("pre-RoPE cache over two RoPE tables: %v, want ErrGeometry", err)
	}
	// Pre-RoPE keys in the layers of one table only re-rotate with it.
	l.Layers[1].K.PreRoPE = false
	if _, err := r.NewCache(l, kvcache.Options{Blocks: 4}); err != nil {
		t.Errorf("pre-RoPE keys in layer 0 only (one table): %v", err)
	}

	if _, err := modeltest.RandomModel(runtime.Config{Arch: "test-kv", Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97}, tensor.F32, 7); !errors.Is(err, runtime.ErrUnsupported) {
		t.Errorf("layers of 1 KV head in a model of 2: %v, want ErrUnsupported", err)
	}
}
