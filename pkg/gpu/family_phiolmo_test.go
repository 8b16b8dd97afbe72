//go:build cuda || cudaemu

package gpu_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestPhiOlmoMatchesCPU runs tiny OLMo 2 and Phi-3 checkpoints (plain
// Phi-3 with a sliding window of 6; the Phi-4-mini shape: partial rotary,
// tied embeddings, LongRoPE, whose queries take a diagonal product per
// head) on the GPU backend and the CPU's, as one prefill of 16 tokens and
// then 8 decode steps: every logit within 0.02 of the CPU's (F32 weights,
// products in float32 on both) and the same argmax wherever the CPU's top
// two are 0.05 apart.
func TestPhiOlmoMatchesCPU(t *testing.T) {
	be := openGPU(t)
	for name, spec := range map[string]modeltest.Spec{
		"olmo2":     {Arch: "olmo2", Dim: 128, Hidden: 192, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, Seed: 38},
		"phi3":      {Arch: "phi3", Dim: 128, Hidden: 192, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, SlidingWindow: 6, Seed: 38},
		"phi4-mini": {Arch: "phi3", Dim: 128, Hidden: 192, Heads: 4, KVHeads: 2, HeadDim: 32, Context: 256, RopeDim: 24, Tied: true, OriginalContext: 32, Seed: 38},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := modeltest.WriteGGUF(path, spec); err != nil {
				t.Fatal(err)
			}
			m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cpu, err := runtime.NewRunner(m, runtime.RunnerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cpu.Close()
			dev, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: be})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			toks := make([]int, 24)
			for i := range toks {
				toks[i] = (i*37 + 11) % m.Vocab
			}
			// The logits of a 16-token prefill, then of 8 decode steps
			// (the text fed one token at a time).
			run := func(r *runtime.Runner) [][]float32 {
				return append(logits(t, r, toks[:16], 16), logits(t, r, toks, 1)[16:]...)
			}
			a, b := run(cpu), run(dev)
			for i := range a {
				worst := 0.0
				for j := range a[i] {
					worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
				}
				if worst > 0.02 {
					t.Errorf("row %d: GPU logits differ from the CPU's by up to %.3g", i, worst)
				}
				ca, cb := argmax(a[i]), argmax(b[i])
				second := float32(math.Inf(-1))
				for j, v := range a[i] {
					if j != ca {
						second = max(second, v)
					}
				}
				if ca != cb && a[i][ca]-second > 0.05 {
					t.Errorf("row %d: GPU argmax %d, CPU %d (margin %.3g)", i, cb, ca, a[i][ca]-second)
				}
			}
		})
	}
}
