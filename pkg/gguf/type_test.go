package gguf

import (
	"errors"
	"math"
	"testing"
)

func TestTypeTable(t *testing.T) {
	// Block geometry from ggml-common.h (sizeof(block_*)).
	tests := []struct {
		typ         Type
		id          uint32
		name        string
		block, size int
	}{
		{F32, 0, "f32", 1, 4},
		{F16, 1, "f16", 1, 2},
		{Q40, 2, "q4_0", 32, 18},
		{Q41, 3, "q4_1", 32, 20},
		{Q50, 6, "q5_0", 32, 22},
		{Q51, 7, "q5_1", 32, 24},
		{Q80, 8, "q8_0", 32, 34},
		{Q81, 9, "q8_1", 32, 36},
		{Q2K, 10, "q2_K", 256, 84},
		{Q3K, 11, "q3_K", 256, 110},
		{Q4K, 12, "q4_K", 256, 144},
		{Q5K, 13, "q5_K", 256, 176},
		{Q6K, 14, "q6_K", 256, 210},
		{Q8K, 15, "q8_K", 256, 292},
		{IQ2XXS, 16, "iq2_xxs", 256, 66},
		{IQ2XS, 17, "iq2_xs", 256, 74},
		{IQ3XXS, 18, "iq3_xxs", 256, 98},
		{IQ1S, 19, "iq1_s", 256, 50},
		{IQ4NL, 20, "iq4_nl", 32, 18},
		{IQ3S, 21, "iq3_s", 256, 110},
		{IQ2S, 22, "iq2_s", 256, 82},
		{IQ4XS, 23, "iq4_xs", 256, 136},
		{I8, 24, "i8", 1, 1},
		{I16, 25, "i16", 1, 2},
		{I32, 26, "i32", 1, 4},
		{I64, 27, "i64", 1, 8},
		{F64, 28, "f64", 1, 8},
		{IQ1M, 29, "iq1_m", 256, 56},
		{BF16, 30, "bf16", 1, 2},
		{TQ10, 34, "tq1_0", 256, 54},
		{TQ20, 35, "tq2_0", 256, 66},
		{MXFP4, 39, "mxfp4", 32, 17},
		{NVFP4, 40, "nvfp4", 64, 36},
		{Q10, 41, "q1_0", 128, 18},
		{Q20, 42, "q2_0", 64, 18},
	}
	known := 0
	for _, tt := range tests {
		if uint32(tt.typ) != tt.id || tt.typ.String() != tt.name || !tt.typ.Known() ||
			tt.typ.BlockSize() != tt.block || tt.typ.TypeSize() != tt.size {
			t.Errorf("%d: id, String, Known, BlockSize, TypeSize = %d, %q, %v, %d, %d, want %d, %q, true, %d, %d",
				tt.id, uint32(tt.typ), tt.typ, tt.typ.Known(), tt.typ.BlockSize(), tt.typ.TypeSize(),
				tt.id, tt.name, tt.block, tt.size)
		}
		if got, err := tt.typ.RowBytes(int64(3 * tt.block)); got != int64(3*tt.size) || err != nil {
			t.Errorf("%s.RowBytes(%d) = %d, %v, want %d", tt.typ, 3*tt.block, got, err, 3*tt.size)
		}
	}
	for id := range uint32(64) {
		if Type(id).Known() {
			known++
		}
	}
	if known != len(tests) {
		t.Errorf("%d known type ids below 64, want %d", known, len(tests))
	}
	for _, id := range []uint32{4, 5, 31, 32, 33, 36, 37, 38, 43, 1 << 31, math.MaxUint32} {
		typ := Type(id)
		if typ.Known() || typ.BlockSize() != 0 || typ.TypeSize() != 0 {
			t.Errorf("Type(%d) is known", id)
		}
		if _, err := typ.RowBytes(32); !errors.Is(err, ErrUnknownType) {
			t.Errorf("Type(%d).RowBytes = %v, want ErrUnknownType", id, err)
		}
	}
	if got := Type(4).String(); got != "type(4)" {
		t.Errorf("Type(4).String() = %q, want type(4)", got)
	}
}

func TestRowBytesErrors(t *testing.T) {
	tests := []struct {
		typ  Type
		n    int64
		want int64
		err  error
	}{
		{F32, 0, 0, nil},
		{Q40, 64, 36, nil},
		{Q40, 33, 0, ErrBadShape},
		{Q6K, 128, 0, ErrBadShape},
		{F32, -1, 0, ErrBadShape},
		{F32, math.MaxInt64 / 4, (math.MaxInt64 / 4) * 4, nil},
		{F32, math.MaxInt64/4 + 1, 0, ErrBadShape},
		{Q80, math.MaxInt64 / 32 * 32, 0, ErrBadShape},
	}
	for _, tt := range tests {
		got, err := tt.typ.RowBytes(tt.n)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s.RowBytes(%d) = %d, %v, want %d, %v", tt.typ, tt.n, got, err, tt.want, tt.err)
		}
	}
}
