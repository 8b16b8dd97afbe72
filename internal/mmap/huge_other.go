//go:build !linux

package mmap

import (
	"context"
	"os"
)

// hugePages is false: only Linux's transparent huge pages are used.
func hugePages() bool { return false }

func availableMemory() int64 { return 0 }

func readHuge(ctx context.Context, fh *os.File, path string, size int64) (*File, error) {
	return nil, nil
}
