package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// allValues has a value of every type, array element type and nesting
// shape, including empty ones and extremes.
func allValues() []KV {
	return []KV{
		{"u8", ValueOf(uint8(math.MaxUint8))},
		{"i8", ValueOf(int8(math.MinInt8))},
		{"u16", ValueOf(uint16(math.MaxUint16))},
		{"i16", ValueOf(int16(math.MinInt16))},
		{"u32", ValueOf(uint32(math.MaxUint32))},
		{"i32", ValueOf(int32(math.MinInt32))},
		{"f32", ValueOf(float32(-1.5e-7))},
		{"f32.inf", ValueOf(float32(math.Inf(1)))},
		{"bool.true", ValueOf(true)},
		{"bool.false", ValueOf(false)},
		{"string", ValueOf("héllo ▁wörld\x00\n")},
		{"string.empty", ValueOf("")},
		{"u64", ValueOf(uint64(math.MaxUint64))},
		{"i64", ValueOf(int64(math.MinInt64))},
		{"f64", ValueOf(math.SmallestNonzeroFloat64)},
		{"a.u8", ArrayOf([]uint8{0, 1, 255})},
		{"a.i8", ArrayOf([]int8{-128, 0, 127})},
		{"a.u16", ArrayOf([]uint16{1, 65535})},
		{"a.i16", ArrayOf([]int16{-32768, 32767})},
		{"a.u32", ArrayOf([]uint32{7, math.MaxUint32})},
		{"a.i32", ArrayOf([]int32{-1, 2, 3})},
		{"a.f32", ArrayOf([]float32{0.5, float32(math.Inf(-1)), -0})},
		{"a.bool", ArrayOf([]bool{true, false, true})},
		{"a.string", ArrayOf([]string{"<unk>", "", "▁the"})},
		{"a.u64", ArrayOf([]uint64{math.MaxUint64})},
		{"a.i64", ArrayOf([]int64{math.MinInt64, math.MaxInt64})},
		{"a.f64", ArrayOf([]float64{math.Pi, -math.MaxFloat64})},
		{"a.empty", ArrayOf([]float32{})},
		{"a.nil", ArrayOf[string](nil)},
		{"aa", NestedArray(ArrayOf([]int32{1}), ArrayOf([]string{"x", "y"}), ArrayOf([]bool{}))},
		{"aaa", NestedArray(NestedArray(ArrayOf([]uint8{9})), NestedArray())},
		{"aa.empty", NestedArray()},
		{"aa.deepest", deepArray(maxArrayDepth)},
	}
}

// deepArray returns arrays nested depth deep around an empty uint16 array.
func deepArray(depth int) Value {
	v := ArrayOf([]uint16{})
	for range depth - 1 {
		v = NestedArray(v)
	}
	return v
}

func TestRoundTrip(t *testing.T) {
	type tensor struct {
		name string
		typ  Type
		dims []uint64
	}
	tensors := []tensor{
		{"f32", F32, []uint64{3, 5}},
		{"f16", F16, []uint64{7}},
		{"q4_0", Q40, []uint64{64, 2, 1}},
		{"q8_0", Q80, []uint64{32}},
		{"q4_K", Q4K, []uint64{256, 1, 2, 1}},
		{"bf16", BF16, []uint64{2, 2, 2, 2}},
		{"i8", I8, []uint64{1}},
		{"scalar", F64, nil},
	}
	for _, version := range []uint32{2, 3} {
		for _, align := range []uint32{0, 1, 8, 64, 4096} { // 0: no general.alignment
			t.Run(fmt.Sprintf("v%d/align%d", version, align), func(t *testing.T) {
				w := NewWriter(version)
				kvs := allValues()
				if align != 0 {
					kvs = append([]KV{{AlignmentKey, ValueOf(align)}}, kvs...)
				}
				for _, kv := range kvs {
					w.AddKV(kv.Key, kv.Value)
				}
				var data [][]byte
				for i, tt := range tensors {
					_, size, err := tensorBytes(tt.typ, tt.dims)
					if err != nil {
						t.Fatal(err)
					}
					d := bytes.Repeat([]byte{byte(i + 1)}, int(size))
					data = append(data, d)
					if err := w.AddTensor(tt.name, tt.typ, tt.dims, d); err != nil {
						t.Fatalf("AddTensor(%s) = %v", tt.name, err)
					}
				}
				b := encode(t, w)
				f, err := parseBytes(b)
				if err != nil {
					t.Fatalf("Parse = %v", err)
				}
				wantAlign := int64(DefaultAlignment)
				if align != 0 {
					wantAlign = int64(align)
				}
				if f.Version != version || f.Alignment != wantAlign {
					t.Errorf("Version, Alignment = %d, %d, want %d, %d", f.Version, f.Alignment, version, wantAlign)
				}
				if f.DataOffset%wantAlign != 0 {
					t.Errorf("DataOffset %d is not aligned to %d", f.DataOffset, wantAlign)
				}
				if !reflect.DeepEqual(f.KV, kvs) {
					for i := range max(len(f.KV), len(kvs)) {
						var got, want KV
						if i < len(f.KV) {
							got = f.KV[i]
						}
						if i < len(kvs) {
							want = kvs[i]
						}
						if !reflect.DeepEqual(got, want) {
							t.Errorf("KV[%d] = %s %#v, want %s %#v", i, got.Key, got.Value.Any(), want.Key, want.Value.Any())
						}
					}
				}
				if len(f.Tensors) != len(tensors) {
					t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(tensors))
				}
				for i, tt := range tensors {
					got := f.Tensors[i]
					if got.Name != tt.name || got.Type != tt.typ || len(got.Dims) != len(tt.dims) ||
						(len(tt.dims) > 0 && !reflect.DeepEqual(got.Dims, tt.dims)) {
						t.Errorf("Tensors[%d] = %+v, want %s %s %v", i, got, tt.name, tt.typ, tt.dims)
					}
					if (got.Offset-f.DataOffset)%wantAlign != 0 {
						t.Errorf("tensor %s at %d is not aligned to %d from %d", got.Name, got.Offset, wantAlign, f.DataOffset)
					}
					if d := b[got.Offset : got.Offset+got.Size]; !bytes.Equal(d, data[i]) {
						t.Errorf("tensor %s data differs", got.Name)
					}
				}
			})
		}
	}
}

// The Writer's bytes match a file built field by field from the spec.
func TestWriterGolden(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	w := NewWriter(3)
	w.AddUint32("a", 7)
	w.AddKV("s", ArrayOf([]string{"xy"}))
	if err := w.AddTensor("t", F32, []uint64{2}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("u", I8, []uint64{1, 1}, []byte{9}); err != nil {
		t.Fatal(err)
	}
	got := encode(t, w)
	want := header(3, 2, 2).
		kv("a", ValueUint32).u32(7).
		kv("s", ValueArray).u32(uint32(ValueString)).u64(1).str("xy").
		tensor("t", []uint64{2}, F32, 0).
		tensor("u", []uint64{1, 1}, I8, 32).
		pad(32).bytes(data).pad(32).u8(9).pad(32).b
	if !bytes.Equal(got, want) {
		t.Errorf("WriteTo =\n%x\nwant\n%x", got, want)
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(w *Writer) error // returns AddTensor's error, if called
		want  error
	}{
		{"version 1", func(w *Writer) error { return nil }, ErrUnsupportedVersion},
		{"duplicate key", func(w *Writer) error { w.AddUint32("k", 1); w.AddString("k", "x"); return nil }, ErrDuplicate},
		{"zero value", func(w *Writer) error { w.AddKV("k", Value{}); return nil }, ErrWrongType},
		{"too deep", func(w *Writer) error { w.AddKV("k", deepArray(maxArrayDepth+1)); return nil }, ErrCorrupt},
		{"empty array of arrays too deep", func(w *Writer) error {
			v := NestedArray() // its element type, array, would be at depth maxArrayDepth+1
			for range maxArrayDepth - 1 {
				v = NestedArray(v)
			}
			w.AddKV("k", v)
			return nil
		}, ErrCorrupt},
		{"alignment 3", func(w *Writer) error { w.AddUint32(AlignmentKey, 3); return nil }, ErrAlignment},
		{"alignment int32", func(w *Writer) error { w.AddInt32(AlignmentKey, 32); return nil }, ErrAlignment},
		{"duplicate tensor", func(w *Writer) error {
			_ = w.AddTensor("t", I8, []uint64{1}, []byte{0})
			return w.AddTensor("t", I8, []uint64{1}, []byte{0})
		}, ErrDuplicate},
		{"unknown type", func(w *Writer) error { return w.AddTensor("t", 5, []uint64{32}, make([]byte, 20)) }, ErrUnknownType},
		{"five dims", func(w *Writer) error { return w.AddTensor("t", I8, []uint64{1, 1, 1, 1, 1}, []byte{0}) }, ErrBadShape},
		{"zero dim", func(w *Writer) error { return w.AddTensor("t", I8, []uint64{0}, nil) }, ErrBadShape},
		{"partial block", func(w *Writer) error { return w.AddTensor("t", Q80, []uint64{16}, make([]byte, 17)) }, ErrBadShape},
		{"short data", func(w *Writer) error { return w.AddTensor("t", F32, []uint64{4}, make([]byte, 15)) }, ErrBadShape},
		{"error is sticky", func(w *Writer) error {
			w.AddUint32(AlignmentKey, 0)
			w.AddUint32("fine", 1)
			return nil
		}, ErrAlignment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			version := uint32(3)
			if tt.name == "version 1" {
				version = 1
			}
			w := NewWriter(version)
			addErr := tt.build(w)
			if addErr != nil && !errors.Is(addErr, tt.want) {
				t.Errorf("AddTensor error = %v, want %v", addErr, tt.want)
			}
			n, err := w.WriteTo(&bytes.Buffer{})
			if !errors.Is(err, tt.want) || n != 0 {
				t.Errorf("WriteTo = %d, %v, want 0, %v", n, err, tt.want)
			}
		})
	}
}

func TestNestedArrayPanicsOnScalar(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "element 1") {
			t.Errorf("NestedArray(array, scalar) recovered %v, want a panic naming element 1", r)
		}
	}()
	NestedArray(ArrayOf([]uint8{1}), ValueOf(uint8(1)))
}

func TestValueAccessors(t *testing.T) {
	tests := []struct {
		v          Value
		typ, elem  ValueType
		n          int
		str        string
		wantGoType string
	}{
		{ValueOf(uint32(5)), ValueUint32, valueInvalid, 0, "5", "uint32"},
		{ValueOf("a\"b"), ValueString, valueInvalid, 0, `"a\"b"`, "string"},
		{ValueOf(true), ValueBool, valueInvalid, 0, "true", "bool"},
		{ArrayOf([]int32{1, 2}), ValueArray, ValueInt32, 2, "[1 2]", "[]int32"},
		{ArrayOf([]string{"x"}), ValueArray, ValueString, 1, `["x"]`, "[]string"},
		{ArrayOf(make([]uint8, 10)), ValueArray, ValueUint8, 10, "[0 0 0 0 0 0 0 0 ... (10 elements)]", "[]uint8"},
		{NestedArray(ArrayOf([]bool{true})), ValueArray, ValueArray, 1, "[[true]]", "[]gguf.Value"},
		{Value{}, valueInvalid, valueInvalid, 0, "<invalid>", "<nil>"},
	}
	for _, tt := range tests {
		if got := tt.v.Type(); got != tt.typ {
			t.Errorf("%s.Type() = %s, want %s", tt.str, got, tt.typ)
		}
		if got := tt.v.ElemType(); got != tt.elem {
			t.Errorf("%s.ElemType() = %s, want %s", tt.str, got, tt.elem)
		}
		if got := tt.v.Len(); got != tt.n {
			t.Errorf("%s.Len() = %d, want %d", tt.str, got, tt.n)
		}
		if got := tt.v.String(); got != tt.str {
			t.Errorf("String() = %s, want %s", got, tt.str)
		}
		if got := fmt.Sprintf("%T", tt.v.Any()); got != tt.wantGoType {
			t.Errorf("%s.Any() is %s, want %s", tt.str, got, tt.wantGoType)
		}
	}
	if got := ValueType(13).String(); got != "ValueType(13)" {
		t.Errorf("ValueType(13).String() = %q", got)
	}
}
