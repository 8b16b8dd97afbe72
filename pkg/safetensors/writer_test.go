package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name   string
		tensor string
		dtype  DType
		shape  []int64
		data   int // bytes of data
		want   error
		detail string
	}{
		{"unknown dtype", "a", "F3", []int64{1}, 1, ErrDType, `unknown dtype "F3"`},
		{"empty dtype", "a", "", []int64{1}, 1, ErrDType, "unknown dtype"},
		{"negative dimension", "a", U8, []int64{2, -1}, 0, ErrShape, "dimension 1 is negative"},
		{"element count overflow", "a", U8, []int64{1 << 32, 1 << 32}, 0, ErrShape, "overflows"},
		{"bit count overflow", "a", F64, []int64{1 << 61}, 0, ErrShape, "bits"},
		{"short data", "a", F32, []int64{2}, 7, ErrShape, "7 bytes of data, but F32 [2] needs 8"},
		{"long data", "a", F32, []int64{}, 5, ErrShape, "needs 4"},
		{"F4 odd count", "a", F4, []int64{3}, 2, ErrShape, "not a whole number of bytes"},
		{"reserved name", "__metadata__", U8, []int64{1}, 1, ErrHeader, "reserved"},
		{"invalid UTF-8 name", "a\xff", U8, []int64{1}, 1, ErrHeader, "UTF-8"},
		{"duplicate", "dup", U8, []int64{1}, 1, ErrDuplicate, `"dup" added twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter()
			if err := w.Add("dup", U8, []int64{1}, []byte{1}); err != nil {
				t.Fatal(err)
			}
			err := w.Add(tc.tensor, tc.dtype, tc.shape, make([]byte, tc.data))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("Add(%q, %q, %v, %d bytes) = %v, want %v with %q", tc.tensor, tc.dtype, tc.shape, tc.data, err, tc.want, tc.detail)
			}
			if again := w.Add("b", U8, []int64{1}, []byte{1}); again != err {
				t.Errorf("Add after an error = %v, want the first error %v", again, err)
			}
			if n, werr := w.WriteTo(io.Discard); werr != err || n != 0 {
				t.Errorf("WriteTo = %d, %v; want 0, %v", n, werr, err)
			}
		})
	}
}

func TestWriterMetadataError(t *testing.T) {
	w := NewWriter()
	w.SetMetadata("k", "\xff")
	if _, err := w.WriteTo(io.Discard); !errors.Is(err, ErrMetadata) {
		t.Errorf("WriteTo = %v, want ErrMetadata", err)
	}
}

// TestWriterBytes checks the exact bytes of a small file: metadata first,
// then tensors by decreasing element size, and the header padded with
// spaces to a multiple of 8 bytes.
func TestWriterBytes(t *testing.T) {
	w := NewWriter()
	w.SetMetadata("format", "pt")
	w.SetMetadata("a<b>", "x")
	shape := []int64{2}
	if err := w.Add("u", U8, shape, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	shape[0] = 99 // Add copied the shape
	if err := w.Add("h", F16, []int64{1}, []byte{3, 4}); err != nil {
		t.Fatal(err)
	}
	hdr := `{"__metadata__":{"a<b>":"x","format":"pt"},` +
		`"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},` +
		`"u":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	want = append(want, hdr...)
	want = append(want, 3, 4, 1, 2)
	if got := encode(t, w); !bytes.Equal(got, want) {
		t.Errorf("WriteTo wrote\n%q\nwant\n%q", got, want)
	}
}

func TestWriterEmpty(t *testing.T) {
	got := encode(t, NewWriter())
	want := append(binary.LittleEndian.AppendUint64(nil, 8), "{}      "...)
	if !bytes.Equal(got, want) {
		t.Errorf("empty file = %q, want %q", got, want)
	}
	if _, err := parseBytes(got); err != nil {
		t.Errorf("Parse(empty file) = %v", err)
	}
}

func TestWriterAlignment(t *testing.T) {
	w := NewWriter()
	for i, d := range []DType{I8, F32, F4, F64, BF16, U8, C64} {
		bits, _ := d.Bits()
		if err := w.Add(string(rune('a'+i)), d, []int64{2, 3}, make([]byte, 6*bits/8)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := parseBytes(encode(t, w))
	if err != nil {
		t.Fatal(err)
	}
	var order []DType
	for _, ti := range f.Tensors {
		order = append(order, ti.DType)
		if size, ok := ti.DType.Size(); ok && ti.Offset%int64(size) != 0 {
			t.Errorf("tensor %q (%s) at offset %d", ti.Name, ti.DType, ti.Offset)
		}
	}
	want := []DType{F64, C64, F32, BF16, I8, U8, F4}
	if !slices.Equal(order, want) {
		t.Errorf("layout order %v, want %v", order, want)
	}
}

// limitWriter accepts n bytes, then fails.
type limitWriter struct{ n int }

var errFull = errors.New("full")

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriterWriteError(t *testing.T) {
	w := NewWriter()
	if err := w.Add("a", U8, []int64{4}, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	full := int64(len(encode(t, w)))
	for _, limit := range []int{0, 5, 8, 20, int(full) - 1} {
		n, err := w.WriteTo(&limitWriter{limit})
		if !errors.Is(err, errFull) || n != int64(limit) {
			t.Errorf("WriteTo(writer full after %d) = %d, %v; want %d, %v", limit, n, err, limit, errFull)
		}
	}
}
