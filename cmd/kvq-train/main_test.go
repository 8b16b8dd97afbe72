package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
)

func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestTrainSmoke trains the smoke configuration through the command, loads
// the exported model, resumes idempotently, and refuses bad flags with
// exit 2 naming them.
func TestTrainSmoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, out, stderr := runArgs(t, "--dir", dir, "--smoke", "--log-every", "2")
	if code != 0 || !strings.Contains(out, "model exported to") || !strings.Contains(stderr, "step 6/6") {
		t.Fatalf("--smoke: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	m, err := runtime.Load(context.Background(), filepath.Join(dir, "model"), runtime.LoadOptions{})
	if err != nil {
		t.Fatalf("loading the trained model: %v", err)
	}
	m.Close()
	// A second run finds the finished checkpoint and only re-exports.
	code, _, stderr = runArgs(t, "--dir", dir, "--smoke")
	if code != 0 || strings.Contains(stderr, "step 1/") {
		t.Errorf("re-run: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = runArgs(t, "--dir", dir, "--log-every", "0"); code != 2 {
		t.Errorf("--log-every 0: exit %d, %q", code, stderr)
	}
	if code, _, stderr = runArgs(t, "--dir", dir, "--no-such-flag"); code != 2 || !strings.Contains(stderr, "--no-such-flag") {
		t.Errorf("an unknown flag: exit %d, %q", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = runArgs(t, "--smoke", "--dir", filepath.Join(file, "sub")); code != 2 || !strings.Contains(stderr, "--dir") {
		t.Errorf("--dir below a file: exit %d, %q; want 2 naming --dir", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "no-run")
	if code, _, stderr = runArgs(t, "--dir", filepath.Join(t.TempDir(), "ft"), "--finetune-from", missing); code != 2 || !strings.Contains(stderr, "--finetune-from") || !strings.Contains(stderr, missing) {
		t.Errorf("--finetune-from a missing directory: exit %d, %q", code, stderr)
	}
	// The later stages start from the exported model directory.
	for _, stage := range []string{"3", "4"} {
		ft := filepath.Join(t.TempDir(), "ft"+stage)
		if code, out, stderr = runArgs(t, "--dir", ft, "--smoke", "--stage", stage, "--finetune-from", filepath.Join(dir, "model")); code != 0 || !strings.Contains(out, filepath.Join(ft, "model")) {
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
		if code, _, stderr = runArgs(t, append([]string{"--dir", filepath.Join(t.TempDir(), "x"), "--smoke"}, args...)...); code != 2 || !strings.Contains(stderr, "--stage") {
			t.Errorf("%v: exit %d, %q; want 2 naming --stage", args, code, stderr)
		}
	}
}
