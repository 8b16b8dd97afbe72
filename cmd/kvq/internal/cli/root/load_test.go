package root

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestBadModelFiles checks that a model whose header lies about its sizes,
// or a file of no known format, is a usage error (exit 2) reported at once
// in one line naming the file and what is wrong.
func TestBadModelFiles(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "huge")
	if err := modeltest.WriteHF(hf, modeltest.Spec{Arch: "llama", Seed: 6}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(hf, "config.json")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"num_hidden_layers": 2`), []byte(`"num_hidden_layers": 1000000000`), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.bin")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a checkpoint at all\n", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  []string
	}{
		{hf, []string{cfg, "num_hidden_layers = 1000000000", "tensors for 2 layers"}},
		{text, []string{text, "neither GGUF nor a well-formed llama2.c checkpoint"}},
	} {
		for _, cmd := range []string{"generate", "inspect"} {
			t.Run(cmd+"/"+filepath.Base(tc.model), func(t *testing.T) {
				start := time.Now()
				code, _, stderr := run(t, cmd, "--model", tc.model)
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("took %v", took)
				}
				if code != 2 {
					t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
				}
				first, _, _ := strings.Cut(stderr, "\n")
				for _, w := range tc.want {
					if !strings.Contains(first, w) {
						t.Errorf("first stderr line %q does not mention %q", first, w)
					}
				}
				if n := strings.Count(stderr, "\n"); n > 2 {
					t.Errorf("stderr has %d lines, want the error and a hint:\n%s", n, stderr)
				}
			})
		}
	}
}

// TestMmapFlag: every command that loads and runs a model takes --mmap
// (the weights mapped in place rather than read into huge pages;
// internal/mmap's tests cover the two paths), with one help text, and a
// generation is the same with it as without.
func TestMmapFlag(t *testing.T) {
	for _, cmd := range [][]string{{"generate"}, {"eval"}, {"serve"}, {"bench"}, {"calibrate"}, {"calibrate", "audit"}} {
		_, help, _ := run(t, append(cmd, "--help")...)
		help = strings.Join(strings.Fields(help), " ") // unwrapped
		if !strings.Contains(help, "--mmap") || !strings.Contains(help, "transparent huge pages") {
			t.Errorf("kvq %s --help has no --mmap with its help", strings.Join(cmd, " "))
		}
	}
	gen := []string{"generate", "-n", "4", "-p", "Once"}
	code, want, stderr := run(t, gen...)
	if code != 0 {
		t.Fatalf("kvq generate: exit %d: %s", code, stderr)
	}
	code, got, stderr := run(t, append(gen, "--mmap")...)
	if code != 0 || got != want {
		t.Errorf("kvq generate --mmap: exit %d, output %q, want %q (stderr %q)", code, got, want, stderr)
	}
	if code, _, stderr := run(t, append(gen, "--mmap=maybe")...); code != 2 || !strings.Contains(stderr, "--mmap") {
		t.Errorf("--mmap=maybe: exit %d, stderr %q; want 2 naming the flag", code, stderr)
	}
}
