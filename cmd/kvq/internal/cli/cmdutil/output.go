package cmdutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckOutputFile checks, before any work, that the file the flag names
// can be written when the work is done: its directory exists and takes a
// new file, and the path is not a directory. It leaves nothing behind.
// Errors are usage errors naming the flag and the user's path.
func CheckOutputFile(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return FlagErrorf("%s %s: is a directory", flag, path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return FlagErrorf("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return FlagErrorf("%s %s: %v", flag, path, cause(err))
	case !st.IsDir():
		return FlagErrorf("%s %s: %s is not a directory", flag, path, dir)
	}
	if err := probe(dir); err != nil {
		return FlagErrorf("%s %s: directory %s is not writable (%v)", flag, path, dir, err)
	}
	return nil
}

// CheckOutputDir checks, before any work, that the directory the flag
// names can be written when the work is done: it is a writable directory,
// or it does not exist yet and its nearest existing parent is one (the
// command creates it when it writes). It leaves nothing behind.
func CheckOutputDir(flag, path string) error {
	if path == "" {
		return nil
	}
	p := filepath.Clean(path)
	for {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			if p == filepath.Clean(path) {
				return FlagErrorf("%s %s: not a directory", flag, path)
			}
			return FlagErrorf("%s %s: %s is not a directory", flag, path, p)
		case err == nil:
			if err := probe(p); err != nil {
				return FlagErrorf("%s %s: directory %s is not writable (%v)", flag, path, p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return FlagErrorf("%s %s: %v", flag, path, cause(err))
		}
		// Missing, or below a file: look at the parent.
		parent := filepath.Dir(p)
		if parent == p {
			return FlagErrorf("%s %s: no existing parent directory", flag, path)
		}
		p = parent
	}
}

// probe creates and removes a file in dir.
func probe(dir string) error {
	f, err := os.CreateTemp(dir, ".kvq-write-check-*")
	if err != nil {
		return cause(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// cause is the reason of a path error, without the (temporary) path.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
