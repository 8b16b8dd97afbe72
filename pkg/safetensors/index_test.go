package safetensors

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseIndex(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		total int64
		wmap  map[string]string
	}{
		{"typical", `{
  "metadata": {"total_size": 16060522496},
  "weight_map": {
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors"
  }
}
`, 16060522496, map[string]string{
			"lm_head.weight":            "model-00002-of-00002.safetensors",
			"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
		}},
		{"no metadata", `{"weight_map":{"a":"x.safetensors"}}`, 0, map[string]string{"a": "x.safetensors"}},
		{"null metadata", `{"metadata":null,"weight_map":{"a":"x"}}`, 0, map[string]string{"a": "x"}},
		{"float total_size", `{"metadata":{"total_size":1.6e10},"weight_map":{"a":"x"}}`, 16e9, map[string]string{"a": "x"}},
		{"extra keys", `{"format":"pt","metadata":{"total_parameters":7,"x":{"y":[1]},"total_size":8},"weight_map":{"a":"x"},"z":[{}]}`,
			8, map[string]string{"a": "x"}},
		{"dots in names are fine", `{"weight_map":{"a":"..x","b":"x..","c":".hidden","d":"a.b"}}`, 0,
			map[string]string{"a": "..x", "b": "x..", "c": ".hidden", "d": "a.b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := ParseIndex(strings.NewReader(tc.src))
			if err != nil {
				t.Fatalf("ParseIndex = %v", err)
			}
			if ix.TotalSize != tc.total || !maps.Equal(ix.WeightMap, tc.wmap) {
				t.Errorf("ParseIndex = %d, %q; want %d, %q", ix.TotalSize, ix.WeightMap, tc.total, tc.wmap)
			}
		})
	}
}

func TestParseIndexErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		err       error
		line, col int // 0: skip
		tensor    string
		detail    string
	}{
		// Path escapes and other names that are not plain base names.
		{"parent", `{"weight_map":{"a":"../x.safetensors"}}`, ErrIndex, 1, 20, "a", "path separator"},
		{"dot dot", `{"weight_map":{"a":".."}}`, ErrIndex, 1, 20, "a", "not a file"},
		{"dot", `{"weight_map":{"a":"."}}`, ErrIndex, 1, 20, "a", "not a file"},
		{"absolute", `{"weight_map":{"a":"/etc/passwd"}}`, ErrIndex, 1, 20, "a", "path separator"},
		{"subdirectory", `{"weight_map":{"a":"a/b"}}`, ErrIndex, 1, 20, "a", "path separator"},
		{"escaped slash", `{"weight_map":{"a":"..\/x"}}`, ErrIndex, 1, 20, "a", "path separator"},
		{"backslash", `{"weight_map":{"a":"..\\x"}}`, ErrIndex, 1, 20, "a", "path separator"},
		{"windows drive", `{"weight_map":{"a":"C:x"}}`, ErrIndex, 1, 20, "a", "':'"},
		{"NUL", `{"weight_map":{"a":"x\u0000.safetensors"}}`, ErrIndex, 1, 20, "a", "NUL"},
		{"empty name", `{"weight_map":{"a":""}}`, ErrIndex, 1, 20, "a", "is empty"},
		{"second entry escapes", "{\"weight_map\": {\n \"a\": \"x\",\n \"b\": \"../../y\"\n}}", ErrIndex, 3, 7, "b", `"../../y"`},

		// Structure.
		{"no weight_map", `{"metadata":{"total_size":1}}`, ErrIndex, 1, 30, "", "no weight_map"},
		{"empty weight_map", `{"weight_map":{}}`, ErrIndex, 1, 15, "", "weight_map is empty"},
		{"weight_map array", `{"weight_map":["x"]}`, ErrIndex, 1, 15, "", "an array"},
		{"shard not a string", `{"weight_map":{"a":1}}`, ErrIndex, 1, 20, "a", "the number 1"},
		{"shard null", `{"weight_map":{"a":null}}`, ErrIndex, 1, 20, "a", "null"},
		{"not an object", `["x"]`, ErrIndex, 1, 1, "", "an array"},
		{"empty input", ``, ErrJSON, 1, 1, "", "unexpected end"},
		{"syntax error", "{\n\"weight_map\": {\"a\": \"x\",}\n}", ErrJSON, 2, 25, "", "invalid character '}'"},
		{"truncated", `{"weight_map":{"a":"x"`, ErrJSON, 0, 0, "", "unexpected end"},
		{"invalid UTF-8", "{\"weight_map\":{\"a\":\"\xc3\"}}", ErrJSON, 1, 21, "", "UTF-8"},
		{"metadata array", `{"metadata":[],"weight_map":{"a":"x"}}`, ErrIndex, 1, 13, "", "metadata is an array"},
		{"negative total_size", `{"metadata":{"total_size":-1},"weight_map":{"a":"x"}}`, ErrIndex, 1, 27, "", "negative"},
		{"fractional total_size", `{"metadata":{"total_size":1.5},"weight_map":{"a":"x"}}`, ErrIndex, 1, 27, "", "1.5"},
		{"huge total_size", `{"metadata":{"total_size":1e19},"weight_map":{"a":"x"}}`, ErrIndex, 1, 27, "", "1e19"},
		{"string total_size", `{"metadata":{"total_size":"8"},"weight_map":{"a":"x"}}`, ErrIndex, 1, 27, "", "a string"},

		// Duplicates.
		{"duplicate tensor", `{"weight_map":{"a":"x","a":"y"}}`, ErrDuplicate, 1, 24, "a", "mapped twice"},
		{"duplicate weight_map", `{"weight_map":{"a":"x"},"weight_map":{"b":"y"}}`, ErrDuplicate, 1, 25, "", `"weight_map" given twice`},
		{"duplicate total_size", `{"metadata":{"total_size":1,"total_size":2},"weight_map":{"a":"x"}}`, ErrDuplicate, 1, 29, "", `"total_size" given twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := ParseIndex(strings.NewReader(tc.src))
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParseIndex = %+v, %v; want %v", ix, err, tc.err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseIndex = %v (%T), want a *FormatError", err, err)
			}
			if tc.line > 0 && (fe.Line != tc.line || fe.Column != tc.col) {
				t.Errorf("ParseIndex = %v: line %d, column %d; want %d, %d", err, fe.Line, fe.Column, tc.line, tc.col)
			}
			if fe.Tensor != tc.tensor || !strings.Contains(fe.Detail, tc.detail) {
				t.Errorf("ParseIndex = %v: Tensor %q, Detail %q; want %q, containing %q", err, fe.Tensor, fe.Detail, tc.tensor, tc.detail)
			}
		})
	}
}

// errReader fails after returning its data.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestParseIndexReaderError(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ParseIndex(errReader{boom}); !errors.Is(err, boom) {
		t.Errorf("ParseIndex = %v, want %v", err, boom)
	}
}

func TestIndexFiles(t *testing.T) {
	ix := &Index{WeightMap: map[string]string{"a": "2.st", "b": "1.st", "c": "2.st", "d": "3.st"}}
	if got, want := ix.Files(), []string{"1.st", "2.st", "3.st"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Files() = %q, want %q", got, want)
	}
}

// writeFile writes w to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, w *Writer) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, encode(t, w), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseFile parses the safetensors file at path as a caller would.
func parseFile(t *testing.T, path string) *File {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(fh, st.Size())
	if err != nil {
		t.Fatalf("Parse(%s) = %v", path, err)
	}
	return f
}

// TestShardedCheckpoint writes a 2-layer, 8-dim model in two shards and an
// index to a directory and reads it back as a loader would.
func TestShardedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	const dim = 8
	shard1, shard2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	layout := []struct {
		name, shard string
		shape       []int64
	}{
		{"model.embed_tokens.weight", shard1, []int64{16, dim}},
		{"model.layers.0.self_attn.q_proj.weight", shard1, []int64{dim, dim}},
		{"model.layers.0.input_layernorm.weight", shard1, []int64{dim}},
		{"model.layers.1.self_attn.q_proj.weight", shard2, []int64{dim, dim}},
		{"model.layers.1.input_layernorm.weight", shard2, []int64{dim}},
		{"model.norm.weight", shard2, []int64{dim}},
		{"lm_head.weight", shard2, []int64{16, dim}},
	}
	writers := map[string]*Writer{shard1: NewWriter(), shard2: NewWriter()}
	var total int64
	var wm strings.Builder
	for i, l := range layout {
		size, _ := byteSize(BF16, l.shape)
		if err := writers[l.shard].Add(l.name, BF16, l.shape, sequence(int(size), byte(i))); err != nil {
			t.Fatal(err)
		}
		total += size
		if i > 0 {
			wm.WriteString(",\n")
		}
		wm.WriteString(`    "` + l.name + `": "` + l.shard + `"`)
	}
	for name, w := range writers {
		w.SetMetadata("format", "pt")
		writeFile(t, dir, name, w)
	}
	index := "{\n  \"metadata\": {\"total_size\": " + itoa(total) + "},\n  \"weight_map\": {\n" + wm.String() + "\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}

	fh, err := os.Open(filepath.Join(dir, IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	ix, err := ParseIndex(fh)
	if err != nil {
		t.Fatalf("ParseIndex = %v", err)
	}
	if got, want := ix.Files(), []string{shard1, shard2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Files() = %q, want %q", got, want)
	}
	shards := map[string]*File{}
	var sum int64
	for _, name := range ix.Files() {
		f := parseFile(t, filepath.Join(dir, name))
		shards[name] = f
		for _, ti := range f.Tensors {
			sum += ti.Size
		}
	}
	if err := ix.Verify(shards); err != nil {
		t.Errorf("Verify = %v", err)
	}
	if sum != ix.TotalSize {
		t.Errorf("shards hold %d bytes of tensors, total_size is %d", sum, ix.TotalSize)
	}
	for _, l := range layout {
		ti, ok := shards[ix.WeightMap[l.name]].Tensor(l.name)
		if !ok || !reflect.DeepEqual(ti.Shape, l.shape) || ix.WeightMap[l.name] != l.shard {
			t.Errorf("tensor %q: %+v, %v in %s; want shape %v in %s", l.name, ti, ok, ix.WeightMap[l.name], l.shape, l.shard)
		}
	}
}

func TestIndexVerify(t *testing.T) {
	file := func(names ...string) *File {
		w := NewWriter()
		for _, n := range names {
			_ = w.Add(n, U8, []int64{1}, []byte{1})
		}
		f, err := parseBytes(encode(t, w))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ix := &Index{WeightMap: map[string]string{"a": "1", "b": "2"}}
	tests := []struct {
		name   string
		shards map[string]*File
		detail string // "" for success
	}{
		{"ok", map[string]*File{"1": file("a"), "2": file("b")}, ""},
		{"missing shard", map[string]*File{"1": file("a")}, `shard "2" is missing`},
		{"nil shard", map[string]*File{"1": file("a"), "2": nil}, `shard "2" is missing`},
		{"tensor not in its shard", map[string]*File{"1": file("a"), "2": file("c")}, `tensor "b" is mapped to 2, which does not hold it`},
		{"tensor not mapped", map[string]*File{"1": file("a", "c"), "2": file("b")}, `tensor "c" of 1 is not in weight_map`},
		{"tensor in two shards", map[string]*File{"1": file("a", "b"), "2": file("b")}, `tensor "b" of 1 is mapped to 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ix.Verify(tc.shards)
			if tc.detail == "" {
				if err != nil {
					t.Fatalf("Verify = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("Verify = %v, want ErrIndex with %q", err, tc.detail)
			}
		})
	}
}
