//go:build unix

package mmap

import (
	"io"
	"os"
	"syscall"
)

var errEOF = io.ErrUnexpectedEOF

func open(fh *os.File, path string, size int64) (*File, error) {
	if size == 0 {
		return &File{name: path}, nil
	}
	if int64(int(size)) != size {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: syscall.EFBIG}
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readAll(fh, path, size)
	}
	return &File{Data: data, name: path, unmap: func() error { return syscall.Munmap(data) }}, nil
}

func readAll(fh *os.File, path string, size int64) (*File, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return &File{Data: data, name: path}, nil
}
