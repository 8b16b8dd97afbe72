// Package atomicfile writes files so that readers see either the old file or
// the complete new one: the content goes to a temporary file in the same
// directory, which is synced and renamed over the target.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Write creates path with the bytes write produces. On any error the target
// is left untouched and the temporary file removed. Errors name path, never
// the temporary file, which the caller knows nothing of.
func Write(path string, write func(io.Writer) error) (err error) {
	pattern := "." + filepath.Base(path) + ".tmp*"
	f, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		// The error names a random temporary name: say the target instead.
		var pe *os.PathError
		if errors.As(err, &pe) {
			return &os.PathError{Op: "create", Path: path, Err: pe.Err}
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = named(err, tmp, path)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// named makes err about the temporary file tmp an error about path.
func named(err error, tmp, path string) error {
	var le *os.LinkError
	if errors.As(err, &le) && le.Old == tmp {
		return &os.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == tmp && err == error(pe) {
		return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	if strings.Contains(err.Error(), tmp) {
		return &renamed{msg: strings.ReplaceAll(err.Error(), tmp, path), err: err}
	}
	if !strings.Contains(err.Error(), path) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// renamed is an error whose message names the target instead of the
// temporary file; errors.Is and As see the original.
type renamed struct {
	msg string
	err error
}

func (r *renamed) Error() string { return r.msg }
func (r *renamed) Unwrap() error { return r.err }
