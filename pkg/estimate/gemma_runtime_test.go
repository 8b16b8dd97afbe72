package estimate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestGemmaBytesPerTokenMatchRuntime checks the one accounting truth on
// Gemma-shaped checkpoints: kvq estimate --model DIR finds the same
// sliding-window layers as the runtime's loader, and for every spec —
// sliding layers exempted or not, K and V apart — the bytes per token it
// prints are those of the cache the runtime allocates for the loaded
// model (both from kvcache.Layout over the same Geometry).
func TestGemmaBytesPerTokenMatchRuntime(t *testing.T) {
	for _, spec := range []modeltest.Spec{
		{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, RopeTheta: 1e6, RopeScaling: 8, DType: "BF16"},
		{Arch: "gemma2", Dim: 64, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, DType: "BF16"},
		{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 64, SlidingWindow: 16, SlidingPattern: 3, DType: "BF16"},
	} {
		for _, gguf := range []bool{false, true} {
			name := fmt.Sprintf("%s/pattern%d/gguf=%v", spec.Arch, spec.SlidingPattern, gguf)
			t.Run(name, func(t *testing.T) { checkGemmaAccounting(t, spec, gguf) })
		}
	}
}

// checkGemmaAccounting writes spec as a Hugging Face directory or a GGUF
// file and compares kvq estimate's reading of it with the runtime's.
func checkGemmaAccounting(t *testing.T, spec modeltest.Spec, gguf bool) {
	dir := filepath.Join(t.TempDir(), spec.Arch)
	var err error
	if gguf {
		dir += ".gguf"
		err = modeltest.WriteGGUF(dir, spec)
	} else {
		err = modeltest.WriteHF(dir, spec, modeltest.HFOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	em, err := estimate.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	g := rm.Geometry()
	sliding := 0
	for i := range spec.Layers {
		if (em.Window(i) > 0) != g.Sliding.Has(i) {
			t.Errorf("layer %d: estimate window %d, runtime sliding %v", i, em.Window(i), g.Sliding.Has(i))
		}
		if g.Sliding.Has(i) {
			sliding++
		}
	}
	if p := spec.SlidingPattern; p > 0 && (g.Sliding.Has(p-1) || !g.Sliding.Has(p)) {
		t.Errorf("sliding_window_pattern %d: layer %d slides %v, layer %d %v", p, p-1, g.Sliding.Has(p-1), p, g.Sliding.Has(p))
	}
	if sliding == 0 || sliding == spec.Layers {
		t.Fatalf("%d of %d layers slide: the test needs both kinds", sliding, spec.Layers)
	}
	r, err := runtime.NewRunner(rm, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, text := range []string{"fp16", "int4", "int4,sliding=fp16", "k=int8,v=int4,sliding=fp8", "q4_0,sliding=fp16,L-1=int8"} {
		s, err := quant.Formats().ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		res, err := estimate.Estimate(context.Background(), estimate.Plan{Model: em, Caches: []quant.Spec{s}, Contexts: []int64{64}, Concurrency: []int64{1}})
		if err != nil {
			t.Fatalf("%s: Estimate: %v", text, err)
		}
		l, err := kvcache.NewLayout(g, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.NewCache(l, kvcache.Options{Blocks: 4})
		if err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if got, want := res.Formats[0].BytesPerToken, float64(st.BlockBytes)/float64(st.BlockTokens); got != want {
			t.Errorf("%s: estimate %v bytes per token, the runtime's cache %v", text, got, want)
		}
	}
	// The exemption changes what a sliding layer costs.
	a, _ := quant.Formats().ParseSpec("int4")
	b, _ := quant.Formats().ParseSpec("int4,sliding=fp16")
	la, _ := kvcache.NewLayout(g, a, 0)
	lb, _ := kvcache.NewLayout(g, b, 0)
	if la.BlockBytes >= lb.BlockBytes {
		t.Errorf("int4 block %d bytes, int4,sliding=fp16 %d: the exemption did not apply", la.BlockBytes, lb.BlockBytes)
	}
}
