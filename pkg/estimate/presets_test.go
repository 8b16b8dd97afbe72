package estimate

import (
	"errors"
	"testing"
)

// TestPresetKV checks every preset against docs/estimate-rules.md §8: the
// KV bytes per token at 16 bits for the whole model at TP1.
func TestPresetKV(t *testing.T) {
	want := map[string]int64{
		"llama-2-7b": 524288, "llama-2-13b": 819200, "llama-2-70b": 327680,
		"llama-3.1-8b": 131072, "llama-3.1-70b": 327680, "llama-3.1-405b": 516096,
		"llama-3.2-1b": 32768, "llama-3.2-3b": 114688,
		"mistral-7b-v0.1": 131072, "mistral-7b-v0.3": 131072, "mixtral-8x7b-v0.1": 131072,
		"qwen2.5-0.5b": 12288, "qwen2.5-1.5b": 28672, "qwen2.5-7b": 57344, "qwen2.5-7b-instruct": 57344,
		"qwen2.5-14b": 196608, "qwen2.5-32b": 262144, "qwen2.5-72b": 327680,
		"qwen3-8b": 147456, "qwen3-14b": 163840, "qwen3-32b": 262144, "qwen3-30b-a3b": 98304, "qwen3-235b-a22b": 192512,
		"gemma-2-9b": 344064, "gemma-2-27b": 376832, "gemma-3-12b": 2 * 48 * 8 * 256 * 2, "gemma-3-27b": 507904,
		"phi-3-mini-4k": 393216, "mistral-small-3.1-24b": 163840, "gpt-oss-20b": 49152,
		"deepseek-v3": 70272, "deepseek-v2-lite": 31104,
		"smollm2-135m": 23040, "smollm2-360m": 40960, "smollm2-1.7b": 196608, "tinyllama-1.1b": 22528,
	}
	ps := Presets()
	if len(ps) != len(want) {
		t.Errorf("%d presets, want %d", len(ps), len(want))
	}
	for _, m := range ps {
		t.Run(m.Name, func(t *testing.T) {
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := m.ValuesPerToken() * 2; got != want[m.Name] {
				t.Errorf("KV B/token = %d, want %d", got, want[m.Name])
			}
		})
	}
	// Sliding layouts of §4.2.
	for name, layers := range map[string]int{"gemma-2-9b": 21, "gemma-2-27b": 23, "gemma-3-27b": 52, "gemma-3-12b": 40, "gpt-oss-20b": 12, "mistral-7b-v0.1": 32, "phi-3-mini-4k": 32, "mistral-7b-v0.3": 0, "qwen2.5-7b": 0} {
		m := preset(t, name)
		if n, _ := m.SlidingLayers(); n != layers {
			t.Errorf("%s: %d sliding layers, want %d", name, n, layers)
		}
	}
}

func TestLookupModel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"llama-3.1-8b", "llama-3.1-8b"},
		{"Llama-3.1-8B", "llama-3.1-8b"},
		{"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"},
		{"meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"},
		{"meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"},
		{"meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"},
		{"Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct"},
		{"Qwen/Qwen2.5-7B", "qwen2.5-7b"},
		{"google/gemma-2-9b-it", "gemma-2-9b"},
		{"mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b-v0.1"},
		{"microsoft/Phi-3-mini-4k-instruct", "phi-3-mini-4k"},
		{"deepseek-ai/DeepSeek-R1", "deepseek-v3"},
		{"TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"},
		{"HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m"},
		{"openai/gpt-oss-20b", "gpt-oss-20b"},
		{"mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-3.1-24b"},
		{"QWEN3_8B", "qwen3-8b"},
	} {
		m, err := LookupModel(tc.in)
		if err != nil || m.Name != tc.want {
			t.Errorf("LookupModel(%q) = %q, %v; want %q", tc.in, m.Name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want string // among the suggestions
	}{
		{"llama-3.1-7b", "llama-3.1-8b"},
		{"lama-3.1-8b", "llama-3.1-8b"},
		{"qwen2.5-8b", "qwen2.5-7b"},
		{"gemma2-9", "gemma-2-9b"},
		{"deepsek-v3", "deepseek-v3"},
		{"mixtral", "mixtral-8x7b-v0.1"},
	} {
		_, err := LookupModel(tc.in)
		var ue *UnknownNameError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("LookupModel(%q) error = %v, want *UnknownNameError", tc.in, err)
		}
		if !contains(ue.Suggestions, tc.want) {
			t.Errorf("LookupModel(%q) suggests %q, want %q among them", tc.in, ue.Suggestions, tc.want)
		}
	}
	if _, err := LookupModel("zzzzzzzzzzzzzzzzzzz"); err == nil || err.Error() != `estimate: unknown model "zzzzzzzzzzzzzzzzzzz"` {
		t.Errorf("LookupModel(nonsense) error = %v", err)
	}
	// Presets are copies: changing one does not change the table.
	a := preset(t, "gemma-2-9b")
	a.Windows[0] = 7
	if b := preset(t, "gemma-2-9b"); b.Windows[0] != 4096 {
		t.Errorf("preset windows changed through a returned copy")
	}
}

func TestLookupGPU(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		gib  string
	}{
		{"h100-80gb", "H100-80GB", "79.19"},
		{"H100", "H100-80GB", "79.19"},
		{"a100-40gb", "A100-40GB", "39.39"},
		{"A100-80GB", "A100-80GB", "79.15"},
		{"h200", "H200", "139.80"},
		{"l4", "L4", "22.03"},
		{"L40S", "L40S", "44.39"},
		{"a10g", "A10G", "22.06"},
		{"rtx4090", "RTX-4090", "23.64"},
		{"RTX-4090", "RTX-4090", "23.64"},
		{"mi300x", "MI300X", "191.98"},
		{"b200", "B200", "178.36"},
	} {
		g, err := LookupGPU(tc.in)
		if err != nil || g.Name != tc.name || g.MemoryGiB != tc.gib {
			t.Errorf("LookupGPU(%q) = %+v, %v; want %s with %s GiB", tc.in, g, err, tc.name, tc.gib)
		}
		if want := mustBytes(t, tc.gib+"GiB"); g.Memory != want {
			t.Errorf("LookupGPU(%q).Memory = %d, want %d", tc.in, g.Memory, want)
		}
	}
	_, err := LookupGPU("h10")
	var ue *UnknownNameError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownGPU) || !contains(ue.Suggestions, "H100-80GB") {
		t.Errorf("LookupGPU(h10) error = %v, want a suggestion of H100-80GB", err)
	}
	if n := len(GPUPresets()); n < 13 {
		t.Errorf("%d GPU presets, want the 13 of §9", n)
	}
}
