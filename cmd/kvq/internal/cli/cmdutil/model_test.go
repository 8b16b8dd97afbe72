package cmdutil

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

func testModel() fstest.MapFS {
	return fstest.MapFS{
		"config.json":       {Data: []byte(`{"a": 1}`)},
		"model.safetensors": {Data: []byte("weights")},
		"sub/extra.txt":     {Data: []byte("nested")},
	}
}

// checkCopy fails unless dir holds exactly fsys's files.
func checkCopy(t *testing.T, dir string, fsys fstest.MapFS) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		f, ok := fsys[filepath.ToSlash(rel)]
		b, rerr := os.ReadFile(p)
		if !ok || rerr != nil || !bytes.Equal(b, f.Data) || !d.Type().IsRegular() {
			t.Errorf("%s: %q (%v), want %q", rel, b, rerr, f)
		}
		return nil
	})
	if err != nil || n != len(fsys) {
		t.Errorf("%s holds %d files (%v), want %d", dir, n, err, len(fsys))
	}
}

func TestExtract(t *testing.T) {
	root := t.TempDir()
	fsys := testModel()
	dir, err := extract(fsys, root, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	checkCopy(t, dir, fsys)
	var note bytes.Buffer
	again, err := extract(fsys, root, &note)
	if err != nil || again != dir {
		t.Errorf("second extract = %s, %v; want the same directory %s", again, err, dir)
	}
	if note.Len() != 0 {
		t.Errorf("an intact copy was reported: %q", note.String())
	}
	fsys["model.safetensors"] = &fstest.MapFile{Data: []byte("other weights")}
	other, err := extract(fsys, root, io.Discard)
	if err != nil || other == dir {
		t.Errorf("changed content extracted to %s (%v), want a new directory", other, err)
	}
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("temporary directory %s left behind", e.Name())
		}
	}
}

// TestExtractRepairs damages an extracted copy in each way a disk, a
// half-finished copy or a user can, and checks that the next extract
// notices, says so, and restores exactly the embedded files.
func TestExtractRepairs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		why    string // in the note on errOut
	}{
		{"changed byte", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "model.safetensors"), "weighTs")
		}, "model.safetensors has SHA-256"},
		{"truncated", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "model.safetensors"), "wei")
		}, "model.safetensors has SHA-256"},
		{"emptied", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "config.json"), "")
		}, "config.json has SHA-256"},
		{"missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "model.safetensors")); err != nil {
				t.Fatal(err)
			}
		}, "model.safetensors is missing"},
		{"missing nested", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "sub")); err != nil {
				t.Fatal(err)
			}
		}, "sub/extra.txt is missing"},
		{"added file", func(t *testing.T, dir string) {
			// An index would make the loader look for shards that are not there.
			writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), "{}")
		}, "unexpected file model.safetensors.index.json"},
		{"link", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "weights")
			writeFile(t, other, "weights")
			p := filepath.Join(dir, "model.safetensors")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Skip(err)
			}
		}, "model.safetensors is not a regular file"},
		{"file instead of directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "")
		}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fsys := testModel()
			dir, err := extract(fsys, root, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, dir)
			var note bytes.Buffer
			again, err := extract(fsys, root, &note)
			if err != nil || again != dir {
				t.Fatalf("extract after damage = %s, %v; want %s", again, err, dir)
			}
			checkCopy(t, dir, fsys)
			if got := note.String(); !strings.Contains(got, "damaged") || !strings.Contains(got, tc.why) || !strings.Contains(got, dir) {
				t.Errorf("note = %q, want it to name %s, say it is damaged and why (%q)", got, dir, tc.why)
			}
			ents, _ := os.ReadDir(root)
			if len(ents) != 1 {
				t.Errorf("%s holds %d entries after the repair, want only the copy", root, len(ents))
			}
		})
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func noCacheDir() (string, error) { return "", errors.New("no cache directory") }

// TestExtractRootWithoutCacheDir checks where the model goes when the
// platform has no user cache directory: a private directory of this
// user's, with an unpredictable name, reused by later runs, and never one
// someone else could have made first.
func TestExtractRootWithoutCacheDir(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("Unix ownership and modes")
	}
	tmp := t.TempDir()
	// What another user could make in a shared /tmp before kvq runs: the
	// predictable name, and look-alikes of a private directory.
	if err := os.Mkdir(filepath.Join(tmp, "kvq"), 0o777); err != nil {
		t.Fatal(err)
	}
	prefix := "kvq-" + strconv.Itoa(os.Getuid()) + "-"
	if err := os.Mkdir(filepath.Join(tmp, prefix+"open"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tmp, prefix+"open"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Chmod(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(tmp, prefix+"link")); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 { // root can make a directory that another user owns
		p := filepath.Join(tmp, prefix+"theirs")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	root, err := extractRoot(noCacheDir, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(root) != tmp {
		t.Fatalf("extractRoot = %s, want a directory directly under %s", root, tmp)
	}
	name := filepath.Base(root)
	if name == "kvq" || !strings.HasPrefix(name, prefix) || len(name) <= len(prefix) ||
		name == prefix+"open" || name == prefix+"link" || name == prefix+"theirs" {
		t.Errorf("extractRoot = %s: want a new kvq-<uid>-<random> directory, not a predictable or foreign one", root)
	}
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !private(fi) {
		t.Fatalf("extractRoot = %s: mode %v (%v), want a directory of mode 0700 owned by this user", root, fi.Mode(), err)
	}
	if again, err := extractRoot(noCacheDir, tmp); err != nil || again != root {
		t.Errorf("second extractRoot = %s, %v; want the same private directory %s", again, err, root)
	}
	dir, err := extract(testModel(), root, io.Discard)
	if err != nil || filepath.Dir(dir) != root {
		t.Fatalf("extract under %s = %s, %v", root, dir, err)
	}
	checkCopy(t, dir, testModel())

	// With a user cache directory, that is where the model goes.
	cache := t.TempDir()
	if got, err := extractRoot(func() (string, error) { return cache, nil }, tmp); err != nil || got != filepath.Join(cache, "kvq") {
		t.Errorf("extractRoot with a cache directory = %s, %v; want %s", got, err, filepath.Join(cache, "kvq"))
	}
}

// TestResolveModelWithoutHome runs the CLI's path with HOME and
// XDG_CACHE_HOME unset, where os.UserCacheDir fails on Linux.
func TestResolveModelWithoutHome(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("os.UserCacheDir reads HOME and XDG_CACHE_HOME on Linux")
	}
	tmp := t.TempDir()
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", tmp)
	if _, err := os.UserCacheDir(); err == nil {
		t.Skip("os.UserCacheDir works without HOME here")
	}
	var note bytes.Buffer
	dir, err := ResolveModel("", &note)
	if errors.Is(err, ErrNoDefaultModel) {
		t.Skip("this build has no built-in model")
	}
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(dir)
	fi, err := os.Lstat(root)
	if filepath.Dir(root) != tmp || err != nil || !private(fi) || root == filepath.Join(tmp, "kvq") {
		t.Errorf("built-in model extracted to %s (%v): want a private kvq-<uid>-* directory under %s", dir, err, tmp)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Error(err)
	}
}

// TestExtractUnwritableCache: a user cache directory that cannot be
// written (here a path under a regular file, which fails for root too)
// falls back to a private directory under tmp, with a note, instead of
// making the built-in model unusable.
func TestExtractUnwritableCache(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("Unix ownership and modes")
	}
	file := filepath.Join(t.TempDir(), "home-is-a-file")
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var note bytes.Buffer
	dir, err := extractBuiltin(testModel(), func() (string, error) { return filepath.Join(file, ".cache"), nil }, tmp, &note)
	if err != nil {
		t.Fatalf("extractBuiltin with an unwritable cache: %v", err)
	}
	root := filepath.Dir(dir)
	fi, err := os.Lstat(root)
	if filepath.Dir(root) != tmp || err != nil || !private(fi) {
		t.Errorf("extracted to %s (%v): want a private kvq-<uid>-* directory under %s", dir, err, tmp)
	}
	checkCopy(t, dir, testModel())
	if !strings.Contains(note.String(), "cannot extract the built-in model under "+filepath.Join(file, ".cache", "kvq")) || !strings.Contains(note.String(), root) {
		t.Errorf("note %q: want the unwritable directory and the one used", note.String())
	}
}
