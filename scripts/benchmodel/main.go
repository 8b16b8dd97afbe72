// Command benchmodel writes a random-weight Llama GGUF of a benchmark
// shape with kvq's own GGUF writer, so that anyone can reproduce the
// README's side-by-side measurements against other engines on the same
// file:
//
//	go run ./scripts/benchmodel -shape 1b -o /tmp/bench-1b.gguf
//
// Shapes: 90m (dim 1024, 8 layers, 16 heads, 4 KV heads, FFN 2816,
// context 2048: kvq serve against llama-server), 1b (dim 2048, 16
// layers, 32 heads, 8 KV heads, FFN 8192, context 4096: decode and
// prefill speed) and tiny (dim 256, 2 layers, 4 heads, 2 KV heads, FFN
// 768, context 512: the weight-format checks of docs/weight-formats.md)
// and moe (Qwen3-MoE-like: dim 2048, 8 layers, 16 heads of 128, 4 KV
// heads, 16 experts of FFN 1024 with 4 used per token and norm_topk_prob,
// context 4096: 0.89B parameters of which 0.29B are active per token; MoE
// decode and prefill speed). The writer holds every weight as float32
// before encoding it, about 4 bytes a parameter (3.6 GB for moe): moe is
// the largest MoE shape that stays near 4 GiB, with GOMEMLIMIT=3GiB.
// The vocabulary is modeltest's 266-token byte-level one. Besides F16,
// BF16, F32 and Q8_0, -dtype takes the GGML block types kvq's writer
// quantizes (Q4_0, Q4_K, Q6_K, IQ4_XS, MXFP4, ...: every matrix in that
// type, as llama-quantize --pure writes them) and llama-quantize's Q4_K_M
// and Q5_K_M mixes (byte for byte as it makes them from the F32 file).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

func main() {
	shape := flag.String("shape", "1b", "model shape: 90m, 1b, tiny or moe")
	dtype := flag.String("dtype", "F16", "weight type: F16, BF16, F32, Q8_0 or a GGML block type such as Q4_K (norms stay F32, as llama.cpp writes them)")
	out := flag.String("o", "", "output .gguf path (required)")
	seed := flag.Uint64("seed", 1, "weights' random seed")
	flag.Parse()
	shapes := map[string]modeltest.Spec{
		"90m":  {Arch: "llama", Dim: 1024, Hidden: 2816, Layers: 8, Heads: 16, KVHeads: 4, HeadDim: 64, Context: 2048},
		"1b":   {Arch: "llama", Dim: 2048, Hidden: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Context: 4096},
		"tiny": {Arch: "llama", Dim: 256, Hidden: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 512},
		"moe": {Arch: "qwen3moe", Dim: 2048, Hidden: 6144, Layers: 8, Heads: 16, KVHeads: 4, HeadDim: 128, Context: 4096,
			Experts: 16, ExpertsUsed: 4, ExpertHidden: 1024, NormTopK: true},
	}
	s, ok := shapes[*shape]
	if !ok || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: benchmodel -shape 90m|1b|tiny|moe [-dtype F16|BF16|F32|Q8_0|Q4_K|...] -o FILE.gguf")
		os.Exit(2)
	}
	if !validDType(*dtype) {
		fmt.Fprintf(os.Stderr, "benchmodel: -dtype %q (valid: F16, BF16, F32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, Q4_K_M, Q5_K_M)\n", *dtype)
		os.Exit(2)
	}
	s.DType, s.Seed = *dtype, *seed
	if err := modeltest.WriteGGUF(*out, s); err != nil {
		fmt.Fprintln(os.Stderr, "benchmodel:", err)
		os.Exit(1)
	}
}

// validDType reports whether modeltest.WriteGGUF writes dtype.
func validDType(dtype string) bool {
	switch dtype {
	case "F16", "BF16", "F32", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "Q4_K_M", "Q5_K_M":
		return true
	}
	return false
}
