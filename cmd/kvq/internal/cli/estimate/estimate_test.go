package estimate

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// run executes kvq estimate with args, mapping errors to exit codes as the
// root command does.
func run(t testing.TB, tty bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, OutTTY: tty}, Version: "test"}
	cmd := NewCmd(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })
	err := cmd.ExecuteContext(context.Background())
	switch {
	case err == nil:
		return cmdutil.ExitOK, out.String(), errOut.String()
	case cmdutil.IsUsage(err):
		return cmdutil.ExitUsage, out.String(), err.Error()
	default:
		return cmdutil.ExitError, out.String(), err.Error()
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		os.WriteFile(path+".got", []byte(got), 0o644)
		t.Errorf("output differs from %s; wrote %s.got\ngot:\n%s", path, path, got)
	}
}

// The goldens use the float formats only, so that they do not change when
// quantized formats are tuned; TestAllFormats covers those.
var llamaH100 = []string{"--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--cache", "fp16,bf16,fp32,k=fp16,v=fp32", "--context", "8k,32k,128k", "--concurrency", "1,4"}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		args []string
	}{
		{"llama-3.1-8b-h100.table.golden", false, llamaH100},
		{"llama-3.1-8b-h100.tty.golden", true, llamaH100},
		{"llama-3.1-8b-h100.json.golden", false, append([]string{"-o", "json"}, llamaH100...)},
		{"llama-3.1-8b-h100.csv.golden", false, append([]string{"-o", "csv"}, llamaH100...)},
		{"llama-3.1-8b-h100.md.golden", false, append([]string{"-o", "markdown"}, llamaH100...)},
		{"worked-example.table.golden", false, []string{"-m", "llama-3.1-8b", "--kv-budget", "58.11GiB", "--max-model-len", "8192", "--cache", "fp16,bf16"}},
		{"worked-example-29751.table.golden", false, []string{"-m", "llama-3.1-8b", "--kv-budget", "58.11GiB", "--max-model-len", "8192", "--cache", "fp16", "--num-gpu-blocks-override", "29751"}},
		{"gemma-2-9b.table.golden", false, []string{"-m", "google/gemma-2-9b-it", "--kv-budget", "2GiB", "--max-model-len", "8192", "--cache", "fp16", "--context", "2k,8k", "--concurrency", "1,2"}},
		{"deepseek-v3-h200x8.table.golden", false, []string{"-m", "deepseek-ai/DeepSeek-V3", "--gpu", "h200", "--gpus", "8", "--cache", "bf16,fp32"}},
		{"qwen2.5-7b-sglang.table.golden", false, []string{"-m", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "h100", "--tp", "4", "--engine", "sglang", "--cache", "fp16"}},
		{"mistral-config.table.golden", false, []string{"-m", "testdata/mistral-7b-v0.1.json", "--gpu", "l4", "--cache", "fp16", "--max-model-len", "16k"}},
		{"no-budget.table.golden", false, []string{"-m", "qwen3-8b", "--cache", "fp16,fp32"}},
		{"list-models.golden", false, []string{"--list-models"}},
		{"list-gpus.golden", false, []string{"--list-gpus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.tty, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			golden(t, tc.name, out)
		})
	}
}

// TestWorkedExample checks the JSON fields against docs/estimate-rules.md §7.
func TestWorkedExample(t *testing.T) {
	code, out, stderr := run(t, false, "-m", "llama-3.1-8b", "--kv-budget", "58.11GiB", "--max-model-len", "8192", "--cache", "fp16", "--num-gpu-blocks-override", "29751", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Formats []map[string]any `json:"formats"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	f := res.Formats[0]
	for _, field := range []string{"format", "bytes_per_token", "bytes_per_token_per_rank", "bits_per_value", "block_bytes", "blocks", "tokens", "max_concurrency", "max_context", "fits"} {
		if _, ok := f[field]; !ok {
			t.Errorf("JSON lacks field %q", field)
		}
	}
	if f["tokens"] != 476016.0 || f["blocks"] != 29751.0 || f["bytes_per_token"] != 131072.0 || f["block_bytes"] != 2097152.0 {
		t.Errorf("tokens %v, blocks %v, bytes/token %v, block %v; want 476016, 29751, 131072, 2097152", f["tokens"], f["blocks"], f["bytes_per_token"], f["block_bytes"])
	}
	if c := f["max_concurrency"].(float64); c < 58.105 || c >= 58.115 {
		t.Errorf("max_concurrency = %v, want 58.11", c)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"help", []string{"--help"}, 0, ""},
		{"no budget", []string{"-m", "llama-3.1-8b", "--cache", "fp16"}, 0, ""},
		{"unknown preset", []string{"-m", "llama-3.1-7b", "--cache", "fp16"}, 2, "did you mean"},
		{"unknown gpu", []string{"-m", "llama-3.1-8b", "--gpu", "h10", "--cache", "fp16"}, 2, "H100-80GB"},
		{"malformed config", []string{"-m", "testdata/malformed/config.json", "--cache", "fp16"}, 2, "testdata/malformed/config.json"},
		{"malformed model dir", []string{"-m", "testdata/malformed", "--cache", "fp16"}, 2, "bad model config"},
		{"missing file", []string{"-m", "./nope/config.json", "--cache", "fp16"}, 2, "no such file"},
		{"zero gpu memory", []string{"-m", "llama-3.1-8b", "--gpu-mem", "0GiB", "--cache", "fp16"}, 2, "--gpu-mem"},
		{"no unit", []string{"-m", "llama-3.1-8b", "--gpu-mem", "80", "--cache", "fp16"}, 2, "add a unit"},
		{"negative budget", []string{"-m", "llama-3.1-8b", "--kv-budget", "-5GiB", "--cache", "fp16"}, 2, "--kv-budget"},
		{"negative tp", []string{"-m", "llama-3.1-8b", "--tp", "-1", "--cache", "fp16"}, 2, "--tp"},
		{"zero pp", []string{"-m", "llama-3.1-8b", "--pp", "0", "--cache", "fp16"}, 2, "--pp"},
		{"gpus and pp", []string{"-m", "llama-3.1-8b", "--gpus", "3", "--pp", "2", "--cache", "fp16"}, 2, "--gpus 3"},
		{"gpus tp pp", []string{"-m", "llama-3.1-8b", "--gpus", "8", "--tp", "2", "--pp", "2", "--cache", "fp16"}, 2, "--gpus 8"},
		{"zero context", []string{"-m", "llama-3.1-8b", "--context", "0", "--cache", "fp16"}, 2, "--context"},
		{"negative concurrency", []string{"-m", "llama-3.1-8b", "--concurrency", "-2", "--cache", "fp16"}, 2, "--concurrency"},
		{"context overflows int64 arithmetic", []string{"-m", "llama-3.1-8b", "--context", "9223372036854775807", "--cache", "fp16"}, 2, "overflow"},
		{"context does not parse", []string{"-m", "llama-3.1-8b", "--context", "99999999999999999999", "--cache", "fp16"}, 2, "does not fit in int64"},
		{"bad cache spec", []string{"-m", "llama-3.1-8b", "--cache", "int3"}, 2, `unknown format "int3"`},
		{"bad cache key", []string{"-m", "llama-3.1-8b", "--cache", "fp16,window=3"}, 2, "--cache"},
		{"bad output", []string{"-m", "llama-3.1-8b", "-o", "yaml"}, 2, "--output"},
		{"bad plot", []string{"-m", "llama-3.1-8b", "--cache", "fp16", "--plot", "kv.jpg"}, 2, "--plot"},
		{"gpu and gpu-mem", []string{"-m", "llama-3.1-8b", "--gpu", "h100", "--gpu-mem", "80GiB", "--cache", "fp16"}, 2, "--gpu and --gpu-mem"},
		{"bad engine", []string{"-m", "llama-3.1-8b", "--engine", "trt", "--cache", "fp16"}, 2, "--engine"},
		{"bad version", []string{"-m", "llama-3.1-8b", "--vllm-version", "latest", "--cache", "fp16"}, 2, "--vllm-version"},
		{"utilization", []string{"-m", "llama-3.1-8b", "--gpu-memory-utilization", "1.5", "--cache", "fp16"}, 2, "--gpu-memory-utilization"},
		{"block size", []string{"-m", "llama-3.1-8b", "--block-size", "0", "--cache", "fp16"}, 2, "--block-size"},
		{"kv heads and tp", []string{"-m", "qwen2.5-7b", "--tp", "3", "--cache", "fp16"}, 2, "one must divide the other"},
		{"bad int flag", []string{"-m", "llama-3.1-8b", "--tp", "two"}, 2, "invalid argument"},
		{"unknown flag", []string{"-m", "llama-3.1-8b", "--bogus"}, 2, "unknown flag"},
		// cobra's NoArgs error is a plain error, which cmdutil.IsUsage
		// recognizes as the root command does.
		{"argument", []string{"-m", "llama-3.1-8b", "extra"}, 2, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, false, tc.args...)
			if code != tc.code {
				t.Errorf("kvq estimate %v exit code = %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.err) {
				t.Errorf("kvq estimate %v stderr = %q, want it to mention %q", tc.args, stderr, tc.err)
			}
		})
	}
}

// TestDefaultModel: without --model, estimate uses the built-in probe model
// when the build has one, and otherwise says there is none (exit 2).
func TestDefaultModel(t *testing.T) {
	code, out, stderr := run(t, false, "--gpu", "h100", "--cache", "fp16")
	if _, ok := models.ProbeModel(); ok {
		if code != 0 || !strings.Contains(stderr, "built-in kvq-probe") || !strings.Contains(out, "fp16") {
			t.Errorf("default model: exit %d, stderr %q", code, stderr)
		}
		return
	}
	if code != 2 || !strings.Contains(stderr, "no --model given") {
		t.Errorf("no built-in model: exit %d, stderr %q", code, stderr)
	}
}

func TestHelp(t *testing.T) {
	_, out, _ := run(t, false, "--help")
	for _, want := range []string{"Examples:", "kvq estimate --model llama-3.1-8b --gpu h100-80gb", "--kv-budget", "--cache string", "fp16,fp8,int8,int4,kivi2", "GPU KV cache size"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "\t") {
			t.Errorf("help line %q keeps the source indentation", l)
		}
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"kv.svg", "kv.png"} {
		path := filepath.Join(dir, name)
		code, _, stderr := run(t, false, "-m", "gemma-2-9b", "--gpu", "l40s", "--cache", "fp16,fp32", "--concurrency", "1,8", "--plot", path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if name == "kv.png" {
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("plot is not a PNG: %v", err)
			}
			continue
		}
		for _, want := range []string{"<svg", "KV cache per rank: gemma-2-9b, 8 requests", "context length (tokens)", "KV memory per rank (GiB)", "fp32", "KV budget"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("SVG lacks %q", want)
			}
		}
	}
	// A plot into a missing directory is refused before any work.
	if code, _, stderr := run(t, false, "-m", "gemma-2-9b", "--cache", "fp16", "--plot", filepath.Join(dir, "no", "such", "dir.svg")); code != 2 || !strings.Contains(stderr, "does not exist") {
		t.Errorf("plot to a missing directory: exit %d, %q; want 2", code, stderr)
	}
}

// TestAllFormats runs the default cache list, and every registered format,
// through the command: it must print a row per format.
func TestAllFormats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		formats []string
		args    []string
	}{
		{"default", strings.Split(DefaultCaches, ","), nil},
		{"registered", quant.Formats().Names(), []string{"--cache", strings.Join(quant.Formats().Names(), ",")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-m", "llama-3.1-8b", "--gpu", "h100-80gb"}, tc.args...)
			code, out, stderr := run(t, false, args...)
			if code != 0 {
				t.Fatalf("kvq estimate %v: exit %d: %s", args, code, stderr)
			}
			for _, f := range tc.formats {
				if !strings.Contains(out, "\n"+f+" ") {
					t.Errorf("kvq estimate %v: output lacks a %s row:\n%s", args, f, out)
				}
			}
		})
	}
}

// bigModel estimates a large model over 8 GPUs: 126 layers whose
// weights leave no KV budget, so every format reports that it does not fit.
var bigModel = []string{"-m", "llama-3.1-405b", "--gpu", "h100", "--gpus", "8", "--cache", "fp16,bf16,fp32"}

// TestBigModelPlot runs bigModel and checks the exit code, the report and
// the plot. How fast the command runs is BenchmarkEstimate's business.
func TestBigModelPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.png")
	args := slices.Concat(bigModel, []string{"--plot", path})
	code, out, stderr := run(t, false, args...)
	if code != 0 {
		t.Fatalf("kvq estimate %v: exit %d, want 0: %s", args, code, stderr)
	}
	want := []string{"llama-3.1-405b (preset): 126 layers, 8 KV heads × 128", "8 × H100-80GB", "TP8 PP1", "no memory for the KV cache"}
	for _, f := range []string{"fp16", "bf16", "fp32"} {
		want = append(want, "\n"+f+" ")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("kvq estimate %v: output lacks %q:\n%s", args, w, out)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 100 || r.Dy() < 100 {
		t.Errorf("plot is %v, want at least 100×100 pixels", r)
	}
}

// BenchmarkEstimate times the whole command on bigModel, with and without
// the PNG plot.
func BenchmarkEstimate(b *testing.B) {
	for _, bc := range []struct {
		name string
		plot bool
	}{{"table", false}, {"png", true}} {
		b.Run(bc.name, func(b *testing.B) {
			args := bigModel
			if bc.plot {
				args = slices.Concat(bigModel, []string{"--plot", filepath.Join(b.TempDir(), "kv.png")})
			}
			b.ReportAllocs()
			for b.Loop() {
				if code, _, stderr := run(b, false, args...); code != 0 {
					b.Fatalf("kvq estimate %v: exit %d: %s", args, code, stderr)
				}
			}
		})
	}
}
