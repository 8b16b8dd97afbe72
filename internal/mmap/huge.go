package mmap

import (
	"context"
	"io"
	"os"
)

// HugeMin is the smallest file Weights reads into huge pages: below it
// the file's pages fit the TLB well enough as they are.
const HugeMin = 64 << 20

// thpEnabled is Linux's transparent-huge-page switch, which hugePages
// reads there; a test points it elsewhere.
var thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// readChunk is how much Weights reads between looks at its context.
const readChunk = 64 << 20

// Weights opens a model file whose bytes are read as weights, over and
// over, one pass per decoded token. On Linux with transparent huge pages
// available (enabled "always" or "madvise"), a file of at least HugeMin
// bytes that fits in half of the memory the kernel reports available
// (MemAvailable) is read into anonymous memory advised for huge pages
// (MADV_HUGEPAGE) and 2 MiB-aligned, so that streaming it takes one TLB
// entry per 2 MiB instead of per 4 KiB page of a file mapping (a decode
// step of a 1B-shape F16 model 1.09–1.12× faster on an AMD Zen 4;
// docs/performance.md). Otherwise, and with mapOnly, the file is mapped
// in place as Open does. The read stops with ctx's error once ctx is
// done. File.Huge reports which it did.
func Weights(ctx context.Context, path string, mapOnly bool) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if mapOnly {
		return Open(path)
	}
	return withFile(path, func(fh *os.File, size int64) (*File, error) {
		if size < HugeMin || !hugePages() || size > availableMemory()/2 {
			return open(fh, path, size)
		}
		f, err := readHuge(ctx, fh, path, size)
		if f == nil && err == nil {
			return open(fh, path, size) // the anonymous mapping failed
		}
		return f, err
	})
}

// Huge reports whether f's bytes were read into huge pages (Weights)
// rather than mapped from the file or read into the Go heap.
func (f *File) Huge() bool { return f.huge }

// readInto fills data from fh in readChunk pieces, stopping with ctx's
// error once ctx is done.
func readInto(ctx context.Context, fh *os.File, path string, data []byte) error {
	for off := 0; off < len(data); off += readChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := io.ReadFull(fh, data[off:min(len(data), off+readChunk)]); err != nil {
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
	}
	return nil
}
