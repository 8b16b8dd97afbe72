package root

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestBenchGPUBudget: --gpu-mem sizes the engine's pool as kvq estimate
// counts vLLM's KV budget on that GPU, to the byte; --gpu and --kv-budget
// together are a usage error.
func TestBenchGPUBudget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "estimate", "--model", dir, "--cache", "fp16", "--gpu-mem", "4GiB", "-o", "json")
	if code != 0 {
		t.Fatalf("estimate: exit %d: %s", code, stderr)
	}
	var est struct {
		Memory struct {
			KVBudget int64 `json:"kv_budget_bytes"`
		}
	}
	if err := json.Unmarshal([]byte(out), &est); err != nil || est.Memory.KVBudget <= 0 {
		t.Fatalf("estimate JSON: %v %s", err, out)
	}
	code, out, stderr = run(t, "bench", "--model", dir, "--cache", "fp16", "--gpu-mem", "4GiB", "--num-prompts", "2", "--input-len", "16", "--output-len", "4", "--depths", "none", "-o", "json")
	if code != 0 {
		t.Fatalf("bench --gpu-mem: exit %d: %s", code, stderr)
	}
	var b struct {
		Budget int64 `json:"kv_budget_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if b.Budget != est.Memory.KVBudget {
		t.Errorf("bench --gpu-mem 4GiB budget %d, estimate's %d", b.Budget, est.Memory.KVBudget)
	}
	for _, args := range [][]string{{"--gpu", "h100", "--kv-budget", "1GiB"}, {"--gpu", "h100", "--gpu-mem", "80GiB"}, {"--gpu", "nosuchgpu"}, {"--gpu-mem", "lots"}} {
		code, _, stderr := run(t, append([]string{"bench", "--model", dir}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--gpu") {
			t.Errorf("bench %v: exit %d, %q", args, code, stderr)
		}
	}
}
