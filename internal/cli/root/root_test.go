package root

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/testutil"
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
		{"missing required flag", []string{"generate", "--prompt", "x"}, 2, `"model" not set`},
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
