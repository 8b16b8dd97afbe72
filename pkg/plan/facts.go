package plan

import (
	"fmt"
	"strings"
)

// Engines kvq plan knows.
const (
	EngineVLLM     = "vllm"
	EngineSGLang   = "sglang"
	EngineLlamaCpp = "llama.cpp"
	EngineTRTLLM   = "trt-llm"
)

// Engines lists them.
func Engines() []string { return []string{EngineVLLM, EngineSGLang, EngineLlamaCpp, EngineTRTLLM} }

// ParseEngine accepts the engines' names and common spellings.
func ParseEngine(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "vllm", "":
		return EngineVLLM, nil
	case "sglang":
		return EngineSGLang, nil
	case "llama.cpp", "llamacpp", "llama-cpp", "llama-server":
		return EngineLlamaCpp, nil
	case "trt-llm", "trtllm", "tensorrt-llm", "tensorrt_llm":
		return EngineTRTLLM, nil
	}
	return "", fmt.Errorf("%w: engine %q (valid: %s)", ErrOptions, s, strings.Join(Engines(), ", "))
}

// Status words of a fact.
const (
	Yes     = "yes"
	No      = "no"
	Partial = "partial"
	Unknown = "unknown"
)

// Fact is one compatibility statement with its source: a repository path
// at a commit, a documentation page, or an issue or pull request. Status
// Unknown means no source settles it. The sources were read for kvq in
// 2026 (docs/kv-compat.md keeps the research notes they come from).
type Fact struct {
	Topic  string `json:"topic"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
	Source string `json:"source,omitempty"`
}

// Format is one KV-cache format an engine offers.
type Format struct {
	Engine string `json:"engine"`
	// Name is the engine's own name for it (--kv-cache-dtype's value).
	Name string `json:"name"`
	// Class orders the rollout: 1 FP8, 2 INT8, 3 4-bit and below.
	Class int `json:"class"`
	// KVQ is the kvq cache spec that models its bytes (and, where kvq
	// implements the scheme, its quality); empty when kvq has none.
	KVQ string `json:"kvq_spec,omitempty"`
	// KVQNote says how kvq's model differs from the engine's format.
	KVQNote string `json:"kvq_note,omitempty"`
	// Enable is the engine invocation; {model} stands for the model.
	Enable string `json:"enable"`
	// Scales says where the format's scales come from.
	Scales string `json:"scales"`
	// MinCC is the least CUDA compute capability that runs it (0: any
	// the engine supports); NativeCC the least that computes on it in
	// hardware (0: not applicable).
	MinCC, NativeCC float64 `json:"-"`
	// MaxCC, when positive, is the largest compute capability known to
	// run it (formats confined to one generation).
	MaxCC float64 `json:"-"`
	// GPUNote explains the GPU requirement.
	GPUNote string `json:"gpu_note"`
	Facts   []Fact `json:"facts"`
}

// Common sources (see docs/kv-compat.md for the full list).
const (
	srcVLLMCacheDType = "vllm-project/vllm vllm/config/cache.py @002f10e0"
	srcVLLMBackends   = "vllm-project/vllm docs/design/attention_backends.md @00139433"
	srcVLLMQuantKV    = "vllm-project/vllm docs/features/quantization/quantized_kvcache.md @0609ba15"
	srcVLLMBlog       = "vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md @78672b0f"
	srcSGLangQuantKV  = "sgl-project/sglang docs/advanced_features/quantized_kv_cache.md @03cd2ec4"
	srcSGLangBackends = "sgl-project/sglang docs/advanced_features/attention_backend.md @0c078e6f"
	srcLlamaFA        = "ggml-org/llama.cpp ggml/src/ggml-cuda/fattn.cu @00a2d609"
	srcLlamaCtx       = "ggml-org/llama.cpp src/llama-context.cpp (quantized V requires flash attention)"
	srcTRTQuant       = "NVIDIA/TensorRT-LLM docs/source/features/quantization.md @09d4c79b"
	srcCUDAGPUs       = "developer.nvidia.com/cuda-gpus (compute capabilities)"
)

func unknown(topic string) Fact { return Fact{Topic: topic, Status: Unknown, Note: "no source found"} }

// EngineFormats returns the KV formats of an engine, in rollout order.
func EngineFormats(engine string) []Format {
	switch engine {
	case EngineVLLM:
		return vllmFormats()
	case EngineSGLang:
		return sglangFormats()
	case EngineLlamaCpp:
		return llamaFormats()
	case EngineTRTLLM:
		return trtFormats()
	}
	return nil
}

func vllmFormats() []Format {
	tp := Fact{Topic: "tensor parallel", Status: Partial, Note: "works; FA3 fp8 accuracy varied with TP size at very long context (open issue; a later FA3 accumulation fix is the likely cure, unverified)", Source: "vllm#23813, " + srcVLLMBlog}
	pp := unknown("pipeline parallel")
	prefix := Fact{Topic: "prefix caching", Status: Yes, Note: "V0's breakage fixed in 2024; no fp8 restriction in V1 found", Source: "vllm#7208"}
	swa := Fact{Topic: "sliding-window models", Status: Partial, Note: "runs; --kv-cache-dtype-skip-layers sliding_window recommended (small windows do not amortize fp8's cost)", Source: srcVLLMBlog + ", " + srcVLLMQuantKV}
	spec := Fact{Topic: "speculative decoding", Status: Partial, Note: "Eagle3 with an fp8 cache failed with a dtype mismatch until a 2025-09 fix", Source: "vllm#21177, vllm#24505"}
	chunked := Fact{Topic: "chunked prefill", Status: Yes, Note: "always on in V1; V0 broke with fp8, and the Triton path asserts on Ampere", Source: "vllm#4381, vllm#7714"}
	graphs := Fact{Topic: "CUDA graphs", Status: Yes, Note: "defaults used in vLLM's own fp8 benchmarks; DeepSeek-V3.2 disables fp8 by default", Source: srcVLLMBlog + ", vllm#27121"}
	lora := unknown("LoRA")
	common := []Fact{tp, pp, prefix, swa, spec, chunked, graphs, lora}
	with := func(extra ...Fact) []Fact { return append(append([]Fact(nil), extra...), common...) }
	return []Format{
		{Engine: EngineVLLM, Name: "fp8 (e4m3), calibrated per-tensor scales", Class: 1, KVQ: "fp8",
			KVQNote: "kvq runs the same codec (divide on write, multiply on read, saturating e4m3) with the calibrated scales",
			Enable:  "vllm serve {model} --kv-cache-dtype fp8   # a checkpoint with k_scale/v_scale and kv_cache_scheme (kvq calibrate --write-checkpoint)",
			Scales:  "checkpoint k_scale/v_scale (llm-compressor kv_cache_scheme strategy tensor); without them 1.0 and a warning",
			MinCC:   8.0, NativeCC: 8.9,
			GPUNote: "Hopper (9.x, FA3) and Blackwell compute in fp8; Ampere has no fp8 hardware: FA2 cannot read an fp8 cache, the Triton backend's e4m3 fails there (use fp8_e5m2), FlashInfer is the remaining path",
			Facts: with(Fact{Topic: "backends", Status: Partial, Note: "FA3 (9.x), FlashInfer, Triton, FA4 (10.x, 2026-05); not FA2", Source: srcVLLMBackends},
				Fact{Topic: "q_scale", Status: Partial, Note: "FA3 and FlashInfer-on-Blackwell quantize Q too; without q_scale vLLM uses k_scale", Source: srcVLLMQuantKV + ", vllm#14570, vllm#23647"},
				Fact{Topic: "Ampere with e4m3", Status: No, Note: "Triton: fp8e4nv not supported on arch < 89", Source: "vllm#26431, vllm#7714"})},
		{Engine: EngineVLLM, Name: "fp8 (e4m3), calibrated per-head scales", Class: 1, KVQ: "fp8:head",
			KVQNote: "kvq's per-head scales come from kvq calibrate --granularity head (fp8:scales@FILE)",
			Enable:  "vllm serve {model} --kv-cache-dtype fp8 --attention-backend FLASH_ATTN   # checkpoint scales of shape [num_kv_heads]",
			Scales:  "checkpoint k_scale/v_scale [num_kv_heads] (llm-compressor strategy attn_head)",
			MinCC:   9.0, NativeCC: 9.0, MaxCC: 9.9,
			GPUNote: "per-head scales only with the FLASH_ATTN (FA3) backend, Hopper",
			Facts:   with(Fact{Topic: "backends", Status: Partial, Note: "FLASH_ATTN (FA3) only", Source: srcVLLMQuantKV + ", vllm#30141"})},
		{Engine: EngineVLLM, Name: "fp8 (e4m3), scale 1.0", Class: 1, KVQ: "fp8",
			KVQNote: "kvq's fp8 with scale 1.0 (kvq eval --cache fp8)",
			Enable:  "vllm serve {model} --kv-cache-dtype fp8",
			Scales:  "none: 1.0 (vLLM warns); --calculate-kv-scales was deprecated in 2026-03 and removed in 2026-07",
			MinCC:   8.0, NativeCC: 8.9,
			GPUNote: "as calibrated fp8",
			Facts: with(Fact{Topic: "calculate_kv_scales", Status: No, Note: "computed scales were not applied until a 2025-10 fix; deprecated, then removed", Source: "vllm#27232, vllm#37201, vllm#49389"},
				Fact{Topic: "quality", Status: Partial, Note: "1.0 is fine while |K|, |V| stay within e4m3's range at scale 1 (kvq calibrate stats shows it); audit before relying on it", Source: srcVLLMQuantKV})},
		{Engine: EngineVLLM, Name: "fp8_e5m2", Class: 1, KVQ: "fp8-e5m2",
			KVQNote: "kvq's e5m2 codec, scale 1.0",
			Enable:  "vllm serve {model} --kv-cache-dtype fp8_e5m2",
			Scales:  "none (an fp8 checkpoint's scales with e5m2 is an error)",
			MinCC:   7.0,
			GPUNote: "the Ampere/Volta choice: Triton converts e5m2 on sm < 89 (derived, unverified on A100); CUDA 11.8+; not on ROCm",
			Facts:   with(Fact{Topic: "backends", Status: Partial, Note: "FA3, FlashInfer, Triton", Source: srcVLLMBackends})},
		{Engine: EngineVLLM, Name: "int8_per_token_head", Class: 2, KVQ: "int8:sym",
			KVQNote: "kvq's symmetric int8 per token and head; vLLM stores an fp32 scale (kvq models fp16: 2 B less per token and head)",
			Enable:  "vllm serve {model} --kv-cache-dtype int8_per_token_head --attention-backend TRITON_ATTN",
			Scales:  "dynamic, per token and head, computed at write time",
			GPUNote: "TRITON_ATTN only (any GPU)",
			Facts: with(Fact{Topic: "backends", Status: Partial, Note: "TRITON_ATTN only", Source: srcVLLMBackends + ", vllm#38378"},
				Fact{Topic: "hybrid models with prefix caching", Status: No, Note: "Gemma-4 corrupted under load", Source: "vllm#49716, vllm#50702, vllm#50749"})},
		{Engine: EngineVLLM, Name: "int4_per_token_head", Class: 3, KVQ: "int4:row:sym",
			KVQNote: "kvq's symmetric int4 per token and head (fp16 scale; vLLM's is fp32)",
			Enable:  "vllm serve {model} --kv-cache-dtype int4_per_token_head --attention-backend TRITON_ATTN",
			Scales:  "dynamic per token and head",
			GPUNote: "TRITON_ATTN only",
			Facts:   with(Fact{Topic: "availability", Status: Partial, Note: "in vLLM's CacheDType list; the merging pull request is unclear", Source: srcVLLMCacheDType})},
		{Engine: EngineVLLM, Name: "nvfp4", Class: 3, KVQ: "nvfp4",
			KVQNote: "kvq's nvfp4 codec: E2M1 with an E4M3 scale per 16 values (4.5 bits) under a per-tensor scale of 1.0 (vLLM's default; a checkpoint's k_scale/v_scale is not read)",
			Enable:  "vllm serve {model} --kv-cache-dtype nvfp4",
			Scales:  "fp8 block scales per 16 values plus a per-tensor scale",
			MinCC:   10.0, NativeCC: 10.0, MaxCC: 10.9,
			GPUNote: "Blackwell SM100 through FlashInfer trtllm-gen only",
			Facts:   with(Fact{Topic: "backends", Status: Partial, Note: "FLASHINFER trtllm-gen (SM100)", Source: "vllm#40177"})},
	}
}

func sglangFormats() []Format {
	common := []Fact{
		{Topic: "tensor parallel", Status: Yes, Note: "documented examples run --tp 8 with fp8_e4m3", Source: srcSGLangBackends},
		unknown("pipeline parallel"),
		{Topic: "prefix caching (radix)", Status: Unknown, Note: "no restriction documented for fp8/fp4"},
		{Topic: "sliding-window models", Status: Partial, Note: "per attention backend", Source: srcSGLangBackends},
		{Topic: "speculative decoding", Status: Partial, Note: "per attention backend", Source: srcSGLangBackends},
		unknown("chunked prefill"), unknown("CUDA graphs"), unknown("LoRA"),
	}
	with := func(extra ...Fact) []Fact { return append(append([]Fact(nil), extra...), common...) }
	return []Format{
		{Engine: EngineSGLang, Name: "fp8_e4m3", Class: 1, KVQ: "fp8",
			KVQNote: "kvq's e4m3 codec with the same per-tensor scales",
			Enable:  "python -m sglang.launch_server --model-path {model} --kv-cache-dtype fp8_e4m3",
			Scales:  "checkpoint k_scale/v_scale (per tensor only; compressed-tensors' kv_cache_scheme read since 2026-08), or --quantization-param-path FILE; missing: 1.0 with a warning",
			MinCC:   8.0, NativeCC: 8.9,
			GPUNote: "FlashInfer (default off Hopper) and FA3 (default on Hopper) read fp8; on A100 e4m3 ran at 0.4× e5m2's speed without tensor cores",
			Facts: with(Fact{Topic: "scales file", Status: No, Note: "--quantization-param-path scales were silently ignored in the write path", Source: "sglang#18818, sglang#20705"},
				Fact{Topic: "backends", Status: Partial, Note: "FlashInfer, FA3, TRTLLM MHA; not FA4, Torch native, FlexAttention; Triton disputed between doc versions", Source: srcSGLangBackends},
				Fact{Topic: "checkpoints without scales", Status: Partial, Note: "recipes dropped fp8 KV for FP8 checkpoints lacking KV scales", Source: "sglang#22671, sgl-cookbook#237"})},
		{Engine: EngineSGLang, Name: "fp8_e5m2", Class: 1, KVQ: "fp8-e5m2",
			KVQNote: "kvq's e5m2 codec",
			Enable:  "python -m sglang.launch_server --model-path {model} --kv-cache-dtype fp8_e5m2",
			Scales:  "none",
			MinCC:   8.0,
			GPUNote: "CUDA 11.8+; on A100 with FlashInfer +17.8% throughput in its introducing PR",
			Facts:   with(Fact{Topic: "backends", Status: Partial, Note: "FlashInfer, FA3, TRTLLM MHA", Source: srcSGLangBackends + ", sglang#1204"})},
		{Engine: EngineSGLang, Name: "int8 (--int8-kv-cache)", Class: 2, KVQ: "int8",
			KVQNote: "kvq's asymmetric int8 per token and head with fp16 scale and zero point, as SGLang's",
			Enable:  "python -m sglang.launch_server --model-path {model} --int8-kv-cache --kv-cache-dtype auto --attention-backend triton --page-size 1",
			Scales:  "dynamic per token and head (zp = (min+max)/2, scale = (max−min)/255)",
			GPUNote: "Triton backend (any GPU); MHA only",
			Facts: with(Fact{Topic: "availability", Status: Partial, Note: "documented; its pull request shows closed, merge path unverified", Source: srcSGLangQuantKV + ", sglang#22004"},
				Fact{Topic: "disaggregation, HiCache", Status: No, Source: srcSGLangQuantKV})},
		{Engine: EngineSGLang, Name: "fp4_e2m1", Class: 3, KVQ: "fp4_e2m1",
			KVQNote: "kvq's fp4_e2m1 codec: E2M1 with a power-of-two scale per 16 values, ties rounded up, as SGLang's KVFP4QuantizeUtil",
			Enable:  "python -m sglang.launch_server --model-path {model} --kv-cache-dtype fp4_e2m1",
			Scales:  "computed on the fly (16-value blocks, 8-bit exponent scale)",
			MinCC:   10.0, NativeCC: 10.0,
			GPUNote: "experimental; the backends that read it (FA4, TRTLLM) are Blackwell's",
			Facts:   with(Fact{Topic: "status", Status: Partial, Note: "experimental", Source: srcSGLangQuantKV})},
	}
}

func llamaFormats() []Format {
	common := []Fact{
		{Topic: "quantized V", Status: Partial, Note: "needs flash attention (-fa on); with -fa auto, FA is switched off when a layer lacks device support and start-up fails", Source: srcLlamaCtx},
		unknown("multi-GPU split"), unknown("prompt cache reuse"), unknown("sliding-window models"),
		{Topic: "speculative decoding", Status: Yes, Note: "the draft model has its own -ctkd/-ctvd", Source: "ggml-org/llama.cpp common/arg.cpp, llama.cpp#11200"},
	}
	with := func(extra ...Fact) []Fact { return append(append([]Fact(nil), extra...), common...) }
	return []Format{
		{Engine: EngineLlamaCpp, Name: "q8_0", Class: 2, KVQ: "q8_0",
			KVQNote: "kvq's q8_0 is ggml's block layout byte for byte",
			Enable:  "llama-server -m {model} -ctk q8_0 -ctv q8_0 -fa on",
			Scales:  "per 32-value block, in the cache",
			GPUNote: "default CUDA builds have flash-attention kernels for q8_0/q8_0; CPU and Metal run it",
			Facts:   with(Fact{Topic: "CUDA kernels", Status: Yes, Note: "q8_0/q8_0 and q8_0/q4_0 in default builds", Source: srcLlamaFA})},
		{Engine: EngineLlamaCpp, Name: "q4_0", Class: 3, KVQ: "q4_0",
			KVQNote: "ggml's q4_0 byte for byte",
			Enable:  "llama-server -m {model} -ctk q4_0 -ctv q4_0 -fa on",
			Scales:  "per 32-value block",
			GPUNote: "default CUDA builds have q4_0/q4_0 kernels",
			Facts:   with(Fact{Topic: "CUDA kernels", Status: Yes, Source: srcLlamaFA})},
		{Engine: EngineLlamaCpp, Name: "q5_1 (and q4_1, q5_0)", Class: 3, KVQ: "q5_1",
			KVQNote: "ggml's q5_1 byte for byte",
			Enable:  "llama-server -m {model} -ctk q5_1 -ctv q5_1 -fa on   # CUDA: a build with -DGGML_CUDA_FA_ALL_QUANTS=ON",
			Scales:  "per 32-value block",
			GPUNote: "CUDA needs GGML_CUDA_FA_ALL_QUANTS; otherwise flash attention falls back and a quantized V fails",
			Facts:   with(Fact{Topic: "CUDA kernels", Status: No, Note: "not in default builds", Source: srcLlamaFA})},
		{Engine: EngineLlamaCpp, Name: "iq4_nl", Class: 3, KVQ: "iq4_nl",
			KVQNote: "ggml's iq4_nl byte for byte",
			Enable:  "llama-server -m {model} -ctk iq4_nl -ctv iq4_nl -fa on",
			Scales:  "per 32-value block",
			GPUNote: "no CUDA flash-attention kernel at all: CPU (and other backends) only",
			Facts:   with(Fact{Topic: "CUDA kernels", Status: No, Source: srcLlamaFA})},
	}
}

func trtFormats() []Format {
	common := []Fact{unknown("tensor parallel"), unknown("pipeline parallel"), unknown("KV cache reuse"), unknown("speculative decoding"), unknown("LoRA")}
	with := func(extra ...Fact) []Fact { return append(append([]Fact(nil), extra...), common...) }
	return []Format{
		{Engine: EngineTRTLLM, Name: "fp8", Class: 1, KVQ: "fp8",
			KVQNote: "kvq's e4m3 codec with per-tensor scales",
			Enable:  "trtllm-serve {model} --kv_cache_dtype fp8   # or LLM(..., kv_cache_config=KvCacheConfig(dtype=\"fp8\"))",
			Scales:  "per tensor from the ModelOpt checkpoint (hf_quant_config.json kv_cache_quant_algo FP8)",
			MinCC:   8.0, NativeCC: 8.9,
			GPUNote: "FP8 KV documented on Ampere, Ada, Hopper and Blackwell",
			Facts:   with(Fact{Topic: "GPUs", Status: Yes, Note: "Ampere through Blackwell", Source: srcTRTQuant}, Fact{Topic: "trtllm-serve flag", Status: Yes, Note: "--kv_cache_dtype since 2026-03", Source: "TensorRT-LLM#11487"})},
		{Engine: EngineTRTLLM, Name: "int8 (TensorRT engine flow)", Class: 2, KVQ: "int8:sym",
			KVQNote: "kvq's int8 with a per-row scale approximates a per-tensor int8 scale's bytes; not its quality",
			Enable:  "python examples/quantization/quantize.py --model_dir {model} --kv_cache_dtype int8 ... then trtllm-build",
			Scales:  "per-tensor kv_cache_scaling_factor",
			GPUNote: "legacy TensorRT backend only; the PyTorch backend's KvCacheConfig takes auto, fp8 or nvfp4",
			Facts:   with(Fact{Topic: "PyTorch backend", Status: No, Source: "NVIDIA/Model-Optimizer#763"}, Fact{Topic: "quality", Status: Partial, Note: "merged K/V scales gave bad MMLU; per-tensor scales can lose accuracy", Source: "TensorRT-LLM#967, TensorRT-LLM#2309"})},
		{Engine: EngineTRTLLM, Name: "nvfp4", Class: 3, KVQ: "nvfp4",
			KVQNote: "kvq's nvfp4 codec with a per-tensor scale of 1.0; ModelOpt's calibrated tensor scale is not read",
			Enable:  "trtllm-serve {model} --kv_cache_dtype nvfp4   # after ModelOpt NVFP4 KV quantization",
			Scales:  "ModelOpt offline: fp8 block scale per 16 values + fp32 tensor scale",
			MinCC:   10.0, NativeCC: 10.0,
			GPUNote: "Blackwell (sm100/103 per a third-party mirror, unverified)",
			Facts:   with(Fact{Topic: "availability", Status: Partial, Note: "documented from 1.2.0rc6", Source: "nvidia.github.io/TensorRT-LLM/1.2.0rc6/features/quantization.html"})},
	}
}

// gpuCC maps the estimate GPU presets to CUDA compute capabilities (0 for
// AMD, whose fp8 is the fnuz variant).
var gpuCC = map[string]float64{
	"A100-40GB": 8.0, "A100-80GB": 8.0, "H100-80GB": 9.0, "H200": 9.0, "B200": 10.0, "L4": 8.9, "L40S": 8.9,
	"A10G": 8.6, "A10": 8.6, "RTX-4090": 8.9, "RTX-3090": 8.6, "T4": 7.5, "MI300X": 0,
}

// gpuFact says whether f runs on gpu, from the format's compute
// capability bounds.
func gpuFact(f Format, gpu string) Fact {
	fact := Fact{Topic: "GPU " + gpu, Note: f.GPUNote, Source: srcCUDAGPUs}
	cc, ok := gpuCC[gpu]
	switch {
	case gpu == "":
		fact.Topic, fact.Status = "GPU", Unknown
		fact.Note = "no --gpu given; " + f.GPUNote
	case !ok:
		fact.Status = Unknown
	case cc == 0:
		fact.Status = Unknown
		fact.Note = "ROCm: fp8 is the fnuz variant (max 240); " + f.GPUNote
	case f.MinCC > 0 && cc < f.MinCC, f.MaxCC > 0 && cc > f.MaxCC:
		fact.Status = No
		fact.Note = fmt.Sprintf("compute capability %.1f: %s", cc, f.GPUNote)
	case f.NativeCC > 0 && cc < f.NativeCC:
		fact.Status = Partial
		fact.Note = fmt.Sprintf("compute capability %.1f stores it without native compute: %s", cc, f.GPUNote)
	default:
		fact.Status = Yes
		fact.Note = fmt.Sprintf("compute capability %.1f: %s", cc, f.GPUNote)
	}
	return fact
}
