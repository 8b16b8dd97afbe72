package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
)

// nested returns the bytes of a metadata value of type array nested depth
// deep whose innermost array is an empty uint8 array.
func nested(r *raw, depth int) *raw {
	for range depth - 1 {
		r.u32(uint32(ValueArray)).u64(1)
	}
	return r.u32(uint32(ValueUint8)).u64(0)
}

func TestParseErrors(t *testing.T) {
	f32x8 := make([]byte, 32)
	tests := []struct {
		name   string
		data   []byte
		want   error  // nil: Parse must succeed
		off    int64  // want FormatError.Offset; -1 to skip
		detail string // substring of the error message
	}{
		{"valid minimal", header(3, 0, 0).b, nil, -1, ""},
		{"valid v2", header(2, 0, 0).b, nil, -1, ""},
		{"empty", nil, ErrTruncated, 0, "file is 0 bytes"},
		{"short magic", []byte("GG"), ErrTruncated, 0, ""},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), ErrBadMagic, 0, `"GGML"`},
		{"bad short magic", []byte("XY"), ErrBadMagic, 0, ""},
		{"no version", []byte("GGUF\x03"), ErrTruncated, 4, "need 4 bytes, 1 remain"},
		{"version 1", header(1, 0, 0).b, ErrUnsupportedVersion, 4, "32-bit counts"},
		{"version 4", header(4, 0, 0).b, ErrUnsupportedVersion, 4, "version 4"},
		{"version 0", header(0, 0, 0).b, ErrUnsupportedVersion, 4, "version 0"},
		{"big-endian", header(3<<24, 0, 0).b, ErrUnsupportedVersion, 4, "big-endian"},
		{"no tensor count", header(3, 0, 0).b[:12], ErrTruncated, 8, ""},
		{"no kv count", header(3, 0, 0).b[:20], ErrTruncated, 16, ""},

		// Counts and lengths beyond what the file can hold.
		{"huge kv count", header(3, 0, 1<<62).b, ErrTruncated, 16, "key/value pairs"},
		{"max kv count", header(3, 0, math.MaxUint64).b, ErrTruncated, 16, ""},
		{"kv count one too many", header(3, 0, 2).kv("a", ValueUint8).u8(1).b, ErrTruncated, 16, ""},
		{"huge tensor count", header(3, 1<<60, 0).b, ErrTruncated, 8, "tensor infos"},
		{"huge key length", header(3, 0, 1).u64(1 << 62).zeros(8).b, ErrTruncated, 24, "string length"},
		{"key runs past end", header(3, 0, 1).u64(9).bytes([]byte("abcdefgh")).u32(0).b, ErrTruncated, 41, "need 4 bytes, 3 remain"},
		{"huge string value", header(3, 0, 1).kv("a", ValueString).u64(1 << 40).b, ErrTruncated, 37, "string length"},
		{"huge uint64 array", header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueUint64)).u64(1 << 61).zeros(16).b, ErrTruncated, 41, "array of"},
		{"huge string array", header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueString)).u64(1 << 59).zeros(64).b, ErrTruncated, 41, "array of"},
		{"huge nested array", header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueArray)).u64(1 << 59).zeros(64).b, ErrTruncated, 41, "array of"},
		{"array element past end", header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueUint32)).u64(3).zeros(11).b, ErrTruncated, -1, ""},

		// Metadata values.
		{"unknown value type", header(3, 0, 1).kv("a", 13).u64(0).b, ErrUnknownType, 33, "value type 13"},
		{"unknown array element type", header(3, 0, 1).kv("a", ValueArray).u32(99).u64(0).b, ErrUnknownType, 37, "value type 99"},
		{"nesting at the limit", nested(header(3, 0, 1).kv("a", ValueArray), maxArrayDepth).b, nil, -1, ""},
		{"nesting too deep", nested(header(3, 0, 1).kv("a", ValueArray), maxArrayDepth+1).b, ErrCorrupt, 37 + 12*(maxArrayDepth-1), "nested"},
		{"bool 2", header(3, 0, 1).kv("a", ValueBool).u8(2).b, ErrCorrupt, 37, "bool byte is 2"},
		{"bool array element 5", header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueBool)).u64(3).u8(0).u8(1).u8(5).b, ErrCorrupt, 51, "element 2"},
		{"duplicate key", header(3, 0, 2).kv("a", ValueUint8).u8(1).kv("a", ValueUint8).u8(2).b, ErrDuplicate, 38, `"a"`},
		{"alignment not a power of two", header(3, 0, 1).kv(AlignmentKey, ValueUint32).u32(48).b, ErrAlignment, 53, "power of two"},
		{"alignment zero", header(3, 0, 1).kv(AlignmentKey, ValueUint32).u32(0).b, ErrAlignment, 53, ""},
		{"alignment not uint32", header(3, 0, 1).kv(AlignmentKey, ValueUint64).u64(32).b, ErrAlignment, 53, "uint64, want uint32"},

		// Tensor infos.
		{"retired tensor type 4", header(3, 1, 0).tensor("t", []uint64{32}, 4, 0).b, ErrUnknownType, 45, "type 4"},
		{"unknown tensor type", header(3, 1, 0).tensor("t", []uint64{1}, 1000, 0).b, ErrUnknownType, 45, "type 1000"},
		{"five dims", header(3, 1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, F32, 0).b, ErrBadShape, 33, "5 dimensions"},
		{"zero dim", header(3, 1, 0).tensor("t", []uint64{4, 0}, F32, 0).b, ErrBadShape, 33, "dimension 1 is zero"},
		{"element count overflow", header(3, 1, 0).tensor("t", []uint64{1 << 32, 1 << 32}, I8, 0).b, ErrBadShape, 33, "overflow"},
		{"byte count overflow", header(3, 1, 0).tensor("t", []uint64{1 << 62}, F32, 0).b, ErrBadShape, 33, "overflow"},
		{"dim above int64", header(3, 1, 0).tensor("t", []uint64{1 << 63}, I8, 0).b, ErrBadShape, 33, "overflow"},
		{"row not whole blocks", header(3, 1, 0).tensor("t", []uint64{16, 2}, Q40, 0).b, ErrBadShape, 33, "32-element blocks"},
		{"misaligned offset", header(3, 1, 0).tensor("t", []uint64{8}, F32, 16).pad(32).zeros(64).b, ErrAlignment, 49, "not a multiple"},
		{"data past end", header(3, 1, 0).tensor("t", []uint64{8}, F32, 0).pad(32).zeros(31).b, ErrTruncated, 49, "past the end"},
		{"no data section", header(3, 1, 0).tensor("t", []uint64{8}, F32, 0).b, ErrTruncated, 49, "past the end"},
		{"offset past end", header(3, 1, 0).tensor("t", []uint64{8}, F32, 1<<63).pad(32).bytes(f32x8).b, ErrTruncated, 49, "past the end"},
		{"max offset", header(3, 1, 0).tensor("t", []uint64{8}, F32, math.MaxUint64-31).pad(32).bytes(f32x8).b, ErrTruncated, 49, ""},
		{"duplicate tensor", header(3, 2, 0).tensor("t", []uint64{8}, F32, 0).tensor("t", []uint64{8}, F32, 32).pad(32).zeros(64).b, ErrDuplicate, 57, `"t"`},
		{"overlapping tensors", header(3, 2, 0).tensor("a", []uint64{16}, F32, 0).tensor("b", []uint64{8}, F32, 32).pad(32).zeros(96).b, ErrCorrupt, 82, "overlaps"},
		{"adjacent tensors", header(3, 2, 0).tensor("a", []uint64{16}, F32, 0).tensor("b", []uint64{8}, F32, 64).pad(32).zeros(96).b, nil, -1, ""},
		{"scalar tensor", header(3, 1, 0).tensor("s", nil, F32, 0).pad(32).zeros(4).b, nil, -1, ""},
		{"scalar of a block type", header(3, 1, 0).tensor("s", nil, Q80, 0).pad(32).zeros(34).b, ErrBadShape, 33, "blocks"},
		{"custom alignment", header(3, 2, 1).kv(AlignmentKey, ValueUint32).u32(8).
			tensor("a", []uint64{1}, F32, 0).tensor("b", []uint64{1}, F32, 8).pad(8).zeros(12).b, nil, -1, ""},
		{"custom alignment misaligned", header(3, 1, 1).kv(AlignmentKey, ValueUint32).u32(64).
			tensor("a", []uint64{1}, F32, 32).pad(64).zeros(64).b, ErrAlignment, -1, "alignment 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseBytes(tt.data)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse = %v, want success", err)
				}
				if f == nil {
					t.Fatal("Parse returned a nil File and no error")
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse error = %v, want %v", err, tt.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error %v (%T) is not a *FormatError", err, err)
			}
			if fe.Field == "" || fe.Detail == "" {
				t.Errorf("FormatError %+v lacks a field or detail", fe)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(tt.data)) {
				t.Errorf("FormatError.Offset = %d, outside the %d-byte file", fe.Offset, len(tt.data))
			}
			if tt.off >= 0 && fe.Offset != tt.off {
				t.Errorf("FormatError.Offset = %d, want %d (%v)", fe.Offset, tt.off, err)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not mention %q", err, tt.detail)
			}
			if f != nil {
				t.Errorf("Parse returned a File with the error")
			}
		})
	}
}

// sampleFile is a small valid file with metadata of several types and three
// tensors of different types.
func sampleFile(t testing.TB, version uint32) []byte {
	w := NewWriter(version)
	w.AddString("general.architecture", "llama")
	w.AddUint32("llama.block_count", 2)
	w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5)
	w.AddStrings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"})
	w.AddKV("nested", NestedArray(ArrayOf([]int16{1, -2}), ArrayOf([]bool{true})))
	add := func(name string, typ Type, dims []uint64) {
		_, size, err := tensorBytes(typ, dims)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + len(name))
		}
		if err := w.AddTensor(name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	add("token_embd.weight", F32, []uint64{8, 4})
	add("blk.0.attn_q.weight", Q80, []uint64{32, 3})
	add("output_norm.weight", F16, []uint64{7})
	return encode(t, w)
}

// Every proper prefix of a file that cuts into the header, metadata, tensor
// infos or tensor data fails with ErrTruncated.
func TestParseTruncatedAnywhere(t *testing.T) {
	full := sampleFile(t, 3)
	f, err := parseBytes(full)
	if err != nil {
		t.Fatal(err)
	}
	var end int64 // end of the last tensor's data
	for _, ti := range f.Tensors {
		end = max(end, ti.Offset+ti.Size)
	}
	for n := range len(full) {
		_, err := parseBytes(full[:n])
		if int64(n) >= end {
			if err != nil {
				t.Errorf("Parse(first %d of %d bytes) = %v; the data ends at %d", n, len(full), err, end)
			}
			continue
		}
		var fe *FormatError
		if !errors.Is(err, ErrTruncated) || !errors.As(err, &fe) {
			t.Fatalf("Parse(first %d of %d bytes) = %v, want a FormatError wrapping ErrTruncated", n, len(full), err)
		}
	}
}

// failingReader pretends to hold size bytes but ends after len(b).
type failingReader struct {
	b   []byte
	err error // returned once the read goes past b; nil means io.EOF
}

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, r.errOr()
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, r.errOr()
	}
	return n, nil
}

func (r failingReader) errOr() error {
	if r.err == nil {
		return io.EOF
	}
	return r.err
}

func TestParseReaderErrors(t *testing.T) {
	full := sampleFile(t, 3)
	cut := full[:100] // inside the metadata

	// A reader that ends before the declared size: the file is truncated.
	_, err := Parse(failingReader{b: cut}, int64(len(full)))
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("Parse(reader shorter than size) = %v, want ErrTruncated", err)
	}

	// Any other read error is passed on, wrapped, and is not a FormatError.
	errDisk := errors.New("disk on fire")
	_, err = Parse(failingReader{b: cut, err: errDisk}, int64(len(full)))
	var fe *FormatError
	if !errors.Is(err, errDisk) || errors.As(err, &fe) {
		t.Errorf("Parse(failing reader) = %v, want the reader's error, not a FormatError", err)
	}

	if _, err := Parse(bytes.NewReader(full), -1); err == nil {
		t.Error("Parse(size -1) succeeded")
	}
}

// countingReader counts ReadAt calls and bytes.
type countingReader struct {
	r            io.ReaderAt
	calls, bytes int64
	maxEnd       int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	n, err := c.r.ReadAt(p, off)
	c.bytes += int64(n)
	c.maxEnd = max(c.maxEnd, off+int64(n))
	return n, err
}

// Parse reads sequentially through its buffer: few calls, each byte once, and
// nothing of the tensor data beyond one buffer.
func TestParseReadsThroughBuffer(t *testing.T) {
	w := NewWriter(3)
	tokens := make([]string, 20000)
	for i := range tokens {
		tokens[i] = strings.Repeat("x", i%17)
	}
	w.AddStrings("tokenizer.ggml.tokens", tokens)
	scores := make([]float32, 30000)
	w.AddFloat32s("tokenizer.ggml.scores", scores)
	big := make([]byte, 1<<20)
	if err := w.AddTensor("big", I8, []uint64{1 << 20}, big); err != nil {
		t.Fatal(err)
	}
	data := encode(t, w)
	cr := &countingReader{r: bytes.NewReader(data)}
	f, err := Parse(cr, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	maxCalls := f.DataOffset/readBufSize + 2
	if cr.calls > maxCalls {
		t.Errorf("Parse made %d ReadAt calls for %d bytes of metadata, want at most %d", cr.calls, f.DataOffset, maxCalls)
	}
	if cr.bytes > f.DataOffset+readBufSize || cr.maxEnd > f.DataOffset+readBufSize {
		t.Errorf("Parse read %d bytes up to offset %d; metadata ends at %d", cr.bytes, cr.maxEnd, f.DataOffset)
	}
}

// Adversarial headers must not make Parse allocate in proportion to the
// counts they claim.
func TestParseAllocationBound(t *testing.T) {
	inputs := map[string][]byte{
		"kv count":     header(3, 0, 1<<40).zeros(64).b,
		"tensor count": header(3, 1<<40, 0).zeros(64).b,
		"string":       header(3, 0, 1).kv("a", ValueString).u64(1 << 40).zeros(64).b,
		"array":        header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueFloat64)).u64(1 << 37).zeros(64).b,
		"strings":      header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueString)).u64(1 << 37).zeros(64).b,
		"arrays":       header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueArray)).u64(1 << 37).zeros(64).b,
		"tensor dims":  header(3, 1, 0).tensor("t", []uint64{1 << 40, 1 << 20}, F32, 0).b,
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			allocated := allocatedBy(func() {
				if _, err := parseBytes(data); err == nil {
					t.Error("Parse succeeded")
				}
			})
			if allocated > 64<<10 {
				t.Errorf("Parse of a %d-byte file allocated %d bytes", len(data), allocated)
			}
		})
	}
}

// zerosReader is a huge file: its prefix, then zeros up to limit, then an
// error, as a damaged disk might give.
type zerosReader struct {
	prefix []byte
	limit  int64
}

var errBadSector = errors.New("bad sector")

func (z zerosReader) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		o := off + int64(i)
		switch {
		case o >= z.limit:
			return i, errBadSector
		case o < int64(len(z.prefix)):
			p[i] = z.prefix[o]
		default:
			p[i] = 0
		}
	}
	return len(p), nil
}

// A large file passes the count checks, yet Parse allocates in proportion to
// the bytes it actually reads, not to the counts it was given.
func TestParseAllocationBoundLargeFile(t *testing.T) {
	const size = 1 << 40 // a 1 TiB file
	const readable = 1 << 20
	inputs := map[string][]byte{
		"kv count":     header(3, 0, 1<<36).b,
		"tensor count": header(3, 1<<36, 0).b,
		"string":       header(3, 0, 1).kv("a", ValueString).u64(1 << 38).b,
		"bytes":        header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueUint8)).u64(1 << 38).b,
		"float64s":     header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueFloat64)).u64(1 << 36).b,
		"strings":      header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueString)).u64(1 << 36).b,
		"arrays":       header(3, 0, 1).kv("a", ValueArray).u32(uint32(ValueArray)).u64(1 << 36).b,
	}
	for name, prefix := range inputs {
		t.Run(name, func(t *testing.T) {
			var err error
			allocated := allocatedBy(func() {
				_, err = Parse(zerosReader{prefix: prefix, limit: readable}, size)
			})
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			// The worst case is an array of empty arrays: each 12 bytes read
			// become a 16-byte Value plus a boxed slice header, and append's
			// growth allocates a multiple of the final slice.
			if allocated > 32*readable {
				t.Errorf("Parse allocated %d bytes after reading at most %d (error %v)", allocated, readable, err)
			}
		})
	}
}

// allocatedBy returns the bytes allocated while f runs.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// BenchmarkParse parses the metadata of a file with a 32,000-token
// vocabulary, the size of Llama 2's.
func BenchmarkParse(b *testing.B) {
	w := NewWriter(3)
	w.AddString("general.architecture", "llama")
	tokens := make([]string, 32000)
	scores := make([]float32, len(tokens))
	types := make([]int32, len(tokens))
	for i := range tokens {
		tokens[i] = strings.Repeat("▁", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		scores[i] = -float32(i)
		types[i] = 1
	}
	w.AddStrings("tokenizer.ggml.tokens", tokens)
	w.AddFloat32s("tokenizer.ggml.scores", scores)
	w.AddInt32s("tokenizer.ggml.token_type", types)
	for i := range 200 {
		name := "blk." + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".weight"
		if err := w.AddTensor(name, F32, []uint64{8}, make([]byte, 32)); err != nil {
			b.Fatal(err)
		}
	}
	data := encode(b, w)
	f, err := parseBytes(data)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(f.DataOffset)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}
