package root

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestGemmaCommands runs the product on a Gemma-3-shaped random checkpoint
// (seven layers, five sliding, one global, one sliding): inspect names the
// sliding layers; generate decodes; eval compares fp16, fp8 and int4 with
// the sliding layers exempted (sliding=fp16) and not, the exemption
// costing what the layout says; calibrate marks the sliding layers; bench
// serves requests; estimate --model DIR gives eval's bytes per token; a
// sliding= spec on a model without sliding layers is a usage error.
func TestGemmaCommands(t *testing.T) {
	dir := t.TempDir()
	g3 := filepath.Join(dir, "g3")
	spec := modeltest.Spec{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 7, Heads: 4, KVHeads: 2, HeadDim: 32, SlidingWindow: 16,
		RopeTheta: 1e6, RopeScaling: 8, DType: "BF16", Seed: 3}
	if err := modeltest.WriteHF(g3, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(t, args...)
		if code != 0 {
			t.Fatalf("kvq %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}

	var info struct {
		Arch          string  `json:"architecture"`
		SlidingWindow int     `json:"sliding_window"`
		SlidingLayers []int   `json:"sliding_layers"`
		LocalTheta    float64 `json:"rope_local_theta"`
	}
	if err := json.Unmarshal([]byte(must("inspect", "--model", g3, "--output", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Arch != "gemma3" || info.SlidingWindow != 16 || len(info.SlidingLayers) != 6 || info.SlidingLayers[5] != 6 || info.LocalTheta != 10000 {
		t.Errorf("inspect: %+v", info)
	}
	if out := must("inspect", "--model", g3); !strings.Contains(out, "16 (6 of 7 layers: 0-4, 6)") {
		t.Errorf("inspect table does not list the sliding layers:\n%s", out)
	}

	if code, out, errOut := run(t, "generate", "--model", g3, "--prompt", "the", "-n", "6", "--cache", "int4,sliding=fp16"); code != 0 || out == "" || !strings.Contains(errOut, "generated 6") {
		t.Errorf("generate: exit %d\n%s%s", code, out, errOut)
	}

	var rep struct {
		Model struct {
			SlidingLayers []int `json:"sliding_layers"`
		} `json:"model"`
		Caches []struct {
			Spec          string  `json:"spec"`
			BytesPerToken float64 `json:"bytes_per_token"`
		} `json:"caches"`
	}
	out := must("eval", "--model", g3, "--cache", "fp16,fp8,sliding=fp16,int4,sliding=fp16,int4", "--tasks", "none", "--no-speed", "--chunks", "2", "--output", "json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("eval JSON: %v\n%s", err, out)
	}
	if len(rep.Model.SlidingLayers) != 6 {
		t.Errorf("eval model sliding layers %v", rep.Model.SlidingLayers)
	}
	bpt := map[string]float64{}
	for _, c := range rep.Caches {
		bpt[c.Spec] = c.BytesPerToken
	}
	// Per layer and token: fp16 2·2·32·2 = 256 bytes, fp8 128; the
	// int4 layout's bytes come from kvq formats' accounting.
	if bpt["fp16"] != 7*256 || bpt["fp8,sliding=fp16"] != 6*256+128 {
		t.Errorf("eval bytes per token: %v", bpt)
	}
	if i4, ex := bpt["int4"], bpt["int4,sliding=fp16"]; !(i4 > 0 && ex == 6*256+i4/7) {
		t.Errorf("int4 %v bytes per token, int4,sliding=fp16 %v, want 6·256 + int4/7", i4, ex)
	}
	if out := must("eval", "--model", g3, "--cache", "fp16,int4,sliding=fp16", "--tasks", "none", "--no-speed", "--chunks", "1"); !strings.Contains(out, "7 layers (6 sliding, window 16)") {
		t.Errorf("eval does not say which layers slide:\n%s", out)
	}

	var est struct {
		Formats []struct {
			Name          string  `json:"format"`
			BytesPerToken float64 `json:"bytes_per_token"`
		} `json:"formats"`
	}
	out = must("estimate", "--model", g3, "--cache", "int4,sliding=fp16", "--output", "json")
	if err := json.Unmarshal([]byte(out), &est); err != nil {
		t.Fatalf("estimate JSON: %v\n%s", err, out)
	}
	found := false
	for _, f := range est.Formats {
		if f.Name == "int4,sliding=fp16" {
			found = true
			if f.BytesPerToken != bpt["int4,sliding=fp16"] {
				t.Errorf("estimate %v bytes per token, eval %v", f.BytesPerToken, bpt["int4,sliding=fp16"])
			}
		}
	}
	if !found {
		t.Errorf("estimate has no int4,sliding=fp16 row:\n%s", out)
	}

	// One accounting truth for window-only storage: inspect's and eval's
	// per-request figure (the engine's default 256-token chunks) is kvq
	// estimate's for one request of the context with
	// --max-num-batched-tokens 256 (no padding layers in this shape), and
	// below every layer keeping every position.
	var perReq struct {
		Context  int   `json:"context_length"`
		Bytes    int64 `json:"kv_bytes_per_request_fp16"`
		Full     int64 `json:"kv_bytes_per_request_fp16_full"`
		PerToken int64 `json:"kv_bytes_per_token_fp16"`
	}
	if err := json.Unmarshal([]byte(must("inspect", "--model", g3, "--output", "json")), &perReq); err != nil {
		t.Fatal(err)
	}
	var grid struct {
		Formats []struct {
			Grid []struct {
				Context int64 `json:"context"`
				KVBytes int64 `json:"kv_bytes"`
			} `json:"grid"`
		} `json:"formats"`
	}
	out = must("estimate", "--model", g3, "--cache", "fp16", "--max-num-batched-tokens", "256", "--context", strconv.Itoa(perReq.Context), "--output", "json")
	if err := json.Unmarshal([]byte(out), &grid); err != nil {
		t.Fatalf("estimate JSON: %v\n%s", err, out)
	}
	if len(grid.Formats) != 1 || len(grid.Formats[0].Grid) == 0 || grid.Formats[0].Grid[0].KVBytes != perReq.Bytes || perReq.Bytes <= 0 || perReq.Bytes >= perReq.Full ||
		perReq.Full != int64(perReq.Context)*perReq.PerToken {
		t.Errorf("inspect: one request of %d tokens holds %d B (%d B with every position kept); kvq estimate: %s", perReq.Context, perReq.Bytes, perReq.Full, out)
	}
	var ev struct {
		Caches []struct {
			Spec  string `json:"spec"`
			Bytes int64  `json:"context_bytes"`
		} `json:"caches"`
	}
	out = must("eval", "--model", g3, "--cache", "fp16", "--tasks", "none", "--no-speed", "--chunks", "1", "--output", "json")
	if err := json.Unmarshal([]byte(out), &ev); err != nil || len(ev.Caches) != 1 || ev.Caches[0].Bytes != perReq.Bytes {
		t.Errorf("eval's per-request bytes %+v (%v), inspect's %d", ev.Caches, err, perReq.Bytes)
	}

	if out := must("calibrate", "--model", g3, "--out", filepath.Join(dir, "cal"), "--samples", "4"); strings.Contains(out, "5 (sliding)") || !strings.Contains(out, "6 (sliding)") {
		t.Errorf("calibrate does not mark the sliding layers (only):\n%s", out)
	}

	must("bench", "--model", g3, "--cache", "fp16,int4,sliding=fp16", "--num-prompts", "4", "--input-len", "32", "--output-len", "8", "--depths", "none")

	llama := filepath.Join(dir, "llama")
	if err := modeltest.WriteHF(llama, modeltest.Spec{Arch: "llama", Seed: 1}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "eval", "--model", llama, "--cache", "fp16,int4,sliding=fp16", "--tasks", "none", "--no-speed", "--chunks", "1")
	if code != 2 || !strings.Contains(errOut, "sliding=: the model has no sliding-window layers") {
		t.Errorf("sliding= on llama: exit %d, %s", code, errOut)
	}
}
