package root

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
