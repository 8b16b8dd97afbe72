package root

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestGPTOSSModel runs kvq inspect, generate (plain and --chat with the
// harmony template), eval (attention sinks over fp32, int4 and fp8
// caches), calibrate and bench on a tiny GPT-OSS checkpoint (Hugging Face
// directory with MXFP4 experts, and GGUF file), and checks that kvq
// estimate --model DIR plans the bytes per token the runtime's cache
// allocates.
func TestGPTOSSModel(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", "pkg", "chat", "testdata", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	spec := modeltest.GPTOSS{YarnFactor: 4, Seed: 5, Context: 2048, ChatTemplate: string(tmpl)}
	dir := t.TempDir()
	hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteGPTOSSHF(hf, spec); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGPTOSSGGUF(gg, spec); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{hf, gg} {
		code, out, stderr := run(t, "inspect", "--model", path)
		if code != 0 || !strings.Contains(out, "gpt-oss") || !strings.Contains(out, "2 per token") || !strings.Contains(out, "yarn") {
			t.Errorf("inspect %s: exit %d:\n%s%s", path, code, out, stderr)
		}
		code, _, stderr = run(t, "generate", "--model", path, "--prompt", "the cat", "-n", "4")
		if code != 0 || !strings.Contains(stderr, "generated 4") {
			t.Errorf("generate %s: exit %d: %s", path, code, stderr)
		}
		code, _, stderr = run(t, "generate", "--model", path, "--chat", "--system", "Be brief.", "--prompt", "hi", "-n", "2", "--cache", "int8")
		if code != 0 || !strings.Contains(stderr, "generated 2") {
			t.Errorf("generate --chat %s: exit %d: %s", path, code, stderr)
		}
	}
	code, out, stderr := run(t, "eval", "--model", hf, "-n", "2", "--contexts", "256", "--grid-contexts", "128,256", "--grid-depths", "2", "--grid-n", "1",
		"--ctx", "128", "--chunks", "2", "--no-speed", "--cache", "fp32,int4,fp8")
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
}
