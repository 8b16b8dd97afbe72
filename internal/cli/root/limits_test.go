package root

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// tinyHF writes a 2-layer random Hugging Face model and returns its directory.
func tinyHF(t *testing.T, context int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 5, Context: context}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCacheLayerOverrides: a per-layer override naming a layer the model
// does not have is a usage error naming the flag and the valid range, in
// every command that takes --cache and knows the model, before any work.
func TestCacheLayerOverrides(t *testing.T) {
	dir := tinyHF(t, 512)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"generate", []string{"generate", "--model", dir, "--prompt", "the", "-n", "2", "--cache", "int4,L5=fp16"}, `--cache: quant: bad cache spec "int4,l5=fp16": L5: the model has 2 layers (valid: L0 to L1, or L-2 to L-1)`},
		{"generate compare", []string{"generate", "--model", dir, "--prompt", "the", "-n", "2", "--compare", "int8,L-3=fp16"}, "--compare: "},
		{"eval", []string{"eval", "--model", dir, "--cache", "fp16,int4,L2=fp16", "--no-text", "--tasks", "copy", "-n", "1", "--no-speed"}, "--cache: "},
		{"bench", []string{"bench", "--model", dir, "--cache", "fp16,int4,L0-2=fp16", "--num-prompts", "1", "--depths", "none"}, "L0-2: the model has 2 layers"},
		{"serve", []string{"serve", "--model", dir, "--cache", "int4,L7=fp16", "--port", "0"}, "L7: the model has 2 layers"},
		{"estimate", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--cache", "int4,L99=fp16"}, `--cache: quant: bad cache spec "int4,l99=fp16": L99: the model has 32 layers (valid: L0 to L31, or L-32 to L-1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("kvq %s printed %q before refusing", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestPlanLimits: kvq plan refuses what kvq estimate refuses.
func TestPlanLimits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "200000"}, "--max-model-len 200000 is greater than the model's maximum of 131072 (max_position_embeddings)"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "3.0"}, `--engine-version 3.0: estimate: bad plan: vLLM version "3.0" is not a release kvq knows the accounting of (valid: 0.1 to 0.21)`},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
