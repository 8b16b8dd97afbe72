package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// tinyHF writes a 2-layer random Hugging Face model and returns its directory.
func tinyHF(t *testing.T, context int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 5, Context: context}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCacheLayerOverrides: a per-layer override naming a layer the model
// does not have is a usage error naming the flag and the valid range, in
// every command that takes --cache and knows the model, before any work.
func TestCacheLayerOverrides(t *testing.T) {
	dir := tinyHF(t, 512)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"generate", []string{"generate", "--model", dir, "--prompt", "the", "-n", "2", "--cache", "int4,L5=fp16"}, `--cache: quant: bad cache spec "int4,L5=fp16": L5: the model has 2 layers (valid: L0 to L1, or L-2 to L-1)`},
		{"generate compare", []string{"generate", "--model", dir, "--prompt", "the", "-n", "2", "--compare", "int8,L-3=fp16"}, "--compare: "},
		{"eval", []string{"eval", "--model", dir, "--cache", "fp16,int4,L2=fp16", "--no-text", "--tasks", "copy", "-n", "1", "--no-speed"}, "--cache: "},
		{"bench", []string{"bench", "--model", dir, "--cache", "fp16,int4,L0-2=fp16", "--num-prompts", "1", "--depths", "none"}, "L0-2: the model has 2 layers"},
		{"serve", []string{"serve", "--model", dir, "--cache", "int4,L7=fp16", "--port", "0"}, "L7: the model has 2 layers"},
		{"estimate", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--cache", "int4,L99=fp16"}, `--cache: quant: bad cache spec "int4,L99=fp16": L99: the model has 32 layers (valid: L0 to L31, or L-32 to L-1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("kvq %s printed %q before refusing", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestPlanLimits: kvq plan refuses what kvq estimate refuses.
func TestPlanLimits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "200000"}, "--max-model-len 200000 is greater than the model's maximum of 131072 (max_position_embeddings)"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "3.0"}, `--engine-version 3.0: estimate: bad plan: vLLM version "3.0" is not a release kvq knows the accounting of (valid: 0.1 to 0.21)`},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// noContext writes a tiny Hugging Face model whose config.json states no
// context length (no max_position_embeddings).
func noContext(t *testing.T) string {
	t.Helper()
	dir := tinyHF(t, 512)
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "max_position_embeddings")
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGenerateLimits: a prompt plus --max-tokens beyond what the model can
// hold is a usage error naming both numbers before anything is allocated,
// however large --max-tokens is and whether or not the model states its
// context; the cache holds what can be written, and the stats line says
// what it allocated.
func TestGenerateLimits(t *testing.T) {
	dir, noctx := tinyHF(t, 512), noContext(t)
	long := strings.Repeat("ab ", 600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"prompt past the context", []string{"--model", dir, "--prompt", long, "-n", "10"}, "plus --max-tokens 10 make "},
		{"max-tokens past the context", []string{"--model", dir, "--prompt", "the", "-n", "600"}, "tokens plus --max-tokens 600 make 60"},
		{"max-tokens near MaxInt64", []string{"--model", dir, "--prompt", "the", "-n", "9223372036854775807"}, "plus --max-tokens 9223372036854775807 make 922337203685477581"},
		{"compare past the context", []string{"--model", dir, "--prompt", "the", "-n", "600", "--compare", "int4"}, "--max-tokens 600"},
		{"unknown context, past the positions", []string{"--model", noctx, "--prompt", "the", "-n", "10000000000"}, "more than the 2147483647 positions kvq addresses (the model states no context length)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, append([]string{"generate"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "than the") {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q before refusing", out)
			}
		})
	}
	t.Run("unknown context, past the memory", func(t *testing.T) {
		// 2·10⁹ tokens of 2 layers × 2 KV heads × 16 values × K and V in
		// fp16 are 477 GiB.
		if mem := cmdutil.PhysicalMemory(); mem == 0 || mem > 400<<30 {
			t.Skipf("this machine's memory (%d bytes) is unknown or holds the cache", mem)
		}
		code, _, stderr := run(t, "generate", "--model", noctx, "--prompt", "the", "-n", "2000000000")
		if want := "--max-tokens: a KV cache for the prompt's "; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "of memory") {
			t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, want)
		}
	})
	t.Run("cache sized by what is written", func(t *testing.T) {
		// 5 prompt tokens and 12 generated: the last generated token is
		// never written, so 16 tokens, one block.
		_, _, gguf := testutil.Stories260K(t)
		code, _, stderr := run(t, "generate", "--model", gguf, "--prompt", "Once upon a time", "-n", "12")
		if want := "generated 12 | "; code != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("exit %d, stderr %q; want %q", code, stderr, want)
		}
		if want := "KV 10240 bytes allocated (fp16, 1 blocks of 16 tokens)"; !strings.Contains(stderr, want) {
			t.Errorf("stats line %q, want %q", stderr, want)
		}
	})
}

// TestEvalContextLimits: eval's contexts beyond the model's are refused
// before any work, naming the flag.
func TestEvalContextLimits(t *testing.T) {
	dir := tinyHF(t, 512)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--contexts", "100000", "--tasks", "passkey"}, "--contexts 100000: more than the 512 tokens of the model's context"},
		{[]string{"--contexts", "256", "--grid-contexts", "256,1024", "--tasks", "long-context"}, "--grid-contexts 1024: more than the 512 tokens"},
		{[]string{"--ctx", "4096", "--tasks", "none"}, "--ctx 4096: more than the 512 tokens"},
		{[]string{"--max-context", "256", "--contexts", "300", "--tasks", "passkey"}, "--contexts 300: more than the 256 tokens"},
	} {
		args := append([]string{"eval", "--model", dir, "--no-speed"}, tc.args...)
		code, out, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("kvq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, stderr, tc.want)
		}
	}
}

// TestBenchLimits: a workload whose requests cannot fit the model's context
// is refused before its prompts are made.
func TestBenchLimits(t *testing.T) {
	dir := tinyHF(t, 512)
	args := []string{"bench", "--model", dir, "--input-len", "100000000", "--num-prompts", "1", "--depths", "none"}
	code, out, stderr := run(t, args...)
	if want := "--input-len 100000000 plus --output-len 64 make 100000064 tokens a request, more than the model's context of 512"; code != 2 || !strings.Contains(stderr, want) || out != "" {
		t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, stderr, want)
	}
}

// TestEvalDefaultContextsFit: on a model whose context is shorter than the
// default passkey contexts (1024, 2048), eval runs the suites that do not
// use them, and cuts the defaults to the model's context for those that do.
func TestEvalDefaultContextsFit(t *testing.T) {
	dir := tinyHF(t, 512)
	for _, tasks := range []string{"copy", "passkey"} {
		code, out, stderr := run(t, "eval", "--model", dir, "--no-text", "--no-speed", "--cache", "fp16,int8", "--tasks", tasks, "-n", "1")
		if code != 0 || !strings.Contains(out, "int8") {
			t.Errorf("kvq eval --tasks %s on a 512-token model: exit %d, stderr %q", tasks, code, stderr)
		}
		if tasks == "passkey" && !strings.Contains(out, "passkey 512") {
			t.Errorf("kvq eval --tasks passkey on a 512-token model: no passkey 512 row:\n%s", out)
		}
	}
}
