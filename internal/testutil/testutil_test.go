package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("RepoRoot() = %s, which has no go.mod: %v", root, err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Dir(filepath.Dir(wd)); root != want { // internal/testutil
		t.Errorf("RepoRoot() = %s, want %s", root, want)
	}
}

func TestSharedPathIsBesideTheRepo(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(filepath.Dir(root), "shared", "models", "x.bin")
	if got, _ := LookupShared("models/x.bin"); got != want {
		t.Errorf(`LookupShared("models/x.bin") = %s, want %s`, got, want)
	}
	if _, ok := LookupShared("no/such/fixture"); ok {
		t.Error(`LookupShared("no/such/fixture") reports it present`)
	}
}

func TestSharedPathSkipsWhenAbsent(t *testing.T) {
	t.Setenv("CI", "")
	reached := false
	t.Run("absent", func(t *testing.T) {
		SharedPath(t, "no/such/fixture")
		reached = true
	})
	if reached {
		t.Error("SharedPath returned for a missing fixture instead of skipping")
	}
}
