package root

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, Version: "test"}
	code = Run(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string // substring of stderr
	}{
		{"help", []string{"--help"}, 0, ""},
		{"version", []string{"version"}, 0, ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"unknown flag", []string{"generate", "--bogus"}, 2, "unknown flag"},
		{"bad temperature", []string{"generate", "--model", "x", "--temperature", "-1"}, 2, "--temperature"},
		{"bad top-p", []string{"generate", "--model", "x", "--top-p", "0"}, 2, "--top-p"},
		{"bad cache", []string{"generate", "--model", "x", "--cache", "int3"}, 2, `unknown format "int3"`},
		{"missing model file", []string{"generate", "--model", "/nonexistent/m.gguf"}, 2, "/nonexistent/m.gguf"},
		{"bad int flag", []string{"generate", "--model", "x", "--max-tokens", "lots"}, 2, "invalid argument"},
		{"calibrate not built", []string{"calibrate"}, 1, "not implemented"},
		{"eval not built", []string{"eval", "--model", "x"}, 1, "not implemented"},
		{"bench not built", []string{"bench"}, 1, "not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("kvq %v exit code = %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.err) {
				t.Errorf("kvq %v stderr = %q, want it to mention %q", tc.args, stderr, tc.err)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "generate") && !strings.Contains(out, "kvq") {
			t.Errorf("completion %s: code %d, %d bytes, stderr %q", shell, code, len(out), stderr)
		}
	}
	// Dynamic completion of --cache values.
	code, out, _ := run(t, "__complete", "generate", "--cache", "")
	if code != 0 || !strings.Contains(out, "fp16") || !strings.Contains(out, "bf16") {
		t.Errorf("__complete generate --cache: code %d, out %q", code, out)
	}
}

func TestGenerateStories260K(t *testing.T) {
	bin, _, gguf := testutil.Stories260K(t)
	for _, model := range []string{gguf, bin} {
		t.Run(filepath.Base(model), func(t *testing.T) {
			code, out, stderr := run(t, "generate", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "20")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if want := ", there was a little girl named Lily. She loved to play outsid"; !strings.HasPrefix(out, want) {
				t.Errorf("stdout = %q, want prefix %q", out, want)
			}
			for _, field := range []string{"prompt tokens 5", "generated 20", "prefill", "decode", "tok/s", "KV 20480 bytes allocated (fp16, 2 blocks of 16 tokens)"} {
				if !strings.Contains(stderr, field) {
					t.Errorf("stats line %q lacks %q", stderr, field)
				}
			}
		})
	}
}

func TestHFDirectoryCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "qwen3", DType: "BF16", Seed: 3}, modeltest.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "inspect", "--model", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect JSON: %v\n%s", err, out)
	}
	for k, want := range map[string]any{"architecture": "qwen3", "format": "safetensors", "layers": 2.0, "kv_heads": 2.0, "head_dim": 16.0, "tokenizer": "gpt2", "chat_template": true} {
		if info[k] != want {
			t.Errorf("inspect %s = %v, want %v", k, info[k], want)
		}
	}
	if dt, _ := info["dtypes"].([]any); len(dt) != 1 || dt[0] != "BF16" {
		t.Errorf("dtypes = %v, want [BF16]", info["dtypes"])
	}
	code, out, stderr = run(t, "generate", "--model", dir, "--prompt", "the", "--max-tokens", "5", "--chat", "--system", "be brief")
	if code != 0 || !strings.Contains(stderr, "prompt tokens") {
		t.Fatalf("generate --chat: exit %d, out %q, stderr %q", code, out, stderr)
	}
	code, _, stderr = run(t, "generate", "--model", dir, "--prompt", "the", "--system", "x")
	if code != 2 || !strings.Contains(stderr, "--system needs --chat") {
		t.Errorf("--system without --chat: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, "inspect", "--model", filepath.Join(dir, "nope"))
	if code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("inspect missing model: exit %d, stderr %q", code, stderr)
	}
}

func TestProbeEval(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 4, Context: 2048}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "probe", "eval", "--model", dir, "-n", "1", "--contexts", "256", "--cache", "fp32,int2", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Specs     []string `json:"specs"`
		Abilities []struct {
			Ability string    `json:"ability"`
			Values  []float64 `json:"values"`
		} `json:"abilities"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(res.Specs) != 2 || len(res.Abilities) != 9 || len(res.Abilities[0].Values) != 2 {
		t.Errorf("result %+v", res)
	}
	code, _, stderr = run(t, "probe", "eval", "--model", dir, "--tasks", "copy,nope")
	if code != 2 || !strings.Contains(stderr, "--tasks") || !strings.Contains(stderr, "nope") {
		t.Errorf("bad --tasks: exit %d, %q", code, stderr)
	}
	code, _, stderr = run(t, "probe", "eval", "--model", dir, "--contexts", "x")
	if code != 2 || !strings.Contains(stderr, "--contexts") {
		t.Errorf("bad --contexts: exit %d, %q", code, stderr)
	}
	code, out, _ = run(t, "probe", "eval", "--model", dir, "-n", "1", "--contexts", "256", "--cache", "fp32,int2")
	if code != 0 || !strings.Contains(out, "passkey 256") || !strings.Contains(out, "int2") {
		t.Errorf("table output: exit %d\n%s", code, out)
	}
	// --log-samples: one line per example and cache, agreeing with the table.
	logPath := filepath.Join(t.TempDir(), "samples.jsonl")
	code, out, stderr = run(t, "probe", "eval", "--model", dir, "-n", "2", "--contexts", "256", "--cache", "fp32,int2", "--output", "json", "--log-samples", logPath)
	if code != 0 {
		t.Fatalf("--log-samples: exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 8*2*2 { // 8 example kinds (JSON gives two rows), 2 each, 2 caches
		t.Fatalf("%d sample lines, want 32", len(lines))
	}
	hits := map[string]float64{}
	for _, l := range lines {
		var s struct {
			Ability, Cache, Prompt, Target, Output string
			Correct                                bool
			Refused                                *bool
		}
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("sample line %q: %v", l, err)
		}
		if s.Prompt == "" && s.Ability != "story perplexity" || s.Target == "" || s.Correct != (s.Output == s.Target) {
			t.Errorf("sample %+v", s)
		}
		// A hit is a correct answer, or a refusal on the refusal rows.
		hit := s.Correct
		if s.Refused != nil {
			hit = *s.Refused
		}
		if s.Ability == "json" {
			s.Ability = "json exact"
		}
		if s.Cache == "fp32" && hit {
			hits[s.Ability] += 50
		}
	}
	for _, a := range res.Abilities {
		if a.Ability != "story perplexity" && a.Ability != "json valid" && hits[a.Ability] != a.Values[0] {
			t.Errorf("%s: samples give %.0f%%, table %.0f%%", a.Ability, hits[a.Ability], a.Values[0])
		}
	}
	code, _, stderr = run(t, "probe", "eval", "--model", dir, "-n", "1", "--contexts", "256", "--cache", "fp32", "--log-samples", filepath.Join(t.TempDir(), "no", "such", "dir", "s.jsonl"))
	if code == 0 || !strings.Contains(stderr, "--log-samples") {
		t.Errorf("unwritable --log-samples: exit %d, %q", code, stderr)
	}
}

// TestDefaultModel: commands that take --model use the built-in probe model
// when it is omitted (and say so), or explain that the build has none.
func TestDefaultModel(t *testing.T) {
	_, ok := models.ProbeModel()
	for _, args := range [][]string{{"generate", "--prompt", "The", "--max-tokens", "3"}, {"inspect"}} {
		code, _, stderr := run(t, args...)
		if ok && (code != 0 || !strings.Contains(stderr, "built-in kvq-probe")) {
			t.Errorf("kvq %v with the built-in model: exit %d, stderr %q", args, code, stderr)
		}
		if !ok && (code != 2 || !strings.Contains(stderr, "no --model given")) {
			t.Errorf("kvq %v without a built-in model: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestProbeTrainSmoke trains the smoke configuration through the CLI, then
// loads the exported model with generate, and resumes idempotently.
func TestProbeTrainSmoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, out, stderr := run(t, "probe", "train", "--dir", dir, "--smoke", "--log-every", "2")
	if code != 0 || !strings.Contains(out, "model exported to") || !strings.Contains(stderr, "step 6/6") {
		t.Fatalf("probe train --smoke: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	code, _, stderr = run(t, "inspect", "--model", filepath.Join(dir, "model"), "--output", "json")
	if code != 0 {
		t.Fatalf("inspect the trained model: exit %d, %s", code, stderr)
	}
	// A second run finds the finished checkpoint and only re-exports.
	code, out, stderr = run(t, "probe", "train", "--dir", dir, "--smoke")
	if code != 0 || strings.Contains(stderr, "step 1/") {
		t.Errorf("re-run: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = run(t, "probe", "train", "--dir", dir, "--log-every", "0"); code != 2 {
		t.Errorf("--log-every 0: exit %d, %q", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "no-run")
	if code, _, stderr = run(t, "probe", "train", "--dir", filepath.Join(t.TempDir(), "ft"), "--finetune-from", missing); code != 2 || !strings.Contains(stderr, "--finetune-from") || !strings.Contains(stderr, missing) {
		t.Errorf("--finetune-from a missing directory: exit %d, %q", code, stderr)
	}
	// The later stages start from the exported model directory.
	for _, stage := range []string{"3", "4"} {
		ft := filepath.Join(t.TempDir(), "ft"+stage)
		if code, out, stderr = run(t, "probe", "train", "--dir", ft, "--smoke", "--stage", stage, "--finetune-from", filepath.Join(dir, "model")); code != 0 || !strings.Contains(out, filepath.Join(ft, "model")) {
			t.Errorf("--stage %s --finetune-from an export: exit %d\nstdout %q\nstderr %q", stage, code, out, stderr)
		}
	}
	for _, args := range [][]string{
		{"--stage", "5"},
		{"--stage", "-1"},
		{"--stage", "1", "--finetune-from", dir},
		{"--stage", "3"},
		{"--stage", "4"},
	} {
		if code, _, stderr = run(t, append([]string{"probe", "train", "--dir", filepath.Join(t.TempDir(), "x"), "--smoke"}, args...)...); code != 2 || !strings.Contains(stderr, "--stage") {
			t.Errorf("probe train %v: exit %d, %q; want 2 naming --stage", args, code, stderr)
		}
	}
}
