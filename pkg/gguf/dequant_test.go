package gguf

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goldenRow is one row of testdata/ggml/<type>.txt: the float32 input,
// the blocks ggml's ggml_quantize_chunk made of it (no importance matrix,
// the path llama-quantize takes) and ggml's to_float of those blocks. The
// files were written by a small C program linking llama.cpp's libggml
// (build 1eeb523c, September 2025), run outside the repository; see
// docs/weight-formats.md.
type goldenRow struct {
	in, out []float32
	q       []byte
}

func readGolden(t *testing.T, typ Type) []goldenRow {
	t.Helper()
	path := filepath.Join("testdata", "ggml", typ.String()+".txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	floats := func(fields []string) []float32 {
		v := make([]float32, len(fields))
		for i, s := range fields {
			u, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			v[i] = math.Float32frombits(uint32(u))
		}
		return v
	}
	var rows []goldenRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] == "#" {
			continue
		}
		switch fields[0] {
		case "in":
			rows = append(rows, goldenRow{in: floats(fields[1:])})
		case "q":
			b, err := hex.DecodeString(fields[1])
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			rows[len(rows)-1].q = b
		case "out":
			rows[len(rows)-1].out = floats(fields[1:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows", path)
	}
	return rows
}

// goldenTypes are the quantized types with llama.cpp goldens.
var goldenTypes = []Type{Q40, Q41, Q50, Q51, Q80, Q2K, Q3K, Q4K, Q5K, Q6K, Q8K, IQ4NL, IQ4XS, MXFP4}

func TestDequantizeGolden(t *testing.T) {
	for _, typ := range goldenTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for r, row := range readGolden(t, typ) {
				n := len(row.in)
				if want, _ := typ.RowBytes(int64(n)); int64(len(row.q)) != want {
					t.Fatalf("row %d: %d bytes of blocks, want %d", r, len(row.q), want)
				}
				got := make([]float32, n)
				DequantizeRow(typ, got, row.q)
				bad := 0
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(row.out[i]) {
						if bad < 5 {
							t.Errorf("row %d value %d: got %g (%08x), ggml %g (%08x)", r, i, got[i], math.Float32bits(got[i]), row.out[i], math.Float32bits(row.out[i]))
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("row %d: %d of %d values differ from ggml", r, bad, n)
				}
			}
		})
	}
}

// TestQuantizeGolden checks that QuantizeRow writes the blocks ggml's
// reference quantizers write, byte for byte.
func TestQuantizeGolden(t *testing.T) {
	for _, typ := range goldenTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for r, row := range readGolden(t, typ) {
				got := make([]byte, len(row.q))
				for i := range got {
					got[i] = 0xa5 // QuantizeRow must write every byte
				}
				QuantizeRow(typ, got, row.in)
				if !bytes.Equal(got, row.q) {
					bs := typ.TypeSize()
					for b := 0; b < len(got)/bs; b++ {
						if !bytes.Equal(got[b*bs:(b+1)*bs], row.q[b*bs:(b+1)*bs]) {
							t.Errorf("row %d block %d:\n got %x\nggml %x", r, b, got[b*bs:(b+1)*bs], row.q[b*bs:(b+1)*bs])
							break
						}
					}
				}
			}
		})
	}
}
