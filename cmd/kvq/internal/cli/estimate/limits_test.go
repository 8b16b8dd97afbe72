package estimate

import (
	"strings"
	"testing"
)

// TestLimits: values the engine would refuse, or that name parts the model
// does not have, are usage errors naming the flag and the valid range.
func TestLimits(t *testing.T) {
	t.Setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")
	t.Setenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "")
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"zero tp", []string{"--tp", "0"}, 2, "--tp 0: must be ≥ 1"},
		{"zero gpus", []string{"--gpus", "0"}, 2, "--gpus 0: must be ≥ 1"},
		{"unknown vllm version", []string{"--vllm-version", "9.9"}, 2, `--vllm-version 9.9: estimate: bad plan: vLLM version "9.9" is not a release kvq knows the accounting of (valid: 0.1 to 0.21)`},
		{"vllm version too old", []string{"--vllm-version", "0.0.1"}, 2, "(valid: 0.1 to 0.21)"},
		{"newest vllm version", []string{"--vllm-version", "0.21.1"}, 0, ""},
		{"sglang ignores --vllm-version", []string{"--engine", "sglang", "--vllm-version", "9.9"}, 0, ""},
		{"max-model-len above the model's", []string{"--max-model-len", "1000000"}, 2,
			"--max-model-len 1000000 is greater than the model's maximum of 131072 (max_position_embeddings), which vLLM refuses: pass --allow-long-max-model-len (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"},
		{"max-model-len above the model's, sglang", []string{"--engine", "sglang", "--max-model-len", "200k"}, 2, "which SGLang refuses: pass --allow-long-max-model-len (or set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)"},
		{"max-model-len at the model's", []string{"--max-model-len", "128k"}, 0, ""},
		{"max-model-len allowed", []string{"--max-model-len", "1000000", "--allow-long-max-model-len"}, 0, ""},
		{"layer override past the model", []string{"--cache", "int4,L32=fp16"}, 2, "--cache: quant: bad cache spec \"int4,L32=fp16\": L32: the model has 32 layers (valid: L0 to L31, or L-32 to L-1)"},
		{"layer override in the model", []string{"--cache", "int4,L31=fp16,L-32=fp16"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-m", "llama-3.1-8b", "--gpu", "h100"}, tc.args...)
			code, out, stderr := run(t, false, args...)
			if code != tc.code || !strings.Contains(stderr, tc.err) {
				t.Errorf("kvq estimate %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), code, stderr, tc.code, tc.err)
			}
			if tc.code != 0 && out != "" {
				t.Errorf("kvq estimate %s printed %q before refusing", strings.Join(args, " "), out)
			}
		})
	}
}

// TestAllowLongMaxModelLenEnv: the engines' environment variables allow a
// long max_model_len as the flag does, each for its own engine.
func TestAllowLongMaxModelLenEnv(t *testing.T) {
	args := []string{"-m", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "1000000"}
	t.Setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
	t.Setenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "")
	if code, _, stderr := run(t, false, args...); code != 0 {
		t.Errorf("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: exit %d: %s", code, stderr)
	}
	if code, _, _ := run(t, false, append(args, "--engine", "sglang")...); code != 2 {
		t.Errorf("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 with --engine sglang: exit %d, want 2 (SGLang has its own variable)", code)
	}
	t.Setenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "true")
	if code, _, stderr := run(t, false, append(args, "--engine", "sglang")...); code != 0 {
		t.Errorf("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=true: exit %d: %s", code, stderr)
	}
	t.Setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")
	if code, _, _ := run(t, false, args...); code != 2 {
		t.Errorf("VLLM_ALLOW_LONG_MAX_MODEL_LEN=0: exit %d, want 2", code)
	}
}
