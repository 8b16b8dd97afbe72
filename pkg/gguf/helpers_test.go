package gguf

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
)

// raw builds GGUF bytes field by field, straight from the spec, so tests can
// write files the Writer refuses to write.
type raw struct{ b []byte }

func header(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(version).u64(nTensors).u64(nKV)
}

func (r *raw) u8(x uint8) *raw   { r.b = append(r.b, x); return r }
func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { return r.u64(uint64(len(s))).bytes([]byte(s)) }
func (r *raw) bytes(p []byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// kv appends a key and a value type; the caller appends the value.
func (r *raw) kv(key string, t ValueType) *raw { return r.str(key).u32(uint32(t)) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, dims []uint64, t Type, off uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(t)).u64(off)
}

// pad appends zeros up to a multiple of a.
func (r *raw) pad(a int) *raw {
	for len(r.b)%a != 0 {
		r.b = append(r.b, 0)
	}
	return r
}

func (r *raw) zeros(n int) *raw { return r.bytes(make([]byte, n)) }

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

// modelDir returns the directory of the stories260K fixtures under ../shared
// beside the repository root. It skips the test when they are absent,
// except under CI=true, where their absence is a failure.
func modelDir(t *testing.T) string {
	t.Helper()
	return testutil.SharedPath(t, "models/stories260K")
}
