package root

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestEmptyPrompt runs kvq generate with --prompt "" on models whose
// tokenizer adds no BOS token, so that the prompt has no tokens: a usage
// error naming --prompt, never a panic.
func TestEmptyPrompt(t *testing.T) {
	dir := t.TempDir()
	spec := modeltest.Spec{Arch: "llama", Seed: 4, NoBOS: true}
	ggufPath, hfDir := filepath.Join(dir, "nobos.gguf"), filepath.Join(dir, "nobos")
	if err := modeltest.WriteGGUF(ggufPath, spec); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(hfDir, spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{ggufPath, hfDir} {
		for _, extra := range [][]string{nil, {"--compare", "int4"}} {
			args := append([]string{"generate", "--model", model, "--prompt", "", "--max-tokens", "3"}, extra...)
			t.Run(filepath.Base(model)+strings.Join(extra, ""), func(t *testing.T) {
				code, out, stderr := run(t, args...)
				if code != 2 {
					t.Errorf("kvq %v: exit %d, want 2 (stdout %q, stderr %q)", args, code, out, stderr)
				}
				if !strings.Contains(stderr, "--prompt") || !strings.Contains(stderr, "no tokens") {
					t.Errorf("stderr %q does not say that --prompt gives no tokens", stderr)
				}
			})
		}
	}
	// A non-empty prompt on the same models works.
	code, _, stderr := run(t, "generate", "--model", ggufPath, "--prompt", "the", "--max-tokens", "3")
	if code != 0 {
		t.Errorf("generate with a prompt: exit %d: %s", code, stderr)
	}
}
