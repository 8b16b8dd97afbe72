package root

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/spf13/cobra"
)

// badInputs writes malformed and truncated models and data files and
// returns them by name.
func badInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := map[string]string{}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	truncate := func(path string, keep int) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b[:min(keep, len(b)/2)], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := modeltest.Spec{Arch: "llama", Seed: 4, Context: 256}
	// A GGUF cut inside its metadata.
	p["gguf"] = filepath.Join(dir, "trunc.gguf")
	if err := modeltest.WriteGGUF(p["gguf"], spec); err != nil {
		t.Fatal(err)
	}
	truncate(p["gguf"], 100)
	// Hugging Face directories: safetensors cut short, config.json and
	// tokenizer.json cut short.
	hf := func(name string, broken string, keep int) string {
		d := filepath.Join(dir, name)
		if err := modeltest.WriteHF(d, spec, modeltest.HFOptions{}); err != nil {
			t.Fatal(err)
		}
		truncate(filepath.Join(d, broken), keep)
		return d
	}
	p["safetensors"] = hf("trunc-weights", "model.safetensors", 1000)
	p["config"] = hf("trunc-config", "config.json", 40)
	p["tokenizer.json"] = hf("trunc-tokenizer", "tokenizer.json", 300)
	// A llama2.c checkpoint and tokenizer, each cut short.
	p["llama2c"], p["tok.bin"] = filepath.Join(dir, "l2c", "model.bin"), filepath.Join(dir, "l2c", "tokenizer.bin")
	os.MkdirAll(filepath.Dir(p["llama2c"]), 0o755)
	if err := modeltest.WriteLlama2C(p["llama2c"], p["tok.bin"], spec); err != nil {
		t.Fatal(err)
	}
	truncate(p["llama2c"], 5000)
	p["l2c-good"], p["tok.bin-bad"] = filepath.Join(dir, "l2c2", "model.bin"), filepath.Join(dir, "l2c2", "tokenizer.bin")
	os.MkdirAll(filepath.Dir(p["l2c-good"]), 0o755)
	if err := modeltest.WriteLlama2C(p["l2c-good"], p["tok.bin-bad"], spec); err != nil {
		t.Fatal(err)
	}
	truncate(p["tok.bin-bad"], 50)
	// Data files cut in the middle of a record.
	p["jsonl"] = write("data.jsonl", `{"text": "a complete line"}`+"\n"+`{"text": "cut he`)
	p["tasks"] = write("tasks.jsonl", `{"prompt": "Say hi: ", "reference": "hi", "metr`)
	p["gates"] = write("gates.yaml", "gates:\n  - metric: kld\n    max: [")
	p["trace"] = write("trace.jsonl", `{"input_tokens": 10, "output_tok`)
	p["results"] = filepath.Join(dir, "results")
	os.MkdirAll(p["results"], 0o755)
	os.WriteFile(filepath.Join(p["results"], "eval.json"), []byte(`{"schema": "kvq.eval/v1", "caches": 5}`), 0o644)
	p["good"] = filepath.Join(dir, "good")
	if err := modeltest.WriteHF(p["good"], spec, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	p["out"] = filepath.Join(dir, "out")
	return p
}

// TestExitCodePolicy: one exit-code policy in every command. A malformed or
// truncated model, tokenizer, config or data file is exit 2 whichever
// command reads it, with the file named; an unknown subcommand is exit 2
// with a pointer to its group's help; --help is exit 0 everywhere.
func TestExitCodePolicy(t *testing.T) {
	in := badInputs(t)
	runModel := []string{"generate", "inspect", "eval", "probe eval", "calibrate", "calibrate stats", "calibrate audit", "bench", "serve"}
	type tc struct {
		args []string
		code int
		err  string // substring of stderr
	}
	var cases []tc
	for _, c := range runModel {
		for _, bad := range []struct{ model, tok, names string }{
			{in["gguf"], "", "trunc.gguf"},
			{in["safetensors"], "", "model.safetensors"},
			{in["config"], "", "config.json"},
			{in["tokenizer.json"], "", "tokenizer.json"},
			{in["llama2c"], in["tok.bin"], "model.bin"},
			{in["l2c-good"], in["tok.bin-bad"], "tokenizer.bin"},
		} {
			args := append(strings.Fields(c), "--model", bad.model)
			if bad.tok != "" {
				args = append(args, "--tokenizer", bad.tok)
			}
			if strings.HasPrefix(c, "calibrate") && c != "calibrate stats" && c != "calibrate audit" {
				args = append(args, "--out", in["out"])
			}
			cases = append(cases, tc{args, 2, bad.names})
		}
	}
	for _, c := range []string{"estimate", "plan"} { // these read configs and headers only
		cases = append(cases,
			tc{[]string{c, "--model", in["gguf"]}, 2, "trunc.gguf"},
			tc{[]string{c, "--model", in["safetensors"]}, 2, "model.safetensors"},
			tc{[]string{c, "--model", in["config"]}, 2, "config.json"})
	}
	good := in["good"]
	cases = append(cases,
		tc{[]string{"calibrate", "--model", good, "--data", in["jsonl"], "--out", in["out"], "--compare", "none"}, 2, "data.jsonl"},
		tc{[]string{"calibrate", "stats", "--model", good, "--data", in["jsonl"]}, 2, "data.jsonl"},
		tc{[]string{"calibrate", "audit", "--model", good, "--data", in["jsonl"], "--scales", in["jsonl"]}, 2, "data.jsonl"},
		tc{[]string{"eval", "--model", good, "--tasks", in["tasks"]}, 2, "tasks.jsonl"},
		tc{[]string{"eval", "--model", good, "--gates", in["gates"]}, 2, "gates.yaml"},
		tc{[]string{"bench", "--model", good, "--dataset", "file", "--dataset-path", in["jsonl"]}, 2, "data.jsonl"},
		tc{[]string{"plan", "--model", "llama-3.1-8b", "--trace", in["trace"]}, 2, "trace.jsonl"},
		tc{[]string{"plan", "--model", "llama-3.1-8b", "--from", in["results"]}, 2, "eval.json"},
		// Unknown subcommands are usage errors, not a group's help.
		tc{[]string{"probe", "evl"}, 2, `unknown command "evl" for "kvq probe"; did you mean eval?` + "\nRun 'kvq probe --help' for usage."},
		tc{[]string{"calibrate", "stat"}, 2, "did you mean stats?\nRun 'kvq calibrate --help' for usage."},
		tc{[]string{"completion", "bashh"}, 2, "did you mean bash?"},
		tc{[]string{"frobnicate"}, 2, "Run 'kvq --help' for usage."},
		// A bad flag points to its own command's help.
		tc{[]string{"eval", "--bogus"}, 2, "Run 'kvq eval --help' for usage."},
		tc{[]string{"probe", "eval", "--k-order", "x"}, 2, "Run 'kvq probe eval --help' for usage."},
		tc{[]string{"calibrate", "audit", "--dtype", "x"}, 2, "Run 'kvq calibrate audit --help' for usage."},
	)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.err) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit %d naming %q", strings.Join(c.args, " "), code, stderr, c.code, c.err)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("kvq %s crashed: %s", strings.Join(c.args, " "), stderr)
			}
		})
	}
	if _, err := os.Stat(in["out"]); !os.IsNotExist(err) {
		t.Errorf("a failed calibrate created %s", in["out"])
	}
}

// commandPaths lists every command of the tree, as argument lists.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, s := range c.Commands() {
		if s.Hidden || s.Name() == "help" {
			continue
		}
		p := append(append([]string(nil), prefix...), s.Name())
		out = append(out, p)
		out = append(out, commandPaths(s, p)...)
	}
	return out
}

// TestHelpExitsZero: --help on every command prints its help on stdout and
// exits 0, as does a group run alone.
func TestHelpExitsZero(t *testing.T) {
	paths := append(commandPaths(NewCmd(testFactory()), nil), nil)
	for _, p := range paths {
		for _, args := range [][]string{append(append([]string(nil), p...), "--help"), append([]string{"help"}, p...)} {
			code, out, stderr := run(t, args...)
			if code != 0 || !strings.Contains(out, "Usage:") || stderr != "" {
				t.Errorf("kvq %s: exit %d, stderr %q, stdout %.80q", strings.Join(args, " "), code, stderr, out)
			}
		}
		// Every command of kvq's own documents the one policy (serve, which
		// exits 0 after a graceful shutdown, documents its own).
		if len(p) == 0 || p[0] == "completion" || p[0] == "version" || p[0] == "serve" || p[0] == "probe" && len(p) == 1 {
			continue
		}
		_, out, _ := run(t, append(append([]string(nil), p...), "--help")...)
		if p[0] == "canary" { // the verdict is the exit code: its own list, usage error 2 as everywhere
			if !strings.Contains(out, "Exit codes: 0 ") || !strings.Contains(out, "2 usage error") {
				t.Errorf("kvq %s --help does not state its exit codes:\n%s", strings.Join(p, " "), out)
			}
			continue
		}
		if !strings.Contains(out, "Exit codes: 0 ok, 1 runtime failure, 2 usage error (bad flag or argument; a\nmissing, unreadable, malformed or truncated model") {
			t.Errorf("kvq %s --help does not state the exit codes:\n%s", strings.Join(p, " "), out)
		}
	}
	for _, g := range []string{"probe", "completion"} {
		if code, out, _ := run(t, g); code != 0 || !strings.Contains(out, "Available Commands:") {
			t.Errorf("kvq %s alone: exit %d, %q", g, code, out)
		}
	}
}

func testFactory() *cmdutil.Factory {
	return &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, Version: "test"}
}
