//go:build !unix

package cmdutil

import "io/fs"

// private reports whether no one but this process's user may use the file.
// Off Unix (Windows) the temporary directory is already per user, under
// the user's profile, and permission bits say nothing, so every file there
// counts as private.
func private(fs.FileInfo) bool { return true }
