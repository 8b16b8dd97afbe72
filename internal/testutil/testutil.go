// Package testutil holds helpers shared by kvq's tests.
//
// Shared fixtures (the stories260K model, its tokenizer and eval text) live
// in a folder named shared beside the repository root, never at an absolute
// path of a development machine: CI has only the repository clone with
// ../shared next to it. Tests find them with SharedPath, which walks up from
// the test's working directory (its package directory) to the repository
// root.
package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory that holds go.mod. go test runs each package's
// tests in the package directory, so this is the module root.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("testutil: no go.mod at or above %s", wd)
		}
	}
}

// LookupShared returns the path of rel (slash-separated, e.g.
// "models/stories260K/tok512.bin") under ../shared beside the repository
// root, and whether it exists. It is for optional uses, such as fuzz seeds,
// that go on without the file.
func LookupShared(rel string) (string, bool) {
	root, err := RepoRoot()
	if err != nil {
		return "", false
	}
	p := filepath.Join(root, "..", "shared", filepath.FromSlash(rel))
	_, err = os.Stat(p)
	return p, err == nil
}

// SharedPath returns the path of rel (a file or a directory, slash-separated)
// under ../shared beside the repository root. When it is absent the test is
// skipped with a message saying where it was looked for, except under
// CI=true, where its absence fails the test.
func SharedPath(tb testing.TB, rel string) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(root, "..", "shared", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			tb.Fatalf("shared fixture %s: %v", rel, err)
		}
		if os.Getenv("CI") == "true" {
			tb.Fatalf("shared fixture ../shared/%s not found at %s (required when CI=true)", rel, p)
		}
		tb.Skipf("shared fixture ../shared/%s not found at %s; skipping (put the shared folder beside the repository to run)", rel, p)
	}
	return p
}

// SharedDir returns the ../shared folder beside the repository root, with
// SharedPath's skip rule.
func SharedDir(tb testing.TB) string {
	tb.Helper()
	return SharedPath(tb, ".")
}

// SharedFile returns a file under ../shared, with SharedPath's skip rule.
func SharedFile(tb testing.TB, rel string) string {
	tb.Helper()
	return SharedPath(tb, rel)
}

// Stories260K returns the paths of the stories260K model files.
func Stories260K(tb testing.TB) (bin, tok, gguf string) {
	tb.Helper()
	return SharedPath(tb, "models/stories260K/stories260K.bin"),
		SharedPath(tb, "models/stories260K/tok512.bin"),
		SharedPath(tb, "models/stories260K/stories260K.gguf")
}
