package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.txt")
	if err := Write(p, func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }); err != nil {
		t.Fatal(err)
	}
	// A failing writer leaves the previous content and no temporary file.
	boom := errors.New("boom")
	if err := Write(p, func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want boom", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Errorf("after a failed write the file holds %q, want %q", b, "one")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the target", len(ents))
	}
	if err := Write(filepath.Join(dir, "missing", "x"), func(io.Writer) error { return nil }); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestErrorsNameTarget: whatever fails, the error names the target path,
// never the temporary file.
func TestErrorsNameTarget(t *testing.T) {
	dir := t.TempDir()
	isDir := filepath.Join(dir, "taken")
	if err := os.Mkdir(isDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(isDir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		write      func(io.Writer) error
	}{
		{"missing directory", filepath.Join(dir, "missing", "r.html"), func(io.Writer) error { return nil }},
		{"target is a directory", isDir, func(io.Writer) error { return nil }},
		{"writer fails on the file", filepath.Join(dir, "closed.json"), func(w io.Writer) error {
			w.(*os.File).Close()
			_, err := io.WriteString(w, "x")
			return err
		}},
	} {
		err := Write(c.path, c.write)
		if err == nil || !strings.Contains(err.Error(), c.path) || strings.Contains(err.Error(), ".tmp") {
			t.Errorf("%s: Write(%s) = %v, want an error naming the target and no temporary file", c.name, c.path, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only %s", len(ents), isDir)
	}
}
