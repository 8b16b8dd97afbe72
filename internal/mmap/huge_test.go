package mmap

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"
)

// writeFile writes n bytes of a position-dependent pattern to a new file.
func writeFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>13)
	}
	p := filepath.Join(t.TempDir(), "w.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestWeights: a file of HugeMin bytes or more is read into 2 MiB-aligned
// huge-page memory where the kernel has transparent huge pages and the
// memory to spare (mapped otherwise), byte for byte the file; mapOnly and a
// smaller file map it; the switch off maps it; a done context stops it.
func TestWeights(t *testing.T) {
	ctx := context.Background()
	p, want := writeFile(t, HugeMin+12345)
	canHuge := runtime.GOOS == "linux" && hugePages() && availableMemory()/2 >= int64(len(want))
	f, err := Weights(ctx, p, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.Huge() != canHuge {
		t.Errorf("Huge() = %v, want %v (Linux with transparent huge pages and the memory)", f.Huge(), canHuge)
	}
	if !bytes.Equal(f.Data, want) {
		t.Fatal("Weights' bytes differ from the file's")
	}
	if f.Huge() {
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(f.Data))) % (2 << 20); a != 0 {
			t.Errorf("huge-page data starts %d bytes past a 2 MiB boundary", a)
		}
	}
	if err := f.Close(); err != nil || f.Data != nil {
		t.Fatalf("Close: %v, Data %d bytes", err, len(f.Data))
	}

	m, err := Weights(ctx, p, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.Huge() || !bytes.Equal(m.Data, want) {
		t.Errorf("mapOnly: Huge() = %v, bytes equal %v; want false, true", m.Huge(), bytes.Equal(m.Data, want))
	}
	m.Close()

	small, wantSmall := writeFile(t, HugeMin-1)
	s, err := Weights(ctx, small, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Huge() || !bytes.Equal(s.Data, wantSmall) {
		t.Errorf("file under HugeMin: Huge() = %v, bytes equal %v; want false, true", s.Huge(), bytes.Equal(s.Data, wantSmall))
	}
	s.Close()

	off := filepath.Join(t.TempDir(), "enabled")
	os.WriteFile(off, []byte("always madvise [never]\n"), 0o644)
	old := thpEnabled
	thpEnabled = off
	o, err := Weights(ctx, p, false)
	thpEnabled = old
	if err != nil {
		t.Fatal(err)
	}
	if o.Huge() {
		t.Error("huge pages switched off: Weights still read into huge pages")
	}
	o.Close()

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Weights(done, p, false); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v, want context.Canceled", err)
	}
	if _, err := Weights(ctx, filepath.Join(t.TempDir(), "missing.gguf"), false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := Weights(ctx, t.TempDir(), false); err == nil {
		t.Error("a directory: no error")
	}
}

// TestReadHugeCanceled: a context done during the read stops it with the
// context's error (readInto looks at it between chunks).
func TestReadHugeCanceled(t *testing.T) {
	p, _ := writeFile(t, 2*readChunk+1)
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := make([]byte, 2*readChunk+1)
	if err := readInto(ctx, fh, p, data); !errors.Is(err, context.Canceled) {
		t.Errorf("readInto with a done context: %v, want context.Canceled", err)
	}
	if err := readInto(context.Background(), fh, p, data); err != nil {
		t.Fatal(err)
	}
	short := make([]byte, 3*readChunk)
	fh.Seek(0, 0)
	if err := readInto(context.Background(), fh, p, short); err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
		t.Errorf("file shorter than the buffer: %v, want an error naming %s", err, p)
	}
}
