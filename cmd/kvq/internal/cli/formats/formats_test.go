package formats

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &out}}
	cmd := NewCmd(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestFormatsJSON(t *testing.T) {
	out, err := run(t, "--head-dim", "128", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var infos []map[string]any
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	got := map[string]map[string]any{}
	for _, in := range infos {
		for _, k := range []string{"name", "bits_per_value", "bytes_per_token_per_head", "k_bits_per_value", "v_bits_per_value"} {
			if _, ok := in[k]; !ok {
				t.Fatalf("entry %v lacks %q", in, k)
			}
		}
		got[in["name"].(string)] = in
	}
	// Bytes per token per head at d=128, from docs/quant-schemes.md §10.
	for name, want := range map[string]float64{"fp16": 256, "int8": 132, "int4": 72, "kivi2": 48, "kivi4": 80, "turbo3": 50} {
		in, ok := got[name]
		if !ok {
			t.Errorf("format %s missing", name)
			continue
		}
		if b := in["bytes_per_token_per_head"].(float64); b != want {
			t.Errorf("%s: %v bytes per token per head, want %v", name, b, want)
		}
	}
}

func TestFormatsTableAndErrors(t *testing.T) {
	out, err := run(t, "--head-dim", "8")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "fp16") || !strings.Contains(out, "head_dim 8") {
		t.Errorf("table output:\n%s", out)
	}
	if _, err := run(t, "--head-dim", "0"); err == nil {
		t.Error("--head-dim 0 accepted")
	}
	if _, err := run(t, "--output", "xml"); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("--output xml: %v", err)
	}
}
