// Package testutil holds helpers shared by kvq's tests.
package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// SharedDir returns the path of the project's ../shared folder (beside the
// repository root). When it is missing the test is skipped with a message,
// except under CI=true, where a missing folder fails the test.
func SharedDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	dir := filepath.Join(repo, "..", "shared")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("../shared not found at %s (required when CI=true)", dir)
		}
		t.Skipf("../shared not found at %s; skipping (set up ../shared beside the repo to run)", dir)
	}
	return dir
}

// SharedFile returns a file under ../shared, with SharedDir's skip rule; a
// missing file always fails.
func SharedFile(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared file missing: %v", err)
	}
	return p
}

// Stories260K returns the paths of the stories260K model files.
func Stories260K(t testing.TB) (bin, tok, gguf string) {
	t.Helper()
	return SharedFile(t, "models/stories260K/stories260K.bin"),
		SharedFile(t, "models/stories260K/tok512.bin"),
		SharedFile(t, "models/stories260K/stories260K.gguf")
}
