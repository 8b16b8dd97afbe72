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

	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// ErrNoDefaultModel reports that --model was omitted and the binary carries
// no built-in model.
var ErrNoDefaultModel = errors.New("no --model given, and this kvq build has no built-in model (train one with make probe-model)")

// ResolveModel returns path, or, when it is empty, the built-in probe model
// extracted to the user cache directory, saying so on errOut.
func ResolveModel(path string, errOut io.Writer) (string, error) {
	if path != "" {
		return path, nil
	}
	fsys, ok := models.ProbeModel()
	if !ok {
		return "", &FlagError{Err: ErrNoDefaultModel}
	}
	dir, err := extract(fsys)
	if err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	fmt.Fprintf(errOut, "kvq: no --model given; using the built-in %s model (%s)\n", models.ProbeModelName, dir)
	return dir, nil
}

// extract copies the model into <user cache>/kvq/<name>-<content hash>,
// once: a complete copy is made in a temporary directory and renamed.
func extract(fsys fs.FS) (string, error) {
	h := sha256.New()
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		names = append(names, p)
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	root := filepath.Join(base, "kvq")
	dir := filepath.Join(root, models.ProbeModelName+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".extract-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, p := range names {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(p)), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, p), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "config.json")); serr == nil {
			return dir, nil // another process extracted it first
		}
		return "", err
	}
	return dir, nil
}

// LoadModel resolves path (the built-in model when empty) and loads it. File
// problems — missing, malformed, unsupported — are usage errors (exit 2).
func LoadModel(ctx context.Context, path, tokenizer string, errOut io.Writer) (*runtime.Model, error) {
	path, err := ResolveModel(path, errOut)
	if err != nil {
		return nil, err
	}
	m, err := runtime.Load(ctx, path, runtime.LoadOptions{Tokenizer: tokenizer})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, runtime.ErrFormat) || errors.Is(err, runtime.ErrModel) || errors.Is(err, runtime.ErrUnsupported) {
			return nil, UsageError(err)
		}
		return nil, err
	}
	return m, nil
}
