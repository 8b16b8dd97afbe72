package root

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestBadConfigRefused: a config.json that the loader refuses, kvq
// estimate refuses too (one check, pkg/hfconfig), and where the weights
// are present their shapes win over the config: both commands exit 2 with
// a message naming config.json and the field.
func TestBadConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  modeltest.Spec
		edit  map[string]any // nil value: delete the key
		want  []string       // in both messages
		wantE string         // in kvq estimate's message
	}{
		{"head_dim against the weights", modeltest.Spec{Dim: 256, Heads: 4, KVHeads: 2}, map[string]any{"head_dim": 60}, []string{"head_dim"},
			"model.layers.0.self_attn.q_proj.weight a shape of [240 256], but the weights have [256 256]"},
		{"heads do not divide hidden", modeltest.Spec{Dim: 256, Heads: 4, KVHeads: 1}, map[string]any{"num_attention_heads": 3, "head_dim": nil}, []string{"num_attention_heads = 3"}, "hidden_size = 256"},
		{"rope_theta 0", modeltest.Spec{}, map[string]any{"rope_theta": 0}, []string{"rope_theta = 0"}, ""},
		{"rope_theta -1", modeltest.Spec{}, map[string]any{"rope_theta": -1}, []string{"rope_theta = -1"}, ""},
		{"rope_theta NaN", modeltest.Spec{}, map[string]any{"rope_theta": "NaN"}, []string{`rope_theta = "NaN"`}, ""},
		{"rms_norm_eps -1", modeltest.Spec{}, map[string]any{"rms_norm_eps": -1}, []string{"rms_norm_eps = -1"}, ""},
		{"rope factor -4", modeltest.Spec{}, map[string]any{"rope_scaling": map[string]any{"rope_type": "linear", "factor": -4}}, []string{"rope_scaling.factor = -4"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			spec := tc.spec
			spec.Arch, spec.Seed = "llama", 5
			if err := modeltest.WriteHF(dir, spec, modeltest.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			editConfig(t, filepath.Join(dir, "config.json"), tc.edit)
			for _, args := range [][]string{
				{"estimate", "--model", dir, "--gpu", "h100"},
				{"inspect", "--model", dir},
			} {
				code, msg := runErr(t, args...)
				want := append([]string{"config.json"}, tc.want...)
				if args[0] == "estimate" && tc.wantE != "" {
					want = append(want, tc.wantE)
				}
				for _, w := range want {
					if !strings.Contains(msg, w) {
						t.Errorf("kvq %s: message lacks %q: %s", args[0], w, msg)
					}
				}
				if code != cmdutil.ExitUsage {
					t.Errorf("kvq %s: exit %d, want %d: %s", args[0], code, cmdutil.ExitUsage, msg)
				}
			}
		})
	}
}

// runErr runs kvq and returns its exit code and what it wrote to stderr.
func runErr(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, Version: "test"}
	code := Run(context.Background(), f, args)
	return code, errOut.String()
}

func editConfig(t *testing.T, path string, edit map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range edit {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = v
		}
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
