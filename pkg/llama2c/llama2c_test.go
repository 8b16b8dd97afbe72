package llama2c

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

// tiny is a small valid header: dim 8, hidden 16, 2 layers, 2 heads of
// size 4 sharing 1 KV head, vocab 10 (shared classifier), seq_len 6.
var tiny = [7]int32{8, 16, 2, 2, 1, 10, 6}

// size is the exact file size a header implies, written out term by term
// from llama2.c's export.py (legacy version 0).
func size(h [7]int32) int64 {
	dim, hidden, layers, heads, kvHeads, vocab, seq := int64(h[0]), int64(h[1]), int64(h[2]), int64(h[3]), int64(h[4]), int64(h[5]), int64(h[6])
	shared := vocab > 0
	vocab = max(vocab, -vocab)
	hd := dim / heads
	kv := kvHeads * hd
	n := vocab*dim + // token_embedding_table
		layers*dim + // rms_att_weight
		layers*dim*dim + layers*kv*dim + layers*kv*dim + layers*dim*dim + // wq wk wv wo
		layers*dim + // rms_ffn_weight
		3*layers*hidden*dim + // w1 w2 w3
		dim + // rms_final_weight
		2*seq*hd/2 // freq_cis_real, freq_cis_imag
	if !shared {
		n += vocab * dim // wcls
	}
	return HeaderBytes + 4*n
}

// file returns a checkpoint with header h and n bytes in all (header
// included); the weights are zero.
func file(h [7]int32, n int64) []byte {
	b := make([]byte, max(n, HeaderBytes))
	for i, v := range h {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b[:n]
}

func parse(b []byte) (*File, error) { return Parse(bytes.NewReader(b), int64(len(b))) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      [7]int32
		shared bool
	}{
		{"shared classifier", tiny, true},
		{"separate classifier", [7]int32{8, 16, 2, 2, 1, -10, 6}, false},
		{"multi-head attention", [7]int32{16, 24, 1, 4, 4, 7, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(file(tc.h, size(tc.h)))
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			want := Config{Dim: int(tc.h[0]), Hidden: int(tc.h[1]), Layers: int(tc.h[2]), Heads: int(tc.h[3]), KVHeads: int(tc.h[4]),
				Vocab: int(max(tc.h[5], -tc.h[5])), SharedClassifier: tc.shared, SeqLen: int(tc.h[6])}
			if f.Config != want {
				t.Errorf("Config = %+v, want %+v", f.Config, want)
			}
			// The tensors tile the file from the header to its end.
			off := int64(HeaderBytes)
			for _, ts := range f.Tensors {
				if ts.Offset != off {
					t.Errorf("tensor %s at %d, want %d", ts.Name, ts.Offset, off)
				}
				off += 4 * ts.Elems()
			}
			if off != size(tc.h) {
				t.Errorf("tensors end at %d, file is %d bytes", off, size(tc.h))
			}
			_, hasWcls := f.Tensor("wcls")
			if hasWcls == tc.shared {
				t.Errorf("Tensor(wcls) present = %v with shared classifier %v", hasWcls, tc.shared)
			}
			if wq, ok := f.Tensor("wq"); !ok || len(wq.Shape) != 3 || wq.Shape[0] != want.Layers || wq.Shape[1] != want.Dim {
				t.Errorf("Tensor(wq) = %+v, %v", wq, ok)
			}
			if _, ok := f.Tensor("nope"); ok {
				t.Error("Tensor(nope) found")
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	with := func(i int, v int32) [7]int32 { h := tiny; h[i] = v; return h }
	separate := with(5, -tiny[5])
	for _, tc := range []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrHeader, "0 bytes, header needs 28"},
		{"short", file(tiny, 27), ErrHeader, "27 bytes"},
		{"text", []byte("Once upon a time there was a little model."), ErrHeader, "dim = 1701015119"},
		{"zero dim", file(with(0, 0), size(tiny)), ErrHeader, "dim = 0"},
		{"negative hidden", file(with(1, -16), size(tiny)), ErrHeader, "hidden_dim = -16"},
		{"huge layers", file(with(2, math.MaxInt32), size(tiny)), ErrHeader, "n_layers = 2147483647"},
		{"zero heads", file(with(3, 0), size(tiny)), ErrHeader, "n_heads = 0"},
		{"zero kv heads", file(with(4, 0), size(tiny)), ErrHeader, "n_kv_heads = 0"},
		{"zero vocab", file(with(5, 0), size(tiny)), ErrHeader, "vocab_size = 0"},
		{"min vocab", file(with(5, math.MinInt32), size(tiny)), ErrHeader, "vocab_size = "},
		{"huge seq_len", file(with(6, 1<<21), size(tiny)), ErrHeader, "seq_len = 2097152"},
		{"heads do not divide dim", file(with(3, 3), size(tiny)), ErrHeader, "not a multiple of n_heads 3"},
		{"kv heads do not divide heads", file(with(4, 3), size(tiny)), ErrHeader, "not a multiple of n_kv_heads 3"},
		{"more kv heads than heads", file(with(4, 4), size(tiny)), ErrHeader, "not a multiple of n_kv_heads 4"},
		{"odd head size", file([7]int32{6, 16, 2, 2, 1, 10, 6}, 1000), ErrHeader, "head size 3 is odd"},
		{"one byte short", file(tiny, size(tiny)-1), ErrTruncated, "file has"},
		{"one byte long", file(tiny, size(tiny)+1), ErrTruncated, "file has"},
		{"separate classifier missing", file(separate, size(tiny)), ErrTruncated, "separate classifier"},
		{"shared classifier with wcls", file(tiny, size(separate)), ErrTruncated, "shared classifier"},
		{"largest header", file([7]int32{1 << 20, 1 << 20, 1 << 20, 1 << 19, 1 << 19, 1 << 20, 1 << 20}, 4096), ErrTruncated, "more than 2^63 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(tc.data)
			if !errors.Is(err, tc.want) || err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Parse = %v, %v; want %v mentioning %q", f, err, tc.want, tc.msg)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, allocates a bounded amount
// whatever the header says (it reads 28 bytes and lists at most 14
// tensors), and that what it accepts tiles the input exactly with tensors
// of the shapes the header implies.
func FuzzParse(f *testing.F) {
	f.Add(file(tiny, size(tiny)))
	sep := tiny
	sep[5] = -sep[5]
	f.Add(file(sep, size(sep)))
	f.Add(file(tiny, size(tiny)-4))
	f.Add([]byte("GGUF\x03\x00\x00\x00 not a llama2.c checkpoint"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var file *File
		var err error
		allocated := allocatedBy(func() { file, err = parse(data) })
		if allocated > 16<<10 {
			t.Fatalf("Parse of %d bytes allocated %d bytes", len(data), allocated)
		}
		if err != nil {
			if !errors.Is(err, ErrHeader) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("Parse error %v wraps no sentinel", err)
			}
			return
		}
		c := file.Config
		if size(headerOf(c)) != int64(len(data)) {
			t.Fatalf("accepted %d bytes for %+v, which implies %d", len(data), c, size(headerOf(c)))
		}
		off := int64(HeaderBytes)
		for _, ts := range file.Tensors {
			if ts.Offset != off {
				t.Fatalf("tensor %s at %d, want %d", ts.Name, ts.Offset, off)
			}
			off += 4 * ts.Elems()
		}
		if off != int64(len(data)) {
			t.Fatalf("tensors end at %d of %d bytes", off, len(data))
		}
	})
}

func headerOf(c Config) [7]int32 {
	v := int32(c.Vocab)
	if !c.SharedClassifier {
		v = -v
	}
	return [7]int32{int32(c.Dim), int32(c.Hidden), int32(c.Layers), int32(c.Heads), int32(c.KVHeads), v, int32(c.SeqLen)}
}

func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
