//go:build unix

package cmdutil

import (
	"io/fs"
	"os"
	"syscall"
)

// private reports whether this process's user owns the file and it has
// mode 0700: no one else may read, write or enter it.
func private(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid() && fi.Mode().Perm() == 0o700
}
