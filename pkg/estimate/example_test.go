package estimate_test

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
)

// The worked example of docs/estimate-rules.md §7: vLLM 0.19 on an H100 logged
// "Available KV cache memory: 58.11 GiB" and 29,751 blocks.
func ExampleEstimate() {
	m, _ := estimate.LookupModel("meta-llama/Llama-3.1-8B-Instruct")
	caches, _ := quant.Formats().ParseList("fp16")
	budget, _ := estimate.ParseBytes("58.11GiB")
	res, err := estimate.Estimate(context.Background(), estimate.Plan{
		Model: m, Caches: caches, KVBudget: budget, MaxModelLen: 8192,
		BlocksOverride: 29751, // the count that run logged
	})
	if err != nil {
		panic(err)
	}
	f := res.Formats[0]
	fmt.Printf("%s: %.0f bytes per token, blocks of %s\n", f.Format, f.BytesPerTokenPerRank, estimate.FormatBytes(f.BlockBytes))
	fmt.Printf("GPU KV cache size: %d tokens\n", *f.Tokens)
	fmt.Printf("Maximum concurrency for %d tokens per request: %.2fx\n", res.MaxModelLen, *f.MaxConcurrency)
	// Output:
	// fp16: 131072 bytes per token, blocks of 2.00 MiB
	// GPU KV cache size: 476016 tokens
	// Maximum concurrency for 8192 tokens per request: 58.11x
}

// Llama-2-7B at 10,000 tokens in fp16: the Hugging Face blog's "about 5 GB".
func ExampleKVBytes() {
	m, _ := estimate.LookupModel("llama-2-7b")
	spec, _ := quant.Formats().ParseSpec("fp16")
	b, err := estimate.KVBytes(m, spec, 10000, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes = %.2f GB = %s\n", b, float64(b)/1e9, estimate.FormatBytes(b))
	// Output: 5242880000 bytes = 5.24 GB = 4.88 GiB
}

func ExampleLookupModel() {
	_, err := estimate.LookupModel("lama-3.1-8b")
	fmt.Println(err)
	// Output: estimate: unknown model "lama-3.1-8b" (did you mean llama-3.1-8b?)
}
