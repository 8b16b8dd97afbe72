package gguf

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated seeds in testdata/fuzz/FuzzParse")

var sentinels = []error{
	ErrBadMagic, ErrUnsupportedVersion, ErrTruncated, ErrUnknownType, ErrBadShape,
	ErrAlignment, ErrDuplicate, ErrCorrupt,
}

// FuzzParse checks that Parse never panics, fails only with a FormatError
// wrapping a sentinel, allocates in proportion to its input, returns files
// whose tensors lie inside the input, and that what it accepts the Writer
// writes back unchanged. Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var file *File
		var err error
		allocated := allocatedBy(func() { file, err = parseBytes(data) })
		if limit := 1<<20 + 64*uint64(len(data)); allocated > limit {
			t.Fatalf("Parse of %d bytes allocated %d bytes (limit %d)", len(data), allocated, limit)
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error %v (%T) is not a *FormatError", err, err)
			}
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("Parse error %v wraps no sentinel", err)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("FormatError.Offset %d outside the %d-byte input: %v", fe.Offset, len(data), err)
			}
			return
		}
		for _, ti := range file.Tensors {
			if ti.Offset < file.DataOffset || ti.Size <= 0 || ti.Offset+ti.Size > int64(len(data)) ||
				(ti.Offset-file.DataOffset)%file.Alignment != 0 {
				t.Fatalf("tensor %+v outside the %d-byte input or misaligned (data at %d, alignment %d)",
					ti, len(data), file.DataOffset, file.Alignment)
			}
		}

		// Whatever Parse accepts, the Writer writes, and the result parses to
		// the same metadata and tensors and writes back byte for byte.
		first := rewrite(t, file, data)
		again, err := parseBytes(first)
		if err != nil {
			t.Fatalf("Parse(rewritten) = %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) || again.Alignment != file.Alignment {
			t.Fatalf("rewritten file has %d keys, %d tensors, alignment %d; want %d, %d, %d",
				len(again.KV), len(again.Tensors), again.Alignment, len(file.KV), len(file.Tensors), file.Alignment)
		}
		for i, ti := range again.Tensors {
			want := file.Tensors[i]
			if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Dims, want.Dims) || ti.Size != want.Size {
				t.Fatalf("rewritten tensor %d = %+v, want %+v", i, ti, want)
			}
		}
		if second := rewrite(t, again, first); !bytes.Equal(first, second) {
			t.Fatal("writing a rewritten file again changed it")
		}
	})
}

// rewrite writes f, with tensor data taken from data, through a Writer.
func rewrite(t *testing.T, f *File, data []byte) []byte {
	t.Helper()
	w := NewWriter(f.Version)
	for _, kv := range f.KV {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data[ti.Offset:ti.Offset+ti.Size]); err != nil {
			t.Fatalf("AddTensor(%+v) = %v", ti, err)
		}
	}
	return encode(t, w)
}

// fuzzSeeds are the generated seed files, a few hundred bytes each.
func fuzzSeeds(t *testing.T) map[string][]byte {
	seeds := map[string][]byte{}

	seeds["empty-v3"] = encode(t, NewWriter(3))

	w := NewWriter(3)
	for _, kv := range allValues()[:15] { // the scalars
		w.AddKV(kv.Key, kv.Value)
	}
	seeds["scalars"] = encode(t, w)

	w = NewWriter(3)
	w.AddKV("a.i16", ArrayOf([]int16{-1, 2}))
	w.AddKV("a.f64", ArrayOf([]float64{0.5}))
	w.AddKV("a.bool", ArrayOf([]bool{true, false}))
	w.AddKV("a.str", ArrayOf([]string{"", "ab"}))
	w.AddKV("aa", NestedArray(ArrayOf([]uint8{1}), NestedArray(ArrayOf([]int64{-1}))))
	w.AddKV("deep", deepArray(maxArrayDepth))
	seeds["arrays"] = encode(t, w)

	w = NewWriter(2)
	w.AddString("general.architecture", "llama")
	w.AddUint32("llama.block_count", 1)
	w.AddStrings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁a"})
	w.AddFloat32s("tokenizer.ggml.scores", []float32{0, 0, 0, -1})
	w.AddInt32s("tokenizer.ggml.token_type", []int32{2, 3, 3, 1})
	_ = w.AddTensor("token_embd.weight", F32, []uint64{4, 4}, bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 16))
	_ = w.AddTensor("output_norm.weight", F16, []uint64{4}, bytes.Repeat([]byte{0, 0x3c}, 4))
	seeds["llama-v2"] = encode(t, w)

	w = NewWriter(3)
	w.AddUint32(AlignmentKey, 8)
	_ = w.AddTensor("q", Q80, []uint64{32}, make([]byte, 34))
	_ = w.AddTensor("s", I32, nil, []byte{1, 2, 3, 4})
	_ = w.AddTensor("m", BF16, []uint64{1, 2, 1, 2}, make([]byte, 8))
	seeds["tensors-align8"] = encode(t, w)
	return seeds
}

// TestFuzzSeeds checks the generated seeds are up to date; run with -update
// to rewrite them. Other files in the directory (fuzzer findings) are left
// alone.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	for name, data := range fuzzSeeds(t) {
		if len(data) > 1024 {
			t.Errorf("seed %s is %d bytes; keep seeds small", name, len(data))
		}
		if _, err := parseBytes(data); err != nil {
			t.Errorf("seed %s does not parse: %v", name, err)
		}
		want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (%v); run go test -run TestFuzzSeeds -update", path, err)
		}
	}
}
