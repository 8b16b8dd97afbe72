package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestDocuments: the README first, then every Markdown file below the
// docs directories, sorted, each once; other files are left out.
func TestDocuments(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"README.md", "docs/b.md", "docs/a.md", "docs/commands/eval.md", "docs/notes.txt", "extra.md"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("# x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := func(f string) string { return filepath.Join(dir, f) }
	got, err := Documents(j("README.md"), j("docs")+","+j("extra.md")+","+j("docs/a.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{j("README.md"), j("docs/a.md"), j("docs/b.md"), j("docs/commands/eval.md"), j("extra.md")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Documents:\n%q\nwant\n%q", got, want)
	}
	if got, err := Documents("", ""); err != nil || len(got) != 0 {
		t.Fatalf("no documents: %q, %v", got, err)
	}
	if _, err := Documents("", j("missing")); err == nil {
		t.Fatal("a missing docs path: no error")
	}
}
