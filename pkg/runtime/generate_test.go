package runtime_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestGenerateEmptyPrompt checks that Generate refuses a prompt with no
// tokens (what an empty text encodes to without a BOS token) with an
// input error, before touching the cache.
func TestGenerateEmptyPrompt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nobos.gguf")
	if err := modeltest.WriteGGUF(p, modeltest.Spec{Arch: "llama", Seed: 5, NoBOS: true}); err != nil {
		t.Fatal(err)
	}
	m := load(t, p, runtime.LoadOptions{})
	if ids := m.Tokenizer.Encode("", true); len(ids) != 0 {
		t.Fatalf(`Encode("", true) = %v, want no tokens from a tokenizer without BOS`, ids)
	}
	r := newRunner(t, m)
	c := newCache(t, r, "fp16", 4)
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	for _, prompt := range [][]int{nil, {}} {
		out, _, err := r.Generate(context.Background(), c, 0, prompt, runtime.GenerateOptions{MaxTokens: 3})
		if !errors.Is(err, runtime.ErrEmptyPrompt) || !errors.Is(err, runtime.ErrInput) || out != nil {
			t.Errorf("Generate(%v) = %v, %v; want ErrEmptyPrompt, an ErrInput", prompt, out, err)
		}
	}
	if n := c.Len(0); n != 0 {
		t.Errorf("the cache holds %d tokens after refused prompts", n)
	}
}
