package root

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestKQuantFileBytes: on a Q4_K_M file (llama-quantize's mix, as
// scripts/benchmodel -shape tiny -dtype Q4_K_M writes it) kvq inspect lists
// the weight types and counts the matrices' packed bytes, and kvq estimate
// counts every tensor's packed bytes (the matrices and the f32 norms), not
// the parameters at 16 bits. The expected bytes come from ggml's block
// sizes (q4_K: 144 bytes per 256 values, q6_K: 210, f32: 4 per value),
// independently of pkg/gguf's size table.
func TestKQuantFileBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny-Q4_K_M.gguf")
	spec := modeltest.Spec{Arch: "llama", Dim: 256, Hidden: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 512, DType: "Q4_K_M", Seed: 1}
	if err := modeltest.WriteGGUF(path, spec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	perBlock := map[string][2]int64{"q4_K": {256, 144}, "q6_K": {256, 210}, "f32": {1, 4}}
	var all, matrices, params int64
	for _, ti := range f.Tensors {
		bs, ok := perBlock[ti.Type.String()]
		if !ok {
			t.Fatalf("%s: type %s, want q4_K, q6_K or f32 in this Q4_K_M file", ti.Name, ti.Type)
		}
		n := ti.NumElements()
		if n%bs[0] != 0 {
			t.Fatalf("%s: %d values, not whole %s blocks", ti.Name, n, ti.Type)
		}
		all += n / bs[0] * bs[1]
		if len(ti.Dims) == 2 {
			matrices += n / bs[0] * bs[1]
		}
		params += n
	}

	code, out, stderr := run(t, "inspect", "--model", path, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var info struct {
		Params      int64    `json:"params"`
		DTypes      []string `json:"dtypes"`
		WeightBytes int64    `json:"weight_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect JSON: %v\n%s", err, out)
	}
	if got := strings.Join(info.DTypes, ", "); got != "Q4_K, Q6_K" {
		t.Errorf("inspect weight dtypes %q, want %q", got, "Q4_K, Q6_K")
	}
	if info.Params != params {
		t.Errorf("inspect parameters %d, want %d", info.Params, params)
	}
	if info.WeightBytes != matrices {
		t.Errorf("inspect weight bytes %d, want the matrices' packed bytes %d", info.WeightBytes, matrices)
	}
	code, out, stderr = run(t, "inspect", "--model", path)
	if code != 0 || !strings.Contains(out, "Q4_K, Q6_K") {
		t.Errorf("inspect table: exit %d, no %q:\n%s%s", code, "Q4_K, Q6_K", out, stderr)
	}

	code, out, stderr = run(t, "estimate", "--model", path, "--output", "json")
	if code != 0 {
		t.Fatalf("estimate: exit %d: %s", code, stderr)
	}
	var est struct {
		Model struct {
			Params       int64 `json:"params"`
			WeightsBytes int64 `json:"weights_bytes"`
		} `json:"model"`
	}
	if err := json.Unmarshal([]byte(out), &est); err != nil {
		t.Fatalf("estimate JSON: %v\n%s", err, out)
	}
	if est.Model.WeightsBytes != all || est.Model.Params != params {
		t.Errorf("estimate: weights %d bytes, %d params; want the tensors' packed %d bytes, %d params", est.Model.WeightsBytes, est.Model.Params, all, params)
	}
	if all >= params*2 || all <= matrices {
		t.Errorf("packed bytes %d (matrices %d) for %d params: not a 4-to-6-bit file", all, matrices, params)
	}
}

// TestEvalF32Activations: on a Q4_K_M file kvq eval multiplies the
// K-quants with Q8_K activations by default, as llama.cpp does, and with
// --f32-activations with the float32 activations as they are: the report
// says which (config.activations "f32", absent by default), and without
// the activations' rounding a q8_0 cache's KLD falls to a fraction of the
// default's (pkg/eval's TestLlamaPerplexityQ4KM: 0.000043 against
// 0.000467 on this model), while the fp16 baseline's PPL moves by less
// than the activations' rounding explains (0.5%). With --endpoint the
// flag is an input error.
func TestEvalF32Activations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny-Q4_K_M.gguf")
	spec := modeltest.Spec{Arch: "llama", Dim: 256, Hidden: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Context: 512, DType: "Q4_K_M", Seed: 1}
	if err := modeltest.WriteGGUF(path, spec); err != nil {
		t.Fatal(err)
	}
	text := testutil.SharedFile(t, "models/stories260K/eval-stories.txt")
	type report struct {
		Config struct {
			Activations *string `json:"activations"`
		} `json:"config"`
		Text struct {
			Caches []struct {
				Cache string  `json:"cache"`
				PPL   float64 `json:"ppl"`
				KLD   struct {
					Mean float64 `json:"mean"`
				} `json:"kld"`
			} `json:"caches"`
		} `json:"text"`
	}
	eval := func(extra ...string) report {
		t.Helper()
		args := append([]string{"eval", "--model", path, "--text", text, "--ctx", "128", "--chunks", "8", "--cache", "fp16,q8_0", "--tasks", "none", "--no-speed", "-o", "json"}, extra...)
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", extra, code, stderr)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("eval JSON: %v\n%s", err, out)
		}
		if len(r.Text.Caches) != 2 {
			t.Fatalf("eval %v: %d caches in the text report, want 2", extra, len(r.Text.Caches))
		}
		return r
	}
	def, f32 := eval(), eval("--f32-activations")
	if def.Config.Activations != nil {
		t.Errorf("default report: config.activations %q, want it absent", *def.Config.Activations)
	}
	if f32.Config.Activations == nil || *f32.Config.Activations != "f32" {
		t.Errorf("--f32-activations report: config.activations %v, want \"f32\"", f32.Config.Activations)
	}
	dk, fk := def.Text.Caches[1].KLD.Mean, f32.Text.Caches[1].KLD.Mean
	if !(fk > 0 && fk < dk/3) {
		t.Errorf("q8_0 KLD %.6f with --f32-activations, %.6f by default: want a fraction of it", fk, dk)
	}
	if dp, fp := def.Text.Caches[0].PPL, f32.Text.Caches[0].PPL; dp == fp || math.Abs(dp/fp-1) > 0.005 {
		t.Errorf("fp16 PPL %.4f by default, %.4f with --f32-activations: want them different by less than 0.5%%", dp, fp)
	}
	code, _, stderr := run(t, "eval", "--endpoint", "a=http://127.0.0.1:1", "--endpoint", "b=http://127.0.0.1:2", "--model", path, "--f32-activations")
	if code != 2 || !strings.Contains(stderr, "--f32-activations") {
		t.Errorf("--f32-activations with --endpoint: exit %d, %s", code, stderr)
	}
}
