package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated seeds in testdata/fuzz")

var sentinels = []error{
	ErrHeader, ErrTruncated, ErrJSON, ErrDType, ErrShape, ErrOffsets, ErrDuplicate, ErrMetadata, ErrIndex,
}

// checkFormatError fails unless err is a *FormatError wrapping a sentinel
// whose position lies inside the n-byte input and agrees with its line and
// column in the JSON text src that starts at byte base.
func checkFormatError(t *testing.T, err error, n int, src []byte, base int64) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FormatError", err, err)
	}
	if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
		t.Fatalf("error %v wraps no sentinel", err)
	}
	if fe.Offset < 0 || fe.Offset > int64(n) {
		t.Fatalf("FormatError.Offset %d outside the %d-byte input: %v", fe.Offset, n, err)
	}
	if fe.Line > 0 {
		p := fe.Offset - base
		if p < 0 || p > int64(len(src)) {
			t.Fatalf("error %v has a line but its offset is outside the JSON [%d, %d]", err, base, base+int64(len(src)))
		}
		if line, col := lineColumn(src, int(p)); line != fe.Line || col != fe.Column {
			t.Fatalf("error %v: line %d, column %d; offset says %d, %d", err, fe.Line, fe.Column, line, col)
		}
	}
}

// FuzzParse checks that Parse never panics, fails only with a FormatError
// wrapping a sentinel, allocates in proportion to its input, returns tensors
// that tile the data section, and that what it accepts the Writer writes
// back to a file with the same contents, and writes that file back byte for
// byte. Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) { f.Fuzz(checkParse) }

// checkParse is the body of FuzzParse.
func checkParse(t *testing.T, data []byte) {
	var file *File
	var err error
	allocated := allocatedBy(func() { file, err = parseBytes(data) })
	if limit := 1<<20 + 64*uint64(len(data)); allocated > limit {
		t.Fatalf("Parse of %d bytes allocated %d bytes (limit %d)", len(data), allocated, limit)
	}
	if err != nil {
		checkFormatError(t, err, len(data), headerOf(data), 8)
		return
	}
	if file.DataOffset < 10 || file.DataOffset > int64(len(data)) {
		t.Fatalf("DataOffset %d outside the %d-byte input", file.DataOffset, len(data))
	}
	at := file.DataOffset
	for _, ti := range file.Tensors {
		size, msg := byteSize(ti.DType, ti.Shape)
		if ti.Offset != at || msg != "" || size != ti.Size {
			t.Fatalf("tensor %+v: want offset %d and size %d (%s)", ti, at, size, msg)
		}
		at += ti.Size
	}
	if at != int64(len(data)) {
		t.Fatalf("tensors end at %d, input is %d bytes", at, len(data))
	}

	first := rewrite(t, file, data)
	again, err := parseBytes(first)
	if err != nil {
		t.Fatalf("Parse(rewritten) = %v", err)
	}
	if !maps.Equal(again.Metadata, file.Metadata) || len(again.Tensors) != len(file.Tensors) {
		t.Fatalf("rewritten file has metadata %q and %d tensors, want %q and %d",
			again.Metadata, len(again.Tensors), file.Metadata, len(file.Tensors))
	}
	for _, ti := range again.Tensors {
		want, ok := file.Tensor(ti.Name)
		if !ok || ti.DType != want.DType || !slices.Equal(ti.Shape, want.Shape) ||
			!bytes.Equal(first[ti.Offset:ti.Offset+ti.Size], data[want.Offset:want.Offset+want.Size]) {
			t.Fatalf("rewritten tensor %+v, want %+v with the same data", ti, want)
		}
	}
	if second := rewrite(t, again, first); !bytes.Equal(first, second) {
		t.Fatal("writing a rewritten file again changed it")
	}
}

// headerOf returns the header text of a file, as far as the file holds it.
func headerOf(data []byte) []byte {
	if len(data) < 8 {
		return nil
	}
	n := min(binary.LittleEndian.Uint64(data), uint64(len(data)-8))
	return data[8 : 8+n]
}

// rewrite writes f, with tensor data taken from data, through a Writer.
func rewrite(t *testing.T, f *File, data []byte) []byte {
	t.Helper()
	w := NewWriter()
	for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
		w.SetMetadata(k, f.Metadata[k])
	}
	for _, ti := range f.Tensors {
		if err := w.Add(ti.Name, ti.DType, ti.Shape, data[ti.Offset:ti.Offset+ti.Size]); err != nil {
			t.Fatalf("Add(%+v) = %v", ti, err)
		}
	}
	return encode(t, w)
}

// FuzzParseIndex checks that ParseIndex never panics, fails only with a
// FormatError wrapping a sentinel, that every shard name it accepts stays in
// the directory it is joined to, and that an accepted index survives a
// round trip through encoding/json. Seeds are in
// testdata/fuzz/FuzzParseIndex.
func FuzzParseIndex(f *testing.F) { f.Fuzz(checkParseIndex) }

// checkParseIndex is the body of FuzzParseIndex.
func checkParseIndex(t *testing.T, data []byte) {
	ix, err := ParseIndex(bytes.NewReader(data))
	if err != nil {
		checkFormatError(t, err, len(data), data, 0)
		return
	}
	if len(ix.WeightMap) == 0 || ix.TotalSize < 0 {
		t.Fatalf("ParseIndex accepted an empty weight_map or negative total_size: %+v", ix)
	}
	files := ix.Files()
	if !slices.IsSorted(files) || len(slices.Compact(slices.Clone(files))) != len(files) {
		t.Fatalf("Files() = %q, not sorted and distinct", files)
	}
	dir := filepath.Join("models", "m")
	for _, name := range files {
		path := filepath.Join(dir, name)
		if filepath.Dir(path) != dir || filepath.Base(path) != name || strings.ContainsAny(name, `/\`) || !filepath.IsLocal(name) {
			t.Fatalf("shard name %q joins to %q, outside %q", name, path, dir)
		}
	}
	type index struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := json.Marshal(index{map[string]int64{"total_size": ix.TotalSize}, ix.WeightMap})
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseIndex(bytes.NewReader(b))
	if err != nil || again.TotalSize != ix.TotalSize || !maps.Equal(again.WeightMap, ix.WeightMap) {
		t.Fatalf("ParseIndex(json.Marshal(%+v)) = %+v, %v", ix, again, err)
	}
}

// fuzzSeeds are the generated seeds, by target and name.
func fuzzSeeds(t *testing.T) map[string]map[string][]byte {
	parse := map[string][]byte{}
	parse["empty"] = encode(t, NewWriter())

	w := NewWriter()
	w.SetMetadata("format", "pt")
	_ = w.Add("model.embed_tokens.weight", BF16, []int64{4, 2}, sequence(16, 0))
	_ = w.Add("model.norm.weight", F32, []int64{2}, sequence(8, 16))
	_ = w.Add("lm_head.weight", F16, []int64{4, 2}, sequence(16, 32))
	parse["model"] = encode(t, w)

	w = NewWriter()
	for _, d := range DTypes() {
		bits, _ := d.Bits()
		_ = w.Add(string(d), d, []int64{4, 2}, sequence(bits, byte(bits)))
	}
	parse["dtypes"] = encode(t, w)

	w = NewWriter()
	w.SetMetadata("", "")
	w.SetMetadata("k\n\"", "ü\\")
	_ = w.Add("scalar", I64, nil, sequence(8, 1))
	_ = w.Add("empty", F32, []int64{0, 3}, nil)
	_ = w.Add("", U8, []int64{1, 1, 1, 1, 1}, []byte{9})
	parse["edge-shapes"] = encode(t, w)

	parse["hand-written"] = raw("{\n \"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [1, 3], \"x\": [{}]},\n"+
		" \"a\": {\"shape\": [], \"data_offsets\": [0, 1], \"dtype\": \"BOOL\"}, \"__metadata__\": null\n}  ", 3)

	index := map[string][]byte{
		"typical": []byte(`{
  "metadata": {
    "total_size": 64
  },
  "weight_map": {
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors"
  }
}
`),
		"extra-keys": []byte(`{"metadata":{"total_parameters":8,"total_size":1.6e1},"weight_map":{"a":"..x","b\u00e9":"y"},"other":[1,{"z":null}]}`),
		"escape":     []byte(`{"weight_map":{"a":"../x"}}`),
	}
	return map[string]map[string][]byte{"FuzzParse": parse, "FuzzParseIndex": index}
}

// TestFuzzSeeds checks the generated seeds are up to date; run with -update
// to rewrite them. Other files in the directories (fuzzer findings kept as
// regression tests) are left alone.
func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seeds {
			if len(data) > 2048 {
				t.Errorf("seed %s/%s is %d bytes; keep seeds small", target, name, len(data))
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
	for _, data := range fuzzSeeds(t)["FuzzParse"] {
		if _, err := parseBytes(data); err != nil {
			t.Errorf("a FuzzParse seed does not parse: %v", err)
		}
	}
}
