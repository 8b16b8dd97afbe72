// Package train trains kvq-probe, the small model that kvq ships so that a
// fresh clone can evaluate and benchmark KV caches with no download. It is
// a pure-Go, CPU-only trainer: the forward pass over packed batches, hand
// written backward passes for every op, AdamW, checkpoints that resume
// bit-exactly, and an export to a Hugging Face directory that
// pkg/runtime loads (LlamaForCausalLM, F16 safetensors, byte-level
// tokenizer).
//
// It is internal: a maintainer tool behind `kvq probe train` and `make
// probe-model`, not part of kvq's library API.
//
// # Model
//
// Llama family: token embedding; per layer RMSNorm, q/k/v projections
// without bias, RoPE (theta 10000, Hugging Face's half-split "NeoX"
// pairing), causal attention with grouped KV heads, o projection and
// residual; RMSNorm, SwiGLU MLP (gate, up, down) and residual; a final
// RMSNorm and an output head. DefaultConfig: d_model 256, 4 query heads
// and 2 KV heads of 64, MLP 688, 4 layers, context 2048, RMS eps 1e-5:
// 3.04M parameters, 5.8 MiB exported.
//
// The output head is separate from the embedding (tie_word_embeddings
// false): it costs 67K parameters (2%), lets the input and output byte
// representations differ, and keeps the optimizer groups simple (the head
// is a linear layer with weight decay, the embedding is not).
//
// The tokenizer is bytes: byte b is token b (GPT-2's byte alphabet in
// tokenizer.json, no merges), then <|bos|> 256, <|eos|> 257 and <|pad|>
// 258, padded with unused specials to PaddedVocab = 264 rows, a multiple
// of 8 (see PaddedVocab).
//
// # Data and loss
//
// Each step draws documents from datasets.New(datasets.Train, seed(step))
// with the curriculum's byte budget (Generator.Sample: every task equally
// often, or Config.TaskMix's frequencies), until TokensPerStep input
// tokens are filled: BOS + example text + EOS per document. Documents are packed back
// to back without padding; attention never crosses a document boundary and
// positions restart at 0 in each, so training sees exactly what inference
// sees. The loss is the cross-entropy of every next token, weighted:
// story tokens 1, a task's prompt tokens PromptWeight (1), its answer
// tokens and final EOS AnswerWeight (4), normalised by the total weight of
// the step. The answers are where the long-context abilities show (the
// passkey, the value of a key, the copied text, the JSON fields, the
// refusal), and they are a few percent of the tokens.
//
// # Optimisation
//
// AdamW (β 0.9/0.95, eps 1e-8) with decoupled weight decay 0.1 on the
// linear layers and the output head only (not on norms or the embedding);
// a linear warm-up then a cosine decay to MinLR; clipping of the global
// gradient norm to Clip; a length curriculum that raises the longest
// document from CurriculumStart bytes to the full context over
// CurriculumSteps steps.
//
// # Numerics
//
// Master weights, activations, gradients and Adam moments are float32.
// Sums that span many terms or mix magnitudes use float64: the RMSNorm
// sums of squares and its backward dot products and weight gradients,
// softmax denominators, the loss, the gradient norm. The matrix products
// run on internal/simd's kernels (MatMulF32 for the linear layers and
// attention scores, AccumulateF32 for the attention-weighted sums and the
// K/V gradients). Attention keeps only each query's log-sum-exp and
// recomputes the probabilities in the backward pass, so memory grows
// linearly with context. The gradient tests (grad_test.go) check every op
// and the whole model against central differences of a float64 reference.
//
// # Determinism and concurrency
//
// Every operation is cut into tasks that depend only on the shapes (blocks
// of 128 tokens, chunks of 512 tokens for the weight gradients, one task
// per document and KV head for attention); each task writes only its own
// outputs in a fixed order, and cross-task sums (weight-gradient partials,
// norm-weight gradients, the loss, the gradient norm) are added in task
// order. A run is therefore bit-identical for a given seed whatever
// Config.Workers is and however goroutines are scheduled, on the same
// machine and kernel set (the assembly and pure-Go kernels round
// differently). A Model and Train's state are not safe for concurrent use.
//
// # Checkpoints
//
// Train writes dir/checkpoint.bin (config, step, weights and both Adam
// moments, CRC-32) atomically every CheckpointEvery steps, at the end, and
// when its context is cancelled (the step in progress is dropped). The
// data of step s depends only on (Seed, s), so no generator state is
// saved, and a resumed run reproduces the uninterrupted run bit for bit.
// The final model goes to dir/model, also atomically.
//
// # Speed
//
// On the 2-core Zen 4 development machine (AVX2 kernels, both cores free),
// one 8K-token step of DefaultConfig runs at about 6,450 tokens/s with
// 256-byte documents, 5,250 at 1K and 3,950 at 2K (BenchmarkTrainStep:
// 123, 114 and 101 GFLOP/s of products and attention, 60–70% of what
// MatMulF32 reaches on two cores, ~90 GFLOP/s each). About 55% of the time is in MatMulF32, 10–15% in the
// scalar exponentials of softmax and SwiGLU, 6% in AccumulateF32, 5% in
// transposes. See DefaultConfig for how Steps was sized from these.
//
// # Not done
//
// No GPU, no mixed precision, no dropout, no sequence-parallel attention
// for one very long document (a document is one task per KV head).
package train
