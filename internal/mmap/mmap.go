// Package mmap opens files for reading, memory-mapped where the platform
// allows it, so that model weights can be used in place without copying;
// Weights reads a large model file into transparent huge pages instead
// where the machine has them and the memory to spare.
package mmap

import (
	"fmt"
	"os"
)

// File is a read-only view of a whole file.
type File struct {
	Data  []byte
	name  string
	huge  bool // read into huge pages (Weights)
	unmap func() error
}

// Name is the path the file was opened with.
func (f *File) Name() string { return f.name }

// Size is the file length.
func (f *File) Size() int64 { return int64(len(f.Data)) }

// ReadAt implements io.ReaderAt.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(f.Data)) {
		return 0, fmt.Errorf("mmap: %s: offset %d outside file of %d bytes", f.name, off, len(f.Data))
	}
	n := copy(p, f.Data[off:])
	if n < len(p) {
		return n, fmt.Errorf("mmap: %s: read %d bytes at %d: %w", f.name, len(p), off, errEOF)
	}
	return n, nil
}

// Close releases the mapping. Slices of Data must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	f.Data = nil
	return u()
}

// Open maps path read-only.
func Open(path string) (*File, error) {
	return withFile(path, func(fh *os.File, size int64) (*File, error) { return open(fh, path, size) })
}

// withFile opens path, refuses a directory, and returns what use makes of
// the open file and its size (the file is closed afterwards: a mapping or
// a copy outlives it).
func withFile(path string, use func(fh *os.File, size int64) (*File, error)) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	return use(fh, st.Size())
}
