// Package estimate plans KV-cache memory for a model, a GPU, a parallel
// layout and a set of cache formats, the way the serving engines count it.
//
// Given a Plan (model geometry, GPU memory or a KV budget, tensor and pipeline
// parallel sizes, engine and version, cache formats) Estimate returns, per
// format, the bytes per token for the whole model and for one rank, the
// effective bits per stored value, the block size in bytes, the number of
// blocks and tokens the budget holds (vLLM's "GPU KV cache size: N tokens"),
// the maximum concurrency at max_model_len (vLLM's "Maximum concurrency for M
// tokens per request"), the largest context one request can have, and the KV
// memory of every requested context × concurrency.
//
// Byte costs are never computed here from a format's name: every figure comes
// from kvcache.NewLayout, the layout the runtime cache allocates, so kvq
// estimate and kvq's own cache agree byte for byte. This package adds the
// engine rules around it: max(1, kv_heads/tp) head replication, the pipeline
// layer split (and the minimum over ranks), MLA latents (one vector of
// kv_lora_rank+qk_rope_head_dim values per token and layer, no separate V),
// vLLM's hybrid grouping with padding for sliding-window models and its
// per-request worst case, block rounding, and the per-request fp16 windows
// (sink and residual tokens) of quantized formats, which are a constant per
// request and are reported apart from the per-token part.
//
// The memory model follows vLLM's start-up profiler (requested = total ×
// gpu_memory_utilization; KV = requested − weights − activation peak −
// non-torch memory, minus the CUDA-graph estimate from 0.21) or SGLang's
// static split (mem_fraction_static). The activation, non-torch and CUDA-graph
// reserves are documented defaults taken from public vLLM 0.19 logs; they are
// estimates and can be overridden, or the whole model can be skipped by giving
// the KV budget directly (what vLLM prints as "Available KV cache memory").
//
// Models come from built-in presets (Presets, LookupModel), from a Hugging
// Face config.json or model directory (LoadConfig, LoadDir) or from a GGUF
// header (LoadGGUF). GPUs come from GPUPresets and LookupGPU.
//
// What it does not do: it does not model recurrent (Mamba, linear attention)
// layers, chunked-local attention, DeepSeek-V3.2's indexer cache, SGLang's
// separate sliding-window pools, or memory taken by other processes.
//
// All integer arithmetic is checked: results that would overflow int64 are
// reported as errors wrapping ErrOverflow. The package holds no mutable state
// and its functions are safe for concurrent use.
package estimate
