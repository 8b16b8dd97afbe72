//go:build !unix

package mmap

import (
	"io"
	"os"
)

var errEOF = io.ErrUnexpectedEOF

func open(fh *os.File, path string, size int64) (*File, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return &File{Data: data, name: path}, nil
}
