package estimate

import "math/big"

// GPU is a device as the serving engines see it.
type GPU struct {
	Name string `json:"name"`
	// Memory is the total the engines read from CUDA (torch.cuda.mem_get_info)
	// or, on ROCm, the HSA pool size: below nvidia-smi's MiB figure and well
	// below the marketing GB.
	Memory int64 `json:"memory_bytes"`
	// MemoryGiB is Memory as printed in engine logs ("79.19").
	MemoryGiB string `json:"memory_gib"`
	// Approximate marks totals the rules give as a range or from memory
	// (docs/estimate-rules.md §9 "M", B200).
	Approximate bool `json:"approximate,omitempty"`
}

type gpuPreset struct {
	name    string
	gib     string // engine-visible total, GiB, as logged
	approx  bool
	aliases []string
}

// gpuPresets are docs/estimate-rules.md §9. Where the rules give a range, the
// lower end is used, so that plans err on the side of fitting less.
func gpuPresets() []gpuPreset {
	return []gpuPreset{
		{"A100-40GB", "39.39", false, []string{"a100-sxm4-40gb", "a100-40g", "a100-40"}},
		{"A100-80GB", "79.15", false, []string{"a100", "a100-sxm4-80gb", "a100-pcie-80gb", "a100-80g", "a100-80"}},
		{"H100-80GB", "79.19", false, []string{"h100", "h100-sxm", "h100-sxm5", "h100-80gb-hbm3", "h100-80g", "h100-80"}},
		{"H200", "139.80", false, []string{"h200-141gb", "h200-sxm"}},
		{"B200", "178.36", true, []string{"b200-192gb"}},
		{"L4", "22.03", false, []string{"l4-24gb"}},
		{"L40S", "44.39", true, []string{"l40s-48gb"}},
		{"A10G", "22.06", false, []string{"a10g-24gb"}},
		{"A10", "22.18", false, []string{"a10-24gb"}},
		{"RTX-4090", "23.64", false, []string{"rtx4090", "4090", "geforce-rtx-4090"}},
		{"RTX-3090", "23.58", true, []string{"rtx3090", "3090", "geforce-rtx-3090"}},
		{"T4", "14.74", true, []string{"t4-16gb", "tesla-t4"}},
		{"MI300X", "191.98", false, []string{"mi300", "mi300x-192gb"}},
	}
}

func (p gpuPreset) gpu() GPU {
	r, _ := new(big.Rat).SetString(p.gib)
	r.Mul(r, new(big.Rat).SetInt64(GiB))
	b, _ := ratFloor(r, p.gib)
	return GPU{Name: p.name, Memory: b, MemoryGiB: p.gib, Approximate: p.approx}
}

// GPUPresets returns the built-in GPUs in table order.
func GPUPresets() []GPU {
	var out []GPU
	for _, p := range gpuPresets() {
		out = append(out, p.gpu())
	}
	return out
}

// LookupGPU finds a GPU preset by name or alias, case-insensitively
// ("h100-80gb", "H100", "rtx4090"). An unknown name gives an
// *UnknownNameError with the nearest names.
func LookupGPU(name string) (GPU, error) {
	n := normalizeName(name)
	var all []string
	owner := map[string]gpuPreset{}
	for _, p := range gpuPresets() {
		for _, a := range append([]string{normalizeName(p.name)}, p.aliases...) {
			owner[a] = p
			all = append(all, a)
		}
	}
	if p, ok := owner[n]; ok {
		return p.gpu(), nil
	}
	var names []string
	for _, s := range suggest([]string{n}, all, 3) {
		if !contains(names, owner[s].name) {
			names = append(names, owner[s].name)
		}
	}
	return GPU{}, &UnknownNameError{Kind: ErrUnknownGPU, Name: name, Suggestions: names}
}
