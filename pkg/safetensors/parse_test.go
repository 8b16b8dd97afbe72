package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTripDTypes(t *testing.T) {
	for _, d := range DTypes() {
		t.Run(string(d), func(t *testing.T) {
			bits, _ := d.Bits()
			shape := []int64{2, 4} // 8 elements: a whole number of bytes for every dtype
			data := sequence(bits, 7)
			w := NewWriter()
			if err := w.Add("w", d, shape, data); err != nil {
				t.Fatalf("Add(w, %s, %v, %d bytes) = %v", d, shape, len(data), err)
			}
			b := encode(t, w)
			f, err := parseBytes(b)
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			want := TensorInfo{Name: "w", DType: d, Shape: shape, Offset: f.DataOffset, Size: int64(bits)}
			if got, _ := f.Tensor("w"); !reflect.DeepEqual(got, want) {
				t.Errorf("Tensor(w) = %+v, want %+v", got, want)
			}
			if got := b[f.DataOffset:]; !bytes.Equal(got, data) {
				t.Errorf("data = %v, want %v", got, data)
			}
		})
	}
}

func TestRoundTripFile(t *testing.T) {
	w := NewWriter()
	w.SetMetadata("format", "pt")
	w.SetMetadata("note", "quote \" backslash \\ newline \n <&> ünï")
	tensors := []struct {
		name  string
		dtype DType
		shape []int64
	}{
		{"model.embed.weight", F16, []int64{3, 4}},
		{"scalar", I64, []int64{}},
		{"empty", F32, []int64{0, 5}},
		{"mask", Bool, []int64{3}},
		{"lm_head.weight", BF16, []int64{4, 3}},
		{"scale", F8E8M0, []int64{1}},
		{"tricky \"name\"/with:stuff", F64, []int64{1, 1, 1}},
		{"", U8, []int64{2}},
	}
	want := map[string][]byte{}
	for i, tc := range tensors {
		size, _ := byteSize(tc.dtype, tc.shape)
		data := sequence(int(size), byte(16*i))
		want[tc.name] = data
		if err := w.Add(tc.name, tc.dtype, tc.shape, data); err != nil {
			t.Fatalf("Add(%q) = %v", tc.name, err)
		}
	}
	b := encode(t, w)
	f, err := parseBytes(b)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if wantMeta := map[string]string{"format": "pt", "note": "quote \" backslash \\ newline \n <&> ünï"}; !maps.Equal(f.Metadata, wantMeta) {
		t.Errorf("Metadata = %q, want %q", f.Metadata, wantMeta)
	}
	if (f.DataOffset-8)%8 != 0 || f.DataOffset%8 != 0 {
		t.Errorf("DataOffset = %d, want a multiple of 8", f.DataOffset)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(tensors))
	}
	at := f.DataOffset
	for i, ti := range f.Tensors {
		if ti.Offset != at {
			t.Errorf("Tensors[%d] %q at %d, want %d (sorted and contiguous)", i, ti.Name, ti.Offset, at)
		}
		at = ti.Offset + ti.Size
		if got := b[ti.Offset : ti.Offset+ti.Size]; !bytes.Equal(got, want[ti.Name]) {
			t.Errorf("data of %q = %v, want %v", ti.Name, got, want[ti.Name])
		}
		if bytes, _ := ti.DType.Size(); ti.Offset%int64(bytes) != 0 {
			t.Errorf("tensor %q (%s) at %d is not aligned to its element size", ti.Name, ti.DType, ti.Offset)
		}
	}
	if at != int64(len(b)) {
		t.Errorf("tensors end at %d, file is %d bytes", at, len(b))
	}
	for _, tc := range tensors {
		ti, ok := f.Tensor(tc.name)
		if !ok || ti.DType != tc.dtype || !reflect.DeepEqual(ti.Shape, tc.shape) {
			t.Errorf("Tensor(%q) = %+v, %v; want dtype %s shape %v", tc.name, ti, ok, tc.dtype, tc.shape)
		}
	}
	if ti, _ := f.Tensor("scalar"); ti.NumElements() != 1 || ti.Size != 8 {
		t.Errorf("scalar: NumElements = %d, Size = %d; want 1, 8", ti.NumElements(), ti.Size)
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Error("Tensor(missing) found a tensor")
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name   string
		data   []byte
		meta   map[string]string
		sorted []string // tensor names in offset order
	}{
		{"empty", raw(`{}`, 0), nil, nil},
		{"padded", raw(`{}      `, 0), nil, nil},
		{"whitespace inside", raw("{ \"a\" :\n\t{\"dtype\":\"U8\" , \"shape\":[ 1 ],\"data_offsets\":[0,1]}\r\n}", 1), nil, []string{"a"}},
		{"null metadata", raw(`{"__metadata__":null}`, 0), nil, nil},
		{"empty metadata", raw(`{"__metadata__":{}}`, 0), map[string]string{}, nil},
		{"metadata last", raw(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]},"__metadata__":{"k":"v"}}`, 1), map[string]string{"k": "v"}, []string{"a"}},
		{"unknown tensor key", raw(`{"a":{"x":[{"y":[1,{}]}],"dtype":"U8","shape":[],"data_offsets":[0,1]}}`, 1), nil, []string{"a"}},
		{"header order differs from data order",
			raw(`{"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`, 3), nil, []string{"a", "b"}},
		{"zero-size tensors share an offset",
			raw(`{"z2":{"dtype":"F32","shape":[0],"data_offsets":[1,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"z1":{"dtype":"I64","shape":[3,0],"data_offsets":[1,1]}}`, 1),
			nil, []string{"a", "z1", "z2"}},
		{"zero dimension after huge ones", raw(`{"a":{"dtype":"F64","shape":[4611686018427387904,4611686018427387904,0],"data_offsets":[0,0]}}`, 0), nil, []string{"a"}},
		{"F4 packs two per byte", raw(`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, 3), nil, []string{"a"}},
		{"F6 packs four per three bytes", raw(`{"a":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}}`, 3), nil, []string{"a"}},
		{"escaped name", raw(`{"a\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), nil, []string{"aé\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.data)
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			if !maps.Equal(f.Metadata, tc.meta) || (f.Metadata == nil) != (tc.meta == nil) {
				t.Errorf("Metadata = %#v, want %#v", f.Metadata, tc.meta)
			}
			var names []string
			for _, ti := range f.Tensors {
				names = append(names, ti.Name)
			}
			if !reflect.DeepEqual(names, tc.sorted) {
				t.Errorf("tensors = %q, want %q", names, tc.sorted)
			}
		})
	}
}

// u8 is the entry of a one-byte-per-element tensor.
func u8(shape string, begin, end int) string {
	return fmt.Sprintf(`{"dtype":"U8","shape":%s,"data_offsets":[%d,%d]}`, shape, begin, end)
}

func TestParseErrors(t *testing.T) {
	type want struct {
		err       error
		off       int64 // FormatError.Offset; -1 to skip
		line, col int   // 0, 0: not inside the JSON (checked only when off >= 0)
		tensor    string
		detail    string // substring of Detail
	}
	hugeLen := func(n uint64) []byte {
		b := raw(`{}`, 0)
		binary.LittleEndian.PutUint64(b, n)
		return b
	}
	tests := []struct {
		name string
		data []byte
		want want
	}{
		// The header length.
		{"empty file", nil, want{ErrTruncated, 0, 0, 0, "", "0 bytes"}},
		{"7 bytes", make([]byte, 7), want{ErrTruncated, 0, 0, 0, "", "7 bytes"}},
		{"length past end", raw(`{}`, 0)[:9], want{ErrTruncated, 0, 0, 0, "", "header length 2 exceeds the 1 bytes"}},
		{"length above cap", hugeLen(MaxHeaderSize + 1), want{ErrHeader, 0, 0, 0, "", "limit"}},
		{"length 2^64-1", hugeLen(1<<64 - 1), want{ErrHeader, 0, 0, 0, "", "limit"}},
		{"length at cap, file short", hugeLen(MaxHeaderSize), want{ErrTruncated, 0, 0, 0, "", "exceeds the 2 bytes"}},
		{"length 0", raw(``, 0), want{ErrHeader, 0, 0, 0, "", "too short"}},
		{"length 1", raw(`{`, 0), want{ErrHeader, 0, 0, 0, "", "too short"}},

		// The JSON.
		{"array header", raw(`[{}]`, 0), want{ErrHeader, 8, 1, 1, "", "want a JSON object"}},
		{"leading space", raw(` {}`, 0), want{ErrHeader, 8, 1, 1, "", `' '`}},
		{"syntax error", raw(`{"a":}`, 0), want{ErrJSON, 8 + 5, 1, 6, "", "invalid character '}'"}},
		{"syntax error on line 3", raw("{\n  \"a\": {\n    \"dtype\" \"F32\"}}", 0), want{ErrJSON, 8 + 23, 3, 13, "", "after object key"}},
		{"column counts characters", raw("{\"é\":x}", 0), want{ErrJSON, 8 + 6, 1, 6, "", "invalid character 'x'"}},
		{"unclosed object", raw(`{"a":{}`, 0), want{ErrJSON, -1, 0, 0, "", "unexpected end"}},
		{"trailing garbage", raw(`{} x`, 0), want{ErrJSON, 8 + 3, 1, 4, "", "after top-level value"}},
		{"NUL padding", raw("{}\x00\x00", 0), want{ErrJSON, 8 + 2, 1, 3, "", ""}},
		{"invalid UTF-8", raw("{\"a\xff\":1}", 0), want{ErrJSON, 8 + 3, 1, 4, "", "UTF-8 byte 0xff"}},
		{"trailing comma", raw(`{"a":1,}`, 0), want{ErrJSON, 8 + 7, 1, 8, "", ""}},

		// Entries.
		{"entry not an object", raw(`{"a":1}`, 0), want{ErrHeader, 8 + 5, 1, 6, "a", "the number 1"}},
		{"entry is null", raw(`{"a":null}`, 0), want{ErrHeader, 8 + 5, 1, 6, "a", "null"}},
		{"unknown dtype", raw(`{"a":{"dtype":"F3","shape":[],"data_offsets":[0,1]}}`, 1), want{ErrDType, 8 + 14, 1, 15, "a", `unknown dtype "F3"`}},
		{"lower-case dtype", raw(`{"a":{"dtype":"f32","shape":[],"data_offsets":[0,4]}}`, 4), want{ErrDType, -1, 0, 0, "a", `"f32"`}},
		{"dtype not a string", raw(`{"a":{"dtype":4,"shape":[],"data_offsets":[0,1]}}`, 1), want{ErrDType, 8 + 14, 1, 15, "a", "the number 4"}},
		{"no dtype", raw(`{"a":{"shape":[],"data_offsets":[0,1]}}`, 1), want{ErrDType, 8 + 5, 1, 6, "a", "no dtype"}},
		{"no shape", raw(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 1), want{ErrShape, 8 + 5, 1, 6, "a", "no shape"}},
		{"no data_offsets", raw(`{"a":{"dtype":"U8","shape":[]}}`, 1), want{ErrOffsets, 8 + 5, 1, 6, "a", "no data_offsets"}},

		// Shapes.
		{"shape not an array", raw(`{"a":`+u8(`3`, 0, 3)+`}`, 3), want{ErrShape, 8 + 27, 1, 28, "a", "the number 3, want an array"}},
		{"negative dimension", raw(`{"a":`+u8(`[2,-1]`, 0, 0)+`}`, 0), want{ErrShape, 8 + 30, 1, 31, "a", "shape[1] is the number -1, which is negative"}},
		{"fractional dimension", raw(`{"a":`+u8(`[1.5]`, 0, 1)+`}`, 1), want{ErrShape, -1, 0, 0, "a", "shape[0] is the number 1.5"}},
		{"exponent dimension", raw(`{"a":`+u8(`[1e1]`, 0, 10)+`}`, 10), want{ErrShape, -1, 0, 0, "a", "1e1"}},
		{"dimension above int64", raw(`{"a":`+u8(`[9223372036854775808]`, 0, 1)+`}`, 1), want{ErrShape, -1, 0, 0, "a", "overflows int64"}},
		{"dimension below int64", raw(`{"a":`+u8(`[-9223372036854775809]`, 0, 1)+`}`, 1), want{ErrShape, -1, 0, 0, "a", "negative"}},
		{"nested dimension", raw(`{"a":`+u8(`[[1]]`, 0, 1)+`}`, 1), want{ErrShape, -1, 0, 0, "a", "an array, want"}},
		{"element count overflow", raw(`{"a":`+u8(`[4294967296,4294967296,4294967296]`, 0, 0)+`}`, 0), want{ErrShape, 8 + 5, 1, 6, "a", "element count"}},
		{"bit count overflow", raw(`{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0), want{ErrShape, 8 + 5, 1, 6, "a", "bits"}},
		{"F4 half a byte", raw(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), want{ErrShape, 8 + 5, 1, 6, "a", "12 bits, not a whole number of bytes"}},

		// Offsets.
		{"offsets not an array", raw(`{"a":{"dtype":"U8","shape":[],"data_offsets":"0-1"}}`, 1), want{ErrOffsets, -1, 0, 0, "a", "a string"}},
		{"one offset", raw(`{"a":{"dtype":"U8","shape":[],"data_offsets":[1]}}`, 1), want{ErrOffsets, 8 + 45, 1, 46, "a", "has length 1, want 2"}},
		{"three offsets", raw(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1,2]}}`, 1), want{ErrOffsets, 8 + 50, 1, 51, "a", "more than 2"}},
		{"negative offset", raw(`{"a":`+u8(`[]`, -1, 0)+`}`, 1), want{ErrOffsets, -1, 0, 0, "a", "data_offsets[0] is the number -1, which is negative"}},
		{"offset above int64", raw(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,18446744073709551616]}}`, 1), want{ErrOffsets, -1, 0, 0, "a", "overflows"}},
		{"end before begin", raw(`{"a":`+u8(`[0]`, 1, 0)+`}`, 1), want{ErrOffsets, 8 + 46, 1, 47, "a", "end before they begin"}},
		{"size mismatch", raw(`{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, 12), want{ErrOffsets, 8 + 49, 1, 50, "a", "span 12 bytes, but F32 [2 2] needs 16"}},
		{"gap at start", raw(`{"a":`+u8(`[1]`, 1, 2)+`}`, 2), want{ErrOffsets, 8 + 46, 1, 47, "a", "[0, 1]"}},
		{"gap between", raw(`{"a":`+u8(`[1]`, 0, 1)+`,"b":`+u8(`[1]`, 2, 3)+`}`, 3), want{ErrOffsets, -1, 0, 0, "b", `after tensor "a", which ends at 1`}},
		{"overlap", raw(`{"a":`+u8(`[2]`, 0, 2)+`,"b":`+u8(`[2]`, 1, 3)+`}`, 3), want{ErrOffsets, -1, 0, 0, "b", `overlap those of tensor "a"`}},
		{"same region twice", raw(`{"a":`+u8(`[2]`, 0, 2)+`,"b":`+u8(`[2]`, 0, 2)+`}`, 2), want{ErrOffsets, -1, 0, 0, "b", "overlap"}},
		{"zero-size inside another", raw(`{"a":`+u8(`[2]`, 0, 2)+`,"b":`+u8(`[0]`, 1, 1)+`}`, 2), want{ErrOffsets, -1, 0, 0, "b", "overlap"}},
		{"past end", raw(`{"a":`+u8(`[4]`, 0, 4)+`}`, 3), want{ErrTruncated, 8 + 46, 1, 47, "a", "past the 3-byte data section"}},
		{"past end, far", raw(`{"a":`+u8(`[1000000000000]`, 0, 1000000000000)+`}`, 0), want{ErrTruncated, -1, 0, 0, "a", "past"}},
		{"uncovered tail", raw(`{"a":`+u8(`[1]`, 0, 1)+`}`, 3), want{ErrOffsets, 8 + 53 + 1, 0, 0, "", "last 2 bytes belong to no tensor"}},
		{"data but no tensors", raw(`{}`, 1), want{ErrOffsets, 10, 0, 0, "", "cover 0 bytes of the 1-byte"}},

		// Duplicates and metadata.
		{"duplicate tensor", raw(`{"a":`+u8(`[1]`, 0, 1)+`,"a":`+u8(`[1]`, 0, 1)+`}`, 1), want{ErrDuplicate, 8 + 53, 1, 54, "a", "given twice"}},
		{"duplicate via escape", raw(`{"a":`+u8(`[1]`, 0, 1)+`,"\u0061":`+u8(`[1]`, 1, 2)+`}`, 2), want{ErrDuplicate, -1, 0, 0, "a", "given twice"}},
		{"duplicate entry key", raw(`{"a":{"dtype":"U8","dtype":"I8","shape":[],"data_offsets":[0,1]}}`, 1), want{ErrDuplicate, 8 + 19, 1, 20, "a", `key "dtype" given twice`}},
		{"duplicate metadata", raw(`{"__metadata__":{},"__metadata__":{}}`, 0), want{ErrDuplicate, 8 + 19, 1, 20, "", "__metadata__ given twice"}},
		{"duplicate metadata key", raw(`{"__metadata__":{"k":"1","k":"2"}}`, 0), want{ErrDuplicate, 8 + 25, 1, 26, "", `key "k" given twice`}},
		{"metadata number", raw(`{"__metadata__":{"k":1}}`, 0), want{ErrMetadata, 8 + 21, 1, 22, "", `__metadata__["k"] is the number 1, want a string`}},
		{"metadata null value", raw(`{"__metadata__":{"k":null}}`, 0), want{ErrMetadata, -1, 0, 0, "", "null"}},
		{"metadata object value", raw(`{"__metadata__":{"k":{}}}`, 0), want{ErrMetadata, -1, 0, 0, "", "an object"}},
		{"metadata array", raw(`{"__metadata__":["k"]}`, 0), want{ErrMetadata, 8 + 16, 1, 17, "", "an array, want an object"}},
		{"metadata string", raw(`{"__metadata__":"k"}`, 0), want{ErrMetadata, -1, 0, 0, "", "a string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBytes(tc.data)
			if !errors.Is(err, tc.want.err) {
				t.Fatalf("Parse = %v, want %v", err, tc.want.err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v (%T), want a *FormatError", err, err)
			}
			if tc.want.off >= 0 && (fe.Offset != tc.want.off || fe.Line != tc.want.line || fe.Column != tc.want.col) {
				t.Errorf("Parse = %v: offset %d, line %d, column %d; want %d, %d, %d",
					err, fe.Offset, fe.Line, fe.Column, tc.want.off, tc.want.line, tc.want.col)
			}
			if fe.Tensor != tc.want.tensor {
				t.Errorf("Parse = %v: Tensor %q, want %q", err, fe.Tensor, tc.want.tensor)
			}
			if !strings.Contains(fe.Detail, tc.want.detail) {
				t.Errorf("Parse = %v: Detail %q, want it to contain %q", err, fe.Detail, tc.want.detail)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(tc.data)) {
				t.Errorf("Parse = %v: offset %d outside the %d-byte file", err, fe.Offset, len(tc.data))
			}
		})
	}
}

func TestFormatErrorString(t *testing.T) {
	tests := []struct {
		err  *FormatError
		want string
	}{
		{&FormatError{Offset: 30, Line: 2, Column: 5, Tensor: "w", Detail: `unknown dtype "F3"`, Err: ErrDType},
			`safetensors: bad dtype: tensor "w": unknown dtype "F3" (line 2, column 5, offset 30)`},
		{&FormatError{Offset: 0, Detail: "header length 9 exceeds the 1 bytes after it", Err: ErrTruncated},
			`safetensors: truncated: header length 9 exceeds the 1 bytes after it (offset 0)`},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// A huge header length in a small file is refused before anything is
// allocated for the header.
func TestParseHugeLengthAllocates(t *testing.T) {
	data := raw(`{}`, 0)
	data[3] = 0x05 // header length 2 + 5<<24, about 84 MB
	var err error
	if n := allocatedBy(func() { _, err = parseBytes(data) }); n > 4096 {
		t.Errorf("Parse allocated %d bytes", n)
	}
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("Parse = %v, want ErrTruncated", err)
	}
}

// readerAt serves data but fails or ends early at a given offset.
type readerAt struct {
	data   []byte
	failAt int64
	err    error // nil: return io.EOF at failAt
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= r.failAt {
		return copy(p, r.data[off:]), nil
	}
	n := 0
	if off < r.failAt {
		n = copy(p, r.data[off:r.failAt])
	}
	if r.err != nil {
		return n, r.err
	}
	return n, io.EOF
}

func TestParseReaderErrors(t *testing.T) {
	data := raw(`{"a":`+u8(`[1]`, 0, 1)+`}`, 1)
	boom := errors.New("boom")
	tests := []struct {
		name  string
		r     readerAt
		want  error
		isFmt bool
	}{
		{"fails in length", readerAt{data, 4, boom}, boom, false},
		{"fails in header", readerAt{data, 20, boom}, boom, false},
		{"ends in header", readerAt{data, 20, nil}, ErrTruncated, true},
		{"ends in data", readerAt{data, int64(len(data)) - 1, nil}, nil, false}, // Parse does not read data
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.r, int64(len(data)))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Parse = %v, want %v", err, tc.want)
			}
			var fe *FormatError
			if errors.As(err, &fe) != tc.isFmt {
				t.Errorf("Parse = %v (%T); *FormatError: %v, want %v", err, err, !tc.isFmt, tc.isFmt)
			}
		})
	}
	if _, err := Parse(bytes.NewReader(nil), -1); err == nil {
		t.Error("Parse(size -1) succeeded")
	}
}

func TestDType(t *testing.T) {
	tests := []struct {
		d          DType
		bits, size int
		sizeOK     bool
	}{
		{F32, 32, 4, true}, {F16, 16, 2, true}, {BF16, 16, 2, true}, {F64, 64, 8, true},
		{I8, 8, 1, true}, {I16, 16, 2, true}, {I32, 32, 4, true}, {I64, 64, 8, true},
		{U8, 8, 1, true}, {U16, 16, 2, true}, {U32, 32, 4, true}, {U64, 64, 8, true},
		{Bool, 8, 1, true}, {F8E4M3, 8, 1, true}, {F8E5M2, 8, 1, true}, {F8E8M0, 8, 1, true},
		{C64, 64, 8, true}, {F4, 4, 0, false}, {F6E2M3, 6, 0, false}, {F6E3M2, 6, 0, false},
		{"F3", 0, 0, false}, {"f32", 0, 0, false}, {"", 0, 0, false},
	}
	for _, tc := range tests {
		bits, bitsOK := tc.d.Bits()
		size, sizeOK := tc.d.Size()
		if bits != tc.bits || bitsOK != (tc.bits > 0) || size != tc.size || sizeOK != tc.sizeOK || tc.d.Known() != bitsOK {
			t.Errorf("%q: Bits() = %d, %v; Size() = %d, %v; want %d, %v; %d, %v",
				tc.d, bits, bitsOK, size, sizeOK, tc.bits, tc.bits > 0, tc.size, tc.sizeOK)
		}
	}
	if n := len(DTypes()); n != 20 {
		t.Errorf("len(DTypes()) = %d, want 20", n)
	}
}

// BenchmarkParse parses the header of a file with 2,000 tensors, about the
// size of a 70B model's shard.
func BenchmarkParse(b *testing.B) {
	w := NewWriter()
	w.SetMetadata("format", "pt")
	for i := range 2000 {
		if err := w.Add(fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i), BF16, []int64{2, 2}, make([]byte, 8)); err != nil {
			b.Fatal(err)
		}
	}
	data := encode(b, w)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}
