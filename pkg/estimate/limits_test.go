package estimate

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestMaxModelLenLimit: a max_model_len above the model's maximum is
// refused as vLLM refuses it, unless allowed; the maximum itself passes.
func TestMaxModelLenLimit(t *testing.T) {
	m := preset(t, "llama-3.1-8b")
	fp16 := specs(t, "fp16")
	if r := estimate(t, Plan{Model: m, Caches: fp16, MaxModelLen: 131072, KVBudget: GiB}); r.MaxModelLen != 131072 {
		t.Errorf("max_model_len = %d, want 131072", r.MaxModelLen)
	}
	_, err := Estimate(context.Background(), Plan{Model: m, Caches: fp16, MaxModelLen: 1 << 20, KVBudget: GiB})
	if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "max_model_len 1048576 is greater than the model's maximum of 131072") {
		t.Errorf("max_model_len 1M on a 128K model: %v, want ErrPlan naming both", err)
	}
	r := estimate(t, Plan{Model: m, Caches: fp16, MaxModelLen: 1 << 20, AllowLongMaxModelLen: true, KVBudget: 200 * GiB})
	if f := r.Formats[0]; r.MaxModelLen != 1<<20 || *f.MaxContext != 1<<20 {
		t.Errorf("allowed long max_model_len: max_model_len %d, max context %d; want 1048576 both", r.MaxModelLen, *f.MaxContext)
	}
}

// TestRopeScaledMaxModelLen: rope_scaling extends the derived maximum as
// vLLM derives it (factor × max_position_embeddings; YaRN from the
// original length), except for llama3-type scaling and Gemma-3.
func TestRopeScaledMaxModelLen(t *testing.T) {
	base := `"model_type": %q, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256, "max_position_embeddings": 32768`
	for _, tc := range []struct {
		name, arch, scaling string
		want                int64
	}{
		{"none", "qwen2", `null`, 32768},
		{"yarn", "qwen2", `{"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`, 131072},
		{"yarn from original", "qwen3", `{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}`, 32768},
		{"linear", "llama", `{"rope_type": "linear", "factor": 2.0}`, 65536},
		{"dynamic", "llama", `{"type": "dynamic", "factor": 2.0}`, 65536},
		{"llama3", "llama", `{"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1, "high_freq_factor": 4}`, 32768},
		{"longrope", "phi3", `{"type": "longrope", "short_factor": [1], "long_factor": [2]}`, 32768},
		{"gemma3", "gemma3_text", `{"rope_type": "linear", "factor": 8.0}`, 32768},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := "{" + strings.Replace(base, "%q", `"`+tc.arch+`"`, 1) + `, "rope_scaling": ` + tc.scaling + "}"
			m, err := ParseConfig([]byte(cfg))
			if err != nil {
				t.Fatalf("ParseConfig: %v\n%s", err, cfg)
			}
			if got := m.MaxModelLen(); got != tc.want {
				t.Errorf("MaxModelLen() = %d, want %d", got, tc.want)
			}
			r := estimate(t, Plan{Model: m, Caches: specs(t, "fp16"), KVBudget: GiB})
			if r.MaxModelLen != tc.want {
				t.Errorf("default max_model_len = %d, want %d", r.MaxModelLen, tc.want)
			}
		})
	}
	if _, err := ParseConfig([]byte(`{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "rope_scaling": {"type": "linear", "factor": "x"}}`)); !errors.Is(err, ErrConfig) {
		t.Errorf("rope_scaling.factor \"x\": %v, want ErrConfig", err)
	}
}

func TestCheckVLLMVersion(t *testing.T) {
	for _, ok := range []string{"0.1", "0.6.3", "0.19", "0.21", "0.21.4", "v0.10.1.post1"} {
		if _, err := CheckVLLMVersion(ok); err != nil {
			t.Errorf("CheckVLLMVersion(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"0.0.9", "0.22", "1.0", "9.9", "latest"} {
		if _, err := CheckVLLMVersion(bad); !errors.Is(err, ErrPlan) {
			t.Errorf("CheckVLLMVersion(%q) = %v, want ErrPlan", bad, err)
		}
	}
}
