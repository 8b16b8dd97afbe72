package cmdutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// ErrNoDefaultModel reports that --model was omitted and the binary carries
// no built-in model.
var ErrNoDefaultModel = errors.New("no --model given, and this kvq build has no built-in model (train one with make probe-model)")

// ResolveModel returns path, or, when it is empty, the built-in probe model
// extracted to disk (see extract), saying so on errOut.
func ResolveModel(path string, errOut io.Writer) (string, error) {
	if path != "" {
		return path, nil
	}
	fsys, ok := models.ProbeModel()
	if !ok {
		return "", &FlagError{Err: ErrNoDefaultModel}
	}
	dir, err := extractBuiltin(fsys, os.UserCacheDir, os.TempDir(), errOut)
	if err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	fmt.Fprintf(errOut, "kvq: no --model given; using the built-in %s model (%s)\n", models.ProbeModelName, dir)
	return dir, nil
}

// extractBuiltin extracts fsys under extractRoot, or, when that cannot be
// written (a read-only HOME, a full disk), under a private directory of
// tmp, saying so on errOut: an unwritable cache does not make the built-in
// model unusable.
func extractBuiltin(fsys fs.FS, userCacheDir func() (string, error), tmp string, errOut io.Writer) (string, error) {
	root, err := extractRoot(userCacheDir, tmp)
	if err == nil {
		var dir string
		if dir, err = extract(fsys, root, errOut); err == nil {
			return dir, nil
		}
	}
	priv, terr := privateTempDir(tmp)
	if terr != nil || priv == root {
		return "", err
	}
	fmt.Fprintf(errOut, "kvq: cannot extract the built-in model under %s (%v); using %s\n", root, err, priv)
	return extract(fsys, priv, errOut)
}

// extractRoot returns the directory the built-in model is extracted under:
// <user cache>/kvq, or, where the platform gives no user cache directory
// (on Unix: neither $XDG_CACHE_HOME nor $HOME set), a private directory of
// this user's under tmp (see privateTempDir).
func extractRoot(userCacheDir func() (string, error), tmp string) (string, error) {
	if base, err := userCacheDir(); err == nil {
		return filepath.Join(base, "kvq"), nil
	}
	return privateTempDir(tmp)
}

// privateTempDir returns a directory under tmp that only this user can
// use: one it made before (named kvq-<uid>-<random>, a directory and not a
// link, owned by this user, mode 0700), else a new one made by
// os.MkdirTemp, which creates it 0700 under an unpredictable name. A
// predictable path such as /tmp/kvq could be made first by another user,
// who would then own the model kvq runs; a look-alike made by someone else
// fails the owner and mode checks and is passed over.
func privateTempDir(tmp string) (string, error) {
	prefix := fmt.Sprintf("kvq-%d-", os.Getuid())
	if ents, err := os.ReadDir(tmp); err == nil {
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			p := filepath.Join(tmp, e.Name())
			if fi, err := os.Lstat(p); err == nil && privateDir(fi) {
				return p, nil
			}
		}
	}
	return os.MkdirTemp(tmp, prefix)
}

// privateDir reports whether fi (from Lstat) is a real directory, not a
// link, of this user's that no one else may read, write or enter.
func privateDir(fi fs.FileInfo) bool {
	return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 && private(fi)
}

// embedded is one file of the built-in model.
type embedded struct {
	name string // slash-separated
	data []byte
	sum  [sha256.Size]byte
}

// extract copies the model into root/<name>-<content hash> and returns that
// directory. A copy already there is used only if it holds exactly the
// embedded files (regular files, each with the embedded SHA-256); anything
// else — a file changed, truncated, missing, replaced by a link, or one
// added — is reported on errOut and the copy is made again. A copy is
// written in full to a temporary directory and renamed into place, so
// that a reader never sees a partial one.
func extract(fsys fs.FS, root string, errOut io.Writer) (string, error) {
	h := sha256.New()
	var files []embedded
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, embedded{name: p, data: b, sum: sha256.Sum256(b)})
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, models.ProbeModelName+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	bad := verify(dir, files)
	if bad == nil {
		return dir, nil
	}
	if exists(dir) {
		fmt.Fprintf(errOut, "kvq: the extracted built-in model at %s is damaged (%v); extracting it again\n", dir, bad)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".extract-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return "", err
		}
	}
	if exists(dir) { // a damaged copy: move it aside, then replace it
		trash, err := os.MkdirTemp(root, ".damaged-*")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(trash)
		if err := os.Rename(dir, filepath.Join(trash, "copy")); err != nil && exists(dir) {
			return "", fmt.Errorf("replacing the damaged copy: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if verify(dir, files) == nil {
			return dir, nil // another process extracted it first
		}
		return "", err
	}
	return dir, nil
}

// verify reports how dir differs from the embedded files: nil when it
// holds exactly them, as regular files with the same SHA-256.
func verify(dir string, files []embedded) error {
	want := make(map[string]embedded, len(files))
	for _, f := range files {
		want[f.name] = f
	}
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			return nil
		}
		f, ok := want[name]
		switch {
		case !ok:
			return fmt.Errorf("unexpected file %s", name)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", name)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if sha256.Sum256(b) != f.sum {
			return fmt.Errorf("%s has SHA-256 %x, want %x", name, sha256.Sum256(b), f.sum)
		}
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(files) {
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.name))); err != nil {
				return fmt.Errorf("%s is missing", f.name)
			}
		}
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// LoadModel resolves path (the built-in model when empty) and loads it with
// opts. File problems — missing, malformed, unsupported — are input errors
// (exit 2), as runtime.Load returns them.
func LoadModel(ctx context.Context, path string, opts runtime.LoadOptions, errOut io.Writer) (*runtime.Model, error) {
	path, err := ResolveModel(path, errOut)
	if err != nil {
		return nil, err
	}
	return runtime.Load(ctx, path, opts)
}
