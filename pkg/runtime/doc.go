// Package runtime runs transformer checkpoints on the CPU (or, via the
// pkg/runtime/backend seam, on other backends) with a pluggable paged KV
// cache.
//
// Each architecture family is one definition, a Family (family.go; the
// Llama family, which runs Llama, Mistral, Qwen2 and Qwen3, in
// family_llama.go): the checkpoint architectures it runs, its tensor names,
// its attention and KV geometry per layer and its block, composed from the
// backend's ops. The loaders, the Runner and the callers never branch on the
// family (docs/model-layer.md).
//
// Every supported file format is loaded into one canonical Model: weights in
// their file dtype (F32, F16, BF16 or Q8_0, used in place from a memory map),
// a Config that fixes the architecture details (GQA, RoPE pairing and
// frequency scaling, norms, biases, tied output head), and a tokenizer.
//
// A Runner evaluates a Model over a batch of sequences against one
// kvcache.Cache: prefill (many tokens of one sequence), decode (one token of
// each of several sequences) or any mix. Several caches in different formats
// can be stepped over the same tokens with the same Runner, sharing weights.
// Compute is float32; results do not depend on the number of goroutines.
//
// A step stops soon after its context ends — within milliseconds on the CPU
// backend, whose matrix products and attention look at the context's Done
// channel between blocks of their work — and leaves every cache as it was.
package runtime
