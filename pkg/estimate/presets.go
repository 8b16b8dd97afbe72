package estimate

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// modelPreset is a built-in model with the names it answers to.
type modelPreset struct {
	m       Model
	aliases []string
}

// dense is a shorthand for a preset's geometry.
func dense(name, arch string, layers, heads, kvHeads, headDim, hidden int, maxPos int64, dtype string, params float64, verified bool) Model {
	return Model{
		Name: name, Arch: arch, Source: "preset",
		Layers: layers, Heads: heads, KVHeads: kvHeads, HeadDim: headDim, Hidden: hidden,
		MaxPosition: maxPos, DType: dtype, Params: int64(math.Round(params * 1e9)), Verified: verified,
	}
}

func withWindows(m Model, ws []int) Model { m.Windows = ws; return m }

func withWeightBits(m Model, bits float64) Model { m.WeightBits = bits; return m }

func mla(m Model, loraRank, ropeDim int) Model {
	m.KVLoraRank, m.QKRopeHeadDim = loraRank, ropeDim
	return m
}

// modelPresets are the models of docs/estimate-rules.md §8 and the
// sliding-window examples of §4.2, with the KV-relevant fields of their
// config.json. Verified=false marks fields the rules list as "M" (from
// memory). Parameter counts are the rules' approximate totals.
func modelPresets() []modelPreset {
	const bf16, fp16 = "bfloat16", "float16"
	return []modelPreset{
		{dense("llama-2-7b", "llama", 32, 32, 32, 128, 4096, 4096, fp16, 6.74, true), []string{"llama2-7b"}},
		{dense("llama-2-13b", "llama", 40, 40, 40, 128, 5120, 4096, fp16, 13.0, true), []string{"llama2-13b"}},
		{dense("llama-2-70b", "llama", 80, 64, 8, 128, 8192, 4096, fp16, 69.0, true), []string{"llama2-70b"}},
		{dense("llama-3.1-8b", "llama", 32, 32, 8, 128, 4096, 131072, bf16, 8.03, true), []string{"llama3.1-8b", "llama-3-8b", "llama3-8b"}},
		{dense("llama-3.1-70b", "llama", 80, 64, 8, 128, 8192, 131072, bf16, 70.6, false), []string{"llama3.1-70b", "llama-3.3-70b", "llama3.3-70b", "llama-3-70b"}},
		{dense("llama-3.1-405b", "llama", 126, 128, 8, 128, 16384, 131072, bf16, 405.9, false), []string{"llama3.1-405b"}},
		{dense("llama-3.2-1b", "llama", 16, 32, 8, 64, 2048, 131072, bf16, 1.24, true), []string{"llama3.2-1b"}},
		{dense("llama-3.2-3b", "llama", 28, 24, 8, 128, 3072, 131072, bf16, 3.21, true), []string{"llama3.2-3b"}},
		{withWindows(dense("mistral-7b-v0.1", "mistral", 32, 32, 8, 128, 4096, 32768, bf16, 7.24, true), windowsAll(32, 4096)), nil},
		{dense("mistral-7b-v0.3", "mistral", 32, 32, 8, 128, 4096, 32768, bf16, 7.25, false), []string{"mistral-7b", "mistral-7b-v0.2"}},
		{dense("mixtral-8x7b-v0.1", "mixtral", 32, 32, 8, 128, 4096, 32768, bf16, 46.7, true), []string{"mixtral-8x7b"}},
		{dense("qwen2.5-0.5b", "qwen2", 24, 14, 2, 64, 896, 32768, bf16, 0.49, false), nil},
		{dense("qwen2.5-1.5b", "qwen2", 28, 12, 2, 128, 1536, 32768, bf16, 1.54, false), nil},
		{dense("qwen2.5-7b", "qwen2", 28, 28, 4, 128, 3584, 131072, bf16, 7.62, true), nil},
		{dense("qwen2.5-7b-instruct", "qwen2", 28, 28, 4, 128, 3584, 32768, bf16, 7.62, true), nil},
		{dense("qwen2.5-14b", "qwen2", 48, 40, 8, 128, 5120, 131072, bf16, 14.8, true), nil},
		{dense("qwen2.5-32b", "qwen2", 64, 40, 8, 128, 5120, 131072, bf16, 32.8, true), nil},
		{dense("qwen2.5-72b", "qwen2", 80, 64, 8, 128, 8192, 32768, bf16, 72.7, true), nil},
		{dense("qwen3-8b", "qwen3", 36, 32, 8, 128, 4096, 40960, bf16, 8.2, true), nil},
		{dense("qwen3-14b", "qwen3", 40, 40, 8, 128, 5120, 40960, bf16, 14.8, true), nil},
		{dense("qwen3-32b", "qwen3", 64, 64, 8, 128, 5120, 40960, bf16, 32.8, true), nil},
		{dense("qwen3-30b-a3b", "qwen3_moe", 48, 32, 4, 128, 2048, 40960, bf16, 30.5, true), nil},
		{dense("qwen3-235b-a22b", "qwen3_moe", 94, 64, 4, 128, 4096, 40960, bf16, 235.1, false), nil},
		// Gemma-2's config says float32; vLLM serves it in bf16.
		{withWindows(dense("gemma-2-9b", "gemma2", 42, 16, 8, 256, 3584, 8192, bf16, 9.24, true), windowsEvery(42, 4096, 2)), []string{"gemma2-9b"}},
		{withWindows(dense("gemma-2-27b", "gemma2", 46, 32, 16, 128, 4608, 8192, bf16, 27.2, false), windowsEvery(46, 4096, 2)), []string{"gemma2-27b"}},
		{withWindows(dense("gemma-3-12b", "gemma3", 48, 16, 8, 256, 3840, 131072, bf16, 12.2, false), windowsEvery(48, 1024, 6)), []string{"gemma3-12b"}},
		{withWindows(dense("gemma-3-27b", "gemma3", 62, 32, 16, 128, 5376, 131072, bf16, 27.4, true), windowsEvery(62, 1024, 6)), []string{"gemma3-27b"}},
		{withWindows(dense("phi-3-mini-4k", "phi3", 32, 32, 32, 96, 3072, 4096, bf16, 3.82, false), windowsAll(32, 2047)), []string{"phi3-mini-4k", "phi-3-mini"}},
		{dense("mistral-small-3.1-24b", "mistral", 40, 32, 8, 128, 5120, 131072, bf16, 24.0, false), []string{"mistral-small-3.1-24b-2503", "mistral-small-24b"}},
		// gpt-oss stores its experts in MXFP4: about 5.3 bits per parameter overall.
		{withWeightBits(withWindows(dense("gpt-oss-20b", "gpt_oss", 24, 64, 8, 64, 2880, 131072, bf16, 20.9, true), windowsEvery(24, 128, 2)), 5.3), nil},
		// DeepSeek-V3 ships FP8 weights; its KV cache is bf16 latents.
		{withWeightBits(mla(dense("deepseek-v3", "deepseek_v3", 61, 128, 128, 128, 7168, 163840, bf16, 671, true), 512, 64), 8), []string{"deepseek-r1", "deepseek-v3-0324"}},
		{mla(dense("deepseek-v2-lite", "deepseek_v2", 27, 16, 16, 128, 2048, 163840, bf16, 15.7, true), 512, 64), nil},
		{dense("smollm2-135m", "llama", 30, 9, 3, 64, 576, 8192, bf16, 0.135, true), nil},
		{dense("smollm2-360m", "llama", 32, 15, 5, 64, 960, 8192, bf16, 0.362, true), nil},
		{dense("smollm2-1.7b", "llama", 24, 32, 32, 64, 2048, 8192, bf16, 1.71, false), nil},
		{dense("tinyllama-1.1b", "llama", 22, 32, 4, 64, 2048, 2048, bf16, 1.10, true), []string{"tinyllama-1.1b-v1.0", "tinyllama"}},
	}
}

// Presets returns the built-in models, sorted by name.
func Presets() []Model {
	ps := modelPresets()
	out := make([]Model, len(ps))
	for i, p := range ps {
		out[i] = p.m
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UnknownNameError reports a preset name that matched nothing, with the
// nearest names. It wraps ErrUnknownModel or ErrUnknownGPU.
type UnknownNameError struct {
	Kind        error // ErrUnknownModel or ErrUnknownGPU
	Name        string
	Suggestions []string
}

func (e *UnknownNameError) Error() string {
	msg := fmt.Sprintf("%v %q", e.Kind, e.Name)
	if len(e.Suggestions) > 0 {
		msg += " (did you mean " + strings.Join(e.Suggestions, ", ") + "?)"
	}
	return msg
}

func (e *UnknownNameError) Unwrap() error { return e.Kind }

// normalizeName lower-cases a name and maps "_" and spaces to "-".
func normalizeName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("_", "-", " ", "-").Replace(s)
}

// hubVariants reduces a Hugging Face id to the names a preset may have:
// the organisation prefix goes, then "meta-", and the instruction-tuning
// suffixes ("-instruct", "-chat", "-it", "-hf", "-base").
func hubVariants(s string) []string {
	n := normalizeName(s)
	out := []string{n}
	if i := strings.LastIndex(n, "/"); i >= 0 {
		n = n[i+1:]
		out = append(out, n)
	}
	n = strings.TrimPrefix(n, "meta-")
	out = append(out, n)
	for _, suf := range []string{"-instruct", "-chat", "-hf", "-it", "-base"} {
		n = strings.Replace(n, suf, "", 1)
		out = append(out, n)
	}
	return out
}

// LookupModel finds a preset by name, alias or Hugging Face id,
// case-insensitively ("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct").
// An unknown name gives an *UnknownNameError with the nearest names.
func LookupModel(name string) (Model, error) {
	ps := modelPresets()
	index := map[string]int{}
	var all []string
	for i, p := range ps {
		index[p.m.Name] = i
		all = append(all, p.m.Name)
		for _, a := range p.aliases {
			index[a] = i
			all = append(all, a)
		}
	}
	for _, v := range hubVariants(name) {
		if i, ok := index[v]; ok {
			m := ps[i].m
			m.Windows = append([]int(nil), m.Windows...)
			if len(m.Windows) == 0 {
				m.Windows = nil
			}
			return m, nil
		}
	}
	var canon []string
	for _, s := range suggest(hubVariants(name), all, 3) {
		c := ps[index[s]].m.Name
		if !contains(canon, c) {
			canon = append(canon, c)
		}
	}
	return Model{}, &UnknownNameError{Kind: ErrUnknownModel, Name: name, Suggestions: canon}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// suggest returns up to n candidates close to any of the query variants:
// those within an edit distance of a third of the query's length (at least
// 2), nearest first, and failing that those that contain the query or are
// contained in it.
func suggest(queries, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	best := map[string]int{}
	for _, q := range queries {
		if q == "" {
			continue
		}
		limit := max(2, len(q)/3)
		for _, c := range candidates {
			d := editDistance(q, c)
			if d > limit && (strings.Contains(c, q) || strings.Contains(q, c)) && len(q) >= 3 {
				d = limit // a substring match counts as a distant near miss
			}
			if d <= limit {
				if old, ok := best[c]; !ok || d < old {
					best[c] = d
				}
			}
		}
	}
	var ss []scored
	for c, d := range best {
		ss = append(ss, scored{c, d})
	}
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].d != ss[j].d {
			return ss[i].d < ss[j].d
		}
		return ss[i].name < ss[j].name
	})
	var out []string
	for _, s := range ss {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
