package root

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestMoEModels runs kvq inspect, generate, eval, calibrate and bench on
// tiny Mixtral and Qwen3-MoE checkpoints (Hugging Face directory and GGUF
// file), and checks
// that kvq estimate --model DIR plans the bytes per token the runtime's
// cache allocates.
func TestMoEModels(t *testing.T) {
	for _, spec := range []modeltest.Spec{
		{Arch: "mixtral", Experts: 4, ExpertsUsed: 2, Seed: 3, Context: 2048},
		{Arch: "qwen3moe", Layers: 3, Experts: 6, ExpertsUsed: 2, ExpertHidden: 32, NormTopK: true, MLPOnly: []int{1}, Seed: 4, Context: 2048},
	} {
		t.Run(spec.Arch, func(t *testing.T) {
			dir := t.TempDir()
			hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
			if err := modeltest.WriteHF(hf, spec, modeltest.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := modeltest.WriteGGUF(gg, spec); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{hf, gg} {
				code, out, stderr := run(t, "inspect", "--model", path)
				if code != 0 || !strings.Contains(out, spec.Arch) || !strings.Contains(out, "2 per token") {
					t.Errorf("inspect %s: exit %d, output lacks %q:\n%s%s", path, code, spec.Arch, out, stderr)
				}
				code, _, stderr = run(t, "generate", "--model", path, "--prompt", "the cat", "-n", "4")
				if code != 0 || !strings.Contains(stderr, "generated 4") {
					t.Errorf("generate %s: exit %d: %s", path, code, stderr)
				}
			}
			code, out, stderr := run(t, "eval", "--model", hf, "-n", "2", "--contexts", "256", "--grid-contexts", "128,256", "--grid-depths", "2", "--grid-n", "1",
				"--ctx", "128", "--chunks", "2", "--no-speed", "--cache", "fp32,int4")
			if code != 0 || !strings.Contains(out, "Distribution against fp32") {
				t.Errorf("eval: exit %d:\n%s%s", code, out, stderr)
			}
			code, _, stderr = run(t, "calibrate", "--model", hf, "--samples", "2", "--seq-len", "32", "--out", filepath.Join(dir, "cal"))
			if code != 0 {
				t.Errorf("calibrate: exit %d: %s", code, stderr)
			}
			code, out, stderr = run(t, "bench", "--model", gg, "--cache", "fp16,int8", "--max-concurrency", "2", "--num-prompts", "2", "--depths", "none")
			if code != 0 || !strings.Contains(out, "Capacity and cost against fp16") {
				t.Errorf("bench: exit %d:\n%s%s", code, out, stderr)
			}
			checkEstimateBytes(t, hf)
		})
	}
}

// checkEstimateBytes: kvq estimate --model dir plans, for every format the
// runtime's caches hold, the bytes per token the allocator's layout holds.
func checkEstimateBytes(t *testing.T, dir string) {
	t.Helper()
	code, out, stderr := run(t, "estimate", "--model", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("estimate: exit %d: %s", code, stderr)
	}
	var rep struct {
		Formats []struct {
			Format        string  `json:"format"`
			BytesPerToken float64 `json:"bytes_per_token"`
		} `json:"formats"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("estimate JSON: %v\n%s", err, out)
	}
	m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	checked := 0
	for _, f := range rep.Formats {
		s, err := quant.Formats().ParseSpec(f.Format)
		if err != nil {
			continue // a format the runtime's caches do not hold
		}
		l, err := kvcache.NewLayout(m.Geometry(), s, 0)
		if err != nil {
			continue
		}
		if got := float64(l.BlockBytes) / float64(l.BlockTokens); got != f.BytesPerToken {
			t.Errorf("%s: estimate plans %v bytes per token, the allocator %v", f.Format, f.BytesPerToken, got)
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("no format of the estimate compared: %s", out)
	}
}
