package root

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestPhiOlmoCommands runs the product on tiny OLMo 2 and Phi-3
// checkpoints (Phi-3 with LongRoPE and partial rotary, as Phi-4-mini;
// and with a declared sliding window): inspect names the architecture,
// generate, eval (several formats, K≠V, a per-layer mix), calibrate and
// bench run, and kvq estimate --model DIR counts the bytes per token the
// runtime's cache allocates for the model.
func TestPhiOlmoCommands(t *testing.T) {
	for name, spec := range map[string]modeltest.Spec{
		"olmo2":     {Arch: "olmo2", DType: "BF16", Seed: 4, Context: 2048},
		"phi4-mini": {Arch: "phi3", DType: "BF16", Seed: 4, Context: 2048, OriginalContext: 512, RopeDim: 8, Tied: true},
		"phi3-swa":  {Arch: "phi3", DType: "BF16", Seed: 4, Context: 2048, SlidingWindow: 48},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := run(t, "inspect", "--model", dir, "-o", "json")
			if code != 0 {
				t.Fatalf("inspect: exit %d: %s", code, stderr)
			}
			var info struct {
				Arch       string `json:"architecture"`
				Window     int    `json:"sliding_window"`
				Scaling    string `json:"rope_scaling"`
				KVPerToken int64  `json:"kv_bytes_per_token_fp16"`
			}
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatal(err)
			}
			if info.Arch != spec.Arch || info.Window != spec.SlidingWindow || (spec.OriginalContext > 0) != strings.HasPrefix(info.Scaling, "longrope") {
				t.Errorf("inspect: %+v", info)
			}
			code, _, stderr = run(t, "generate", "--model", dir, "--prompt", "the", "--max-tokens", "5", "--chat")
			if code != 0 {
				t.Fatalf("generate: exit %d: %s", code, stderr)
			}
			code, out, stderr = run(t, "eval", "--model", dir, "-n", "2", "--contexts", "256", "--grid-contexts", "128,256", "--grid-depths", "2", "--grid-n", "1",
				"--ctx", "128", "--chunks", "2", "--no-speed", "--cache", "fp16,int4,k=int8,v=int4,int4,L0=fp16", "-o", "json")
			if code != 0 {
				t.Fatalf("eval: exit %d: %s", code, stderr)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatalf("eval JSON: %v", err)
			}
			work := t.TempDir()
			data := filepath.Join(work, "calib.jsonl")
			if err := os.WriteFile(data, []byte(`{"text": "the quick brown fox jumps over the lazy dog, again and again and again"}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr = run(t, "calibrate", "--model", dir, "--out", filepath.Join(work, "scales"), "--samples", "2", "--seq-len", "64", "--ctx", "64", "--chunks", "1", "-o", "json")
			if code != 0 {
				t.Fatalf("calibrate: exit %d: %s", code, stderr)
			}
			code, _, stderr = run(t, "bench", "--model", dir, "--cache", "fp16,int4", "--num-prompts", "4", "--input-len", "32", "--output-len", "4",
				"--max-concurrency", "2", "--depths", "0", "--depth-tokens", "2", "--depth-reps", "1", "--warmups", "0", "-o", "json")
			if code != 0 {
				t.Fatalf("bench: exit %d: %s", code, stderr)
			}

			// One accounting truth: estimate's bytes per token, and for
			// a model without a window the KV bytes of a 1000-token
			// sequence, are the runtime cache's, per format. (A sliding
			// window's cache is still held whole by the runtime: the
			// per-layer ring storage that makes it hold only the window,
			// and estimate count the same, comes with Gemma's layers.)
			code, out, stderr = run(t, "estimate", "--model", dir, "--gpu", "h100", "--cache", "fp16,int4", "--context", "1000", "-o", "json")
			if code != 0 {
				t.Fatalf("estimate: exit %d: %s", code, stderr)
			}
			var est struct {
				Formats []struct {
					Format        string  `json:"format"`
					BytesPerToken float64 `json:"bytes_per_token"`
					Grid          []struct {
						Blocks  int   `json:"blocks"`
						KVBytes int64 `json:"kv_bytes"`
					} `json:"grid"`
				} `json:"formats"`
			}
			if err := json.Unmarshal([]byte(out), &est); err != nil {
				t.Fatal(err)
			}
			m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if len(est.Formats) != 2 {
				t.Fatalf("estimate: %d formats", len(est.Formats))
			}
			for _, f := range est.Formats {
				s, err := quant.Formats().ParseSpec(f.Format)
				if err != nil {
					t.Fatal(err)
				}
				l, err := kvcache.NewLayout(m.Geometry(), s, 0)
				if err != nil {
					t.Fatal(err)
				}
				if per := float64(l.BlockBytes) / float64(l.BlockTokens); f.BytesPerToken != per {
					t.Errorf("%s: estimate %v bytes per token, the runtime's cache %v", f.Format, f.BytesPerToken, per)
				}
				if f.Format == "fp16" && f.BytesPerToken != float64(info.KVPerToken) {
					t.Errorf("fp16: estimate %v bytes per token, inspect %d", f.BytesPerToken, info.KVPerToken)
				}
				if spec.SlidingWindow > 0 {
					continue
				}
				if got := l.Bytes(l.BlocksFor(1000), 1).Total; len(f.Grid) != 1 || f.Grid[0].KVBytes != got {
					t.Errorf("%s: estimate %+v for 1000 tokens, the runtime's cache %d bytes", f.Format, f.Grid, got)
				}
			}
		})
	}
}
