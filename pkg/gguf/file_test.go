package gguf

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestFileLookups(t *testing.T) {
	w := NewWriter(3)
	w.AddString("s", "llama")
	w.AddUint32("u32", 64)
	w.AddKV("u8", ValueOf(uint8(3)))
	w.AddKV("i16", ValueOf(int16(12)))
	w.AddInt32("neg", -4)
	w.AddKV("u64.big", ValueOf(uint64(math.MaxUint64)))
	w.AddFloat32("f32", 0.25)
	w.AddKV("f64", ValueOf(1e300))
	w.AddBool("b", true)
	w.AddStrings("ss", []string{"a", "b"})
	w.AddFloat32s("fs", []float32{1, 2})
	w.AddKV("f64s", ArrayOf([]float64{0.5}))
	w.AddInt32s("is", []int32{-1, 7})
	w.AddKV("u8s", ArrayOf([]uint8{1, 255}))
	w.AddKV("u32s.big", ArrayOf([]uint32{1 << 31}))
	w.AddKV("i64s.neg", ArrayOf([]int64{-1 << 31}))
	f, err := parseBytes(encode(t, w))
	if err != nil {
		t.Fatal(err)
	}

	check := func(call string, got any, err error, want any, wantErr error) {
		t.Helper()
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				t.Errorf("%s error = %v, want %v", call, err, wantErr)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, %v, want %v", call, got, err, want)
		}
	}
	s, err := f.String("s")
	check(`String("s")`, s, err, "llama", nil)
	_, err = f.String("u32")
	check(`String("u32")`, nil, err, nil, ErrWrongType)

	for _, tt := range []struct {
		key  string
		want uint64
		err  error
	}{{"u32", 64, nil}, {"u8", 3, nil}, {"i16", 12, nil}, {"u64.big", math.MaxUint64, nil},
		{"neg", 0, ErrOutOfRange}, {"s", 0, ErrWrongType}, {"f32", 0, ErrWrongType}, {"missing", 0, ErrKeyNotFound}} {
		u, err := f.Uint(tt.key)
		check(`Uint("`+tt.key+`")`, u, err, tt.want, tt.err)
	}
	i, err := f.Int("neg")
	check(`Int("neg")`, i, err, int64(-4), nil)
	_, err = f.Int("u64.big")
	check(`Int("u64.big")`, nil, err, nil, ErrOutOfRange)
	x, err := f.Float("f32")
	check(`Float("f32")`, x, err, 0.25, nil)
	x, err = f.Float("f64")
	check(`Float("f64")`, x, err, 1e300, nil)
	x, err = f.Float("neg")
	check(`Float("neg")`, x, err, -4.0, nil)
	_, err = f.Float("b")
	check(`Float("b")`, nil, err, nil, ErrWrongType)
	b, err := f.Bool("b")
	check(`Bool("b")`, b, err, true, nil)
	_, err = f.Bool("u8")
	check(`Bool("u8")`, nil, err, nil, ErrWrongType)
	ss, err := f.Strings("ss")
	check(`Strings("ss")`, ss, err, []string{"a", "b"}, nil)
	_, err = f.Strings("s")
	check(`Strings("s")`, nil, err, nil, ErrWrongType)
	fs, err := f.Float32s("fs")
	check(`Float32s("fs")`, fs, err, []float32{1, 2}, nil)
	fs, err = f.Float32s("f64s")
	check(`Float32s("f64s")`, fs, err, []float32{0.5}, nil)
	_, err = f.Float32s("is")
	check(`Float32s("is")`, nil, err, nil, ErrWrongType)
	is, err := f.Int32s("is")
	check(`Int32s("is")`, is, err, []int32{-1, 7}, nil)
	is, err = f.Int32s("u8s")
	check(`Int32s("u8s")`, is, err, []int32{1, 255}, nil)
	is, err = f.Int32s("i64s.neg")
	check(`Int32s("i64s.neg")`, is, err, []int32{-1 << 31}, nil)
	_, err = f.Int32s("u32s.big")
	check(`Int32s("u32s.big")`, nil, err, nil, ErrOutOfRange)
	_, err = f.Int32s("ss")
	check(`Int32s("ss")`, nil, err, nil, ErrWrongType)
	_, err = f.Int32s("missing.key")
	check(`Int32s("missing.key")`, nil, err, nil, ErrKeyNotFound)
	if err == nil || !strings.Contains(err.Error(), `"missing.key"`) {
		t.Errorf("error %v does not name the key", err)
	}

	// The returned slices are copies.
	ss[0] = "changed"
	if again, _ := f.Strings("ss"); again[0] != "a" {
		t.Error("Strings returned the File's own slice")
	}
	if _, ok := f.Get("missing"); ok {
		t.Error(`Get("missing") found a value`)
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Error(`Tensor("missing") found a tensor`)
	}
}
