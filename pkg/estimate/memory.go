package estimate

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Memory is the KV budget of one rank and how it was found.
type Memory struct {
	// Source is "kv-budget" (given directly), "vllm-profile" (vLLM's
	// start-up profiler, modelled), "sglang-static" (SGLang's
	// mem_fraction_static split) or "num-gpu-blocks-override" (the pool
	// size given, no budget).
	Source string `json:"source"`
	GPU    string `json:"gpu,omitempty"`
	// TotalBytes is the GPU memory the engine sees.
	TotalBytes int64 `json:"total_bytes,omitempty"`
	// Fraction is gpu_memory_utilization (vLLM) or mem_fraction_static
	// (SGLang).
	Fraction float64 `json:"fraction,omitempty"`
	// RequestedBytes is TotalBytes × Fraction.
	RequestedBytes int64 `json:"requested_bytes,omitempty"`
	// The non-KV reserves of one rank.
	WeightsBytes    int64 `json:"weights_bytes,omitempty"`
	ActivationBytes int64 `json:"activation_bytes,omitempty"`
	NonTorchBytes   int64 `json:"non_torch_bytes,omitempty"`
	CUDAGraphBytes  int64 `json:"cuda_graph_bytes,omitempty"`
	// KVBudgetBytes is what is left for the KV cache on one rank (vLLM's
	// "Available KV cache memory"); negative when the reserves exceed the
	// requested memory.
	KVBudgetBytes int64 `json:"kv_budget_bytes"`
}

// Default reserves, from 60 vLLM 0.19 start-up logs on one H100 at 8,192
// batched tokens (docs/estimate-rules.md §1.3).
const (
	DefaultUtilization         = 0.9
	DefaultMaxNumBatchedTokens = 8192
	DefaultBlockSize           = 16 // vLLM on CUDA
	DefaultSGLangPageSize      = 1
)

// gib converts a decimal GiB string to bytes exactly.
func gib(s string) int64 {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("estimate: bad GiB constant " + s)
	}
	r.Mul(r, new(big.Rat).SetInt64(GiB))
	b, err := ratFloor(r, s)
	if err != nil {
		panic(err)
	}
	return b
}

// DefaultActivationBytes is the torch activation peak vLLM's profiler finds,
// by model family: Llama and Mistral ≈ 1.9 GiB, Qwen ≈ 2.2, Gemma ≈ 3.8
// (large vocabularies), Granite ≈ 0.8, others 2.0. SGLang does not profile
// activations, so its default is 0.
func DefaultActivationBytes(e Engine, arch string) int64 {
	if e == SGLang {
		return 0
	}
	a := strings.ToLower(arch)
	switch {
	case strings.HasPrefix(a, "llama"), strings.HasPrefix(a, "mistral"), strings.HasPrefix(a, "mixtral"), strings.HasPrefix(a, "phi"):
		return gib("1.9")
	case strings.HasPrefix(a, "qwen"):
		return gib("2.2")
	case strings.HasPrefix(a, "gemma"):
		return gib("3.8")
	case strings.HasPrefix(a, "granite"):
		return gib("0.8")
	}
	return gib("2.0")
}

// DefaultNonTorchBytes is the memory outside PyTorch's allocator on one rank:
// ≈ 0.25 GiB alone, ≈ 2.1 GiB with tensor parallelism (NCCL buffers),
// ≈ 0.07 GiB with pipeline parallelism only.
func DefaultNonTorchBytes(tp, pp int) int64 {
	switch {
	case tp >= 2:
		return gib("2.1")
	case pp >= 2:
		return gib("0.07")
	}
	return gib("0.25")
}

// DefaultCUDAGraphBytes is the CUDA-graph pool vLLM 0.21 and later estimate
// and take from the KV budget (observed 0.5 to 1.9 GiB).
func DefaultCUDAGraphBytes() int64 { return gib("1.0") }

// DefaultMemFractionStatic is SGLang's 2025 default: round((total −
// reserved)/total, 3), with reserved by GPU size and p = tp·pp: under 35 GiB
// 2.8 + p/10, under 90 GiB 9.5 + p/2, under 160 GiB 12 + p/2, else 32.
func DefaultMemFractionStatic(total int64, tp, pp int) float64 {
	g := float64(total) / float64(GiB)
	p := float64(tp * pp)
	var reserved float64
	switch {
	case g < 35:
		reserved = 2.8 + p/10
	case g < 90:
		reserved = 9.5 + p/2
	case g < 160:
		reserved = 12 + p/2
	default:
		reserved = 32
	}
	f := math.Round((g-reserved)/g*1000) / 1000
	return max(f, 0.05)
}

// fractionOf returns ⌊n × f⌋ computed on f's shortest decimal form, so that
// 79.19 GiB × 0.95 is exact.
func fractionOf(n int64, f float64) (int64, error) {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'f', -1, 64))
	if !ok {
		return 0, fmt.Errorf("%w: fraction %v", ErrPlan, f)
	}
	r.Mul(r, new(big.Rat).SetInt64(n))
	return ratFloor(r, "memory")
}

// budget computes one rank's KV budget.
func (p *Plan) budget(m *Model, ru rules) (*Memory, error) {
	if p.KVBudget > 0 {
		return &Memory{Source: "kv-budget", KVBudgetBytes: p.KVBudget}, nil
	}
	if p.GPUMemory <= 0 {
		if p.BlocksOverride > 0 {
			// The pool size is given; the budget follows from it per format.
			return &Memory{Source: "num-gpu-blocks-override"}, nil
		}
		return nil, nil
	}
	mem := &Memory{GPU: p.GPUName, TotalBytes: p.GPUMemory}
	ranks := int64(p.TP * p.PP)
	weights := m.WeightsBytesTotal()
	if p.WeightsBytes != nil {
		weights = *p.WeightsBytes
	}
	mem.WeightsBytes = ceilDiv(weights, ranks)
	mem.ActivationBytes = DefaultActivationBytes(p.Engine, m.Arch)
	if p.ActivationBytes != nil {
		mem.ActivationBytes = *p.ActivationBytes
	}
	mem.NonTorchBytes = DefaultNonTorchBytes(p.TP, p.PP)
	if p.NonTorchBytes != nil {
		mem.NonTorchBytes = *p.NonTorchBytes
	}
	if ru.cudaGraphs {
		mem.CUDAGraphBytes = DefaultCUDAGraphBytes()
	}
	if p.CUDAGraphBytes != nil {
		mem.CUDAGraphBytes = *p.CUDAGraphBytes
	}
	if p.Engine == SGLang {
		mem.Source = "sglang-static"
		mem.Fraction = p.MemFractionStatic
		if mem.Fraction == 0 {
			mem.Fraction = DefaultMemFractionStatic(p.GPUMemory, p.TP, p.PP)
		}
	} else {
		mem.Source = "vllm-profile"
		mem.Fraction = p.Utilization
	}
	var err error
	if mem.RequestedBytes, err = fractionOf(p.GPUMemory, mem.Fraction); err != nil {
		return nil, err
	}
	var c checked
	reserved := c.add(c.add(mem.WeightsBytes, mem.ActivationBytes), c.add(mem.NonTorchBytes, mem.CUDAGraphBytes))
	if c.err != nil {
		return nil, c.err
	}
	mem.KVBudgetBytes = mem.RequestedBytes - reserved
	return mem, nil
}
