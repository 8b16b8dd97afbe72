package mmap

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// hugeAlign is the size of an x86-64 (and arm64 4 KiB-granule) transparent
// huge page: the anonymous mapping's bytes start at a multiple of it.
const hugeAlign = 2 << 20

// madvHugePage is MADV_HUGEPAGE (the syscall package does not name it).
const madvHugePage = 14

// hugePages reports whether an madvise(MADV_HUGEPAGE) region gets huge
// pages: the switch reads "[always]" or "[madvise]".
func hugePages() bool {
	b, err := os.ReadFile(thpEnabled)
	return err == nil && (bytes.Contains(b, []byte("[always]")) || bytes.Contains(b, []byte("[madvise]")))
}

// availableMemory is /proc/meminfo's MemAvailable in bytes (0 if unknown,
// which keeps Weights on the file mapping).
func availableMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := bytes.Fields(s.Bytes())
		if len(fs) >= 2 && string(fs[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(fs[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// readHuge reads the size bytes of fh into a private anonymous mapping,
// 2 MiB-aligned and advised for huge pages; nil, nil where the mapping
// cannot be made.
func readHuge(ctx context.Context, fh *os.File, path string, size int64) (*File, error) {
	if int64(int(size)) != size || size > 1<<62 {
		return nil, nil
	}
	mem, err := syscall.Mmap(-1, 0, int(size)+hugeAlign, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil
	}
	off := 0
	if a := int(uintptr(unsafe.Pointer(unsafe.SliceData(mem))) % hugeAlign); a != 0 {
		off = hugeAlign - a
	}
	data := mem[off : off+int(size) : off+int(size)]
	_ = syscall.Madvise(data, madvHugePage) // advice: without it the read still works
	if err := readInto(ctx, fh, path, data); err != nil {
		syscall.Munmap(mem)
		return nil, err
	}
	return &File{Data: data, name: path, huge: true, unmap: func() error { return syscall.Munmap(mem) }}, nil
}
