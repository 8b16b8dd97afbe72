package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strconv"
	"testing"
)

// raw returns a file with the given header text, taken as is (no padding),
// followed by n bytes of data, so tests can write headers the Writer refuses
// to write.
func raw(header string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

// encode returns w's output, failing the test on error.
func encode(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

func parseBytes(b []byte) (*File, error) { return Parse(bytes.NewReader(b), int64(len(b))) }

// allocatedBy returns the bytes f allocates.
//
// TotalAlloc counts the whole process, so the least of three runs is taken:
// a goroutine of the test framework or a finished test allocating meanwhile
// inflates one run, not all three.
func allocatedBy(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// sequence returns n bytes 1, 2, 3, ... (mod 256), so data misplaced by the
// writer or parser shows.
func sequence(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
