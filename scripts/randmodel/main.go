// Command randmodel writes a tiny random-weight checkpoint of one of the
// families kvq runs, with kvq's own writers (pkg/runtime/modeltest), as a
// Hugging Face directory, a GGUF file, or both: a model to try kvq's
// commands on, or to hand to another engine, without a download.
//
//	go run ./scripts/randmodel -arch gemma3 -hf gemma3-tiny
//	go run ./scripts/randmodel -arch gemma2 -gguf gemma2-tiny.gguf
//
// Architectures: llama, mistral, qwen2, qwen3, gemma2, gemma3. The shape
// flags default to a small model of the family's layout (Gemma 3: seven
// layers, five sliding with a window of 16, one global, one sliding;
// head_dim 64). The vocabulary is modeltest's 266-token byte-level one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

func main() {
	arch := flag.String("arch", "gemma3", "architecture: llama, mistral, qwen2, qwen3, gemma2 or gemma3")
	hf := flag.String("hf", "", "write a Hugging Face directory here")
	gg := flag.String("gguf", "", "write a GGUF file here")
	dtype := flag.String("dtype", "BF16", "weight type: F32, F16 or BF16 (GGUF also Q8_0)")
	dim := flag.Int("dim", 128, "hidden size")
	hidden := flag.Int("hidden", 256, "MLP intermediate size")
	layers := flag.Int("layers", 0, "layers (0: 7 for gemma3, 4 otherwise)")
	heads := flag.Int("heads", 4, "attention heads")
	kvHeads := flag.Int("kv-heads", 2, "KV heads")
	headDim := flag.Int("head-dim", 64, "head size")
	window := flag.Int("window", 16, "sliding window of the sliding layers (mistral, gemma2, gemma3)")
	context := flag.Int("context", 2048, "context length")
	seed := flag.Uint64("seed", 1, "weights' random seed")
	flag.Parse()
	usage := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "randmodel: "+format+"\n", args...)
		fmt.Fprintln(os.Stderr, "usage: randmodel -arch ARCH [-hf DIR] [-gguf FILE] [shape flags] (-h lists them)")
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		usage("unexpected argument %q", flag.Arg(0))
	}
	if *hf == "" && *gg == "" {
		usage("give -hf DIR, -gguf FILE or both")
	}
	switch *arch {
	case "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3":
	default:
		usage("-arch %q (valid: llama, mistral, qwen2, qwen3, gemma2, gemma3)", *arch)
	}
	n := *layers
	if n == 0 {
		n = 4
		if *arch == "gemma3" {
			n = 7
		}
	}
	s := modeltest.Spec{Arch: *arch, Dim: *dim, Hidden: *hidden, Layers: n, Heads: *heads, KVHeads: *kvHeads, HeadDim: *headDim,
		Context: *context, DType: *dtype, Seed: *seed}
	switch *arch {
	case "mistral", "gemma2", "gemma3":
		s.SlidingWindow = *window
	}
	if *arch == "gemma3" {
		s.RopeTheta, s.RopeScaling = 1e6, 8
	}
	if *hf != "" {
		if *dtype == "Q8_0" {
			usage("-dtype Q8_0 is for GGUF only")
		}
		if err := modeltest.WriteHF(*hf, s, modeltest.HFOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "randmodel:", err)
			os.Exit(1)
		}
	}
	if *gg != "" {
		if err := modeltest.WriteGGUF(*gg, s); err != nil {
			fmt.Fprintln(os.Stderr, "randmodel:", err)
			os.Exit(1)
		}
	}
}
