package runtime_test

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// moeGolden are the tiny random-weight MoE checkpoints of llama.cpp's
// numbers in testdata/llamacpp/NAME.txt, each written by
// modeltest.WriteGGUF: the prompt moeGoldenPrompt (token ids, no BOS
// added), then 8 greedy steps; the files hold the top-5 logits of the
// prompt's last position and of each step, and the 9 argmax ids.
//
// Produced with llama.cpp 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (Sep
// 21 2025), CPU build, by a 60-line program over libllama outside this
// repository: llama_model_load_from_file (n_gpu_layers 0),
// llama_init_from_model (n_ctx 512, n_batch 512, 1 thread, flash
// attention off, type_k and type_v GGML_TYPE_F32), llama_decode of the
// prompt as one llama_batch_get_one, then one token at a time, reading
// llama_get_logits_ith(ctx, -1) after each decode.
var moeGolden = []struct {
	name string
	spec modeltest.Spec
}{
	{
		name: "mixtral",
		spec: modeltest.Spec{Arch: "mixtral", Dim: 128, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Experts: 4, ExpertsUsed: 2, RouterScale: 4, Seed: 31},
	},
	{
		name: "qwen3moe",
		spec: modeltest.Spec{Arch: "qwen3moe", Dim: 128, Hidden: 96, ExpertHidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Experts: 8, ExpertsUsed: 2, NormTopK: true, RouterScale: 4, Seed: 32},
	},
}

var moeGoldenPrompt = []int{264, 10, 100, 200, 33, 45, 120, 7, 99, 250, 12, 80}

// moeGoldenTol bounds |kvq − llama.cpp| of a logit: both compute in
// float32 with float32 caches, and differ only in summation order (SIMD
// blocks, the softmax's exp) and in where the routing weights are
// rounded: kvq lands within 2e-6 of every printed value (llama.cpp
// prints 6 decimals, ±5e-7), and the tolerance is 10× that. Every greedy margin of the golden
// numbers (top-1 − top-2) is above 10× the tolerance, so equal greedy
// tokens are a real check.
const moeGoldenTol = 2e-5

// TestMoEGoldenLlamaCpp reproduces llama.cpp's logits and greedy tokens
// on the tiny Mixtral and Qwen3-MoE checkpoints, from the GGUF file
// llama.cpp read and from the same weights as a Hugging Face directory.
func TestMoEGoldenLlamaCpp(t *testing.T) {
	for _, g := range moeGolden {
		gold := readGolden(t, g.name)
		top := gold.lastAndSteps(t, g.name)
		for i, row := range top {
			if m := row[0].logit - row[1].logit; m < 10*moeGoldenTol {
				t.Fatalf("%s step %d: golden margin %.2g is below 10× the tolerance", g.name, i, m)
			}
		}
		hf, gg := writeMoE(t, g.spec)
		for _, path := range []string{gg, hf} {
			m := load(t, path, runtime.LoadOptions{})
			t.Run(g.name+"/"+m.Format, func(t *testing.T) {
				checkGreedySteps(t, m, moeGoldenPrompt, top, gold.greedy, moeGoldenTol)
			})
		}
	}
}
