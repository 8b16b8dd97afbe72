// Package llama2c parses checkpoints in the llama2.c format (Andrej
// Karpathy's "legacy" version 0 export): a header of seven little-endian int32
// followed by float32 weights in a fixed order. It validates the header against
// the file size and reports where each tensor lies; it never reads weights.
//
// The format has no magic number, so Parse is strict: every header value
// must lie in 1..2^20 (vocab_size's sign says whether the output classifier
// is the embedding, > 0, or a separate wcls tensor at the end, < 0), the
// heads must divide the dimension evenly into heads of even size, and the
// file must be exactly as long as the header implies. Anything else fails
// with ErrHeader or ErrTruncated, so that a file of another format is not
// taken for a checkpoint.
package llama2c

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors.
var (
	ErrHeader    = kvqerr.New("llama2c: bad header")
	ErrTruncated = kvqerr.New("llama2c: file size disagrees with header")
)

// HeaderBytes is the size of the header.
const HeaderBytes = 28

// Config is the header.
type Config struct {
	Dim, Hidden, Layers, Heads, KVHeads int
	Vocab                               int  // always positive here
	SharedClassifier                    bool // vocab_size > 0 in the file: output head = embedding
	SeqLen                              int
}

// HeadDim is Dim / Heads.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// Tensor locates one weight array.
type Tensor struct {
	Name   string
	Offset int64 // bytes from the start of the file
	Shape  []int // row-major; the last dimension is the row length
}

// Elems is the number of float32 values.
func (t Tensor) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// File is a parsed checkpoint.
type File struct {
	Config
	Tensors []Tensor
}

// Parse reads and validates the header of a checkpoint of the given size.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	var hdr [HeaderBytes]byte
	if size < HeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes, header needs %d", ErrHeader, size, HeaderBytes)
	}
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeader, err)
	}
	var v [7]int32
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(hdr[4*i:]))
	}
	c := Config{Dim: int(v[0]), Hidden: int(v[1]), Layers: int(v[2]), Heads: int(v[3]), KVHeads: int(v[4]), Vocab: int(v[5]), SeqLen: int(v[6])}
	c.SharedClassifier = c.Vocab > 0
	if c.Vocab < 0 {
		c.Vocab = -c.Vocab
	}
	const limit = 1 << 20
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", c.Dim}, {"hidden_dim", c.Hidden}, {"n_layers", c.Layers}, {"n_heads", c.Heads}, {"n_kv_heads", c.KVHeads}, {"vocab_size", c.Vocab}, {"seq_len", c.SeqLen}} {
		if f.v <= 0 || f.v > limit {
			return nil, fmt.Errorf("%w: %s = %d (want 1..%d)", ErrHeader, f.name, f.v, limit)
		}
	}
	if c.Dim%c.Heads != 0 {
		return nil, fmt.Errorf("%w: dim %d is not a multiple of n_heads %d", ErrHeader, c.Dim, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("%w: n_heads %d is not a multiple of n_kv_heads %d", ErrHeader, c.Heads, c.KVHeads)
	}
	if c.HeadDim()%2 != 0 {
		return nil, fmt.Errorf("%w: head size %d is odd", ErrHeader, c.HeadDim())
	}
	f := &File{Config: c}
	L, d, hd, kv := c.Layers, c.Dim, c.HeadDim(), c.KVHeads*c.HeadDim()
	// Each shape is at most three header values of at most 2^20, so one
	// tensor's bytes fit in an int64 (2^62), but their sum may not: add with
	// saturation, so that a header implying more than 2^63 bytes is simply
	// too large for the file and never wraps round to its size.
	off := int64(HeaderBytes)
	add := func(name string, shape ...int) {
		t := Tensor{Name: name, Offset: off, Shape: shape}
		f.Tensors = append(f.Tensors, t)
		off = satAdd(off, 4*t.Elems())
	}
	add("token_embedding_table", c.Vocab, d)
	add("rms_att_weight", L, d)
	add("wq", L, d, d)
	add("wk", L, kv, d)
	add("wv", L, kv, d)
	add("wo", L, d, d)
	add("rms_ffn_weight", L, d)
	add("w1", L, c.Hidden, d)
	add("w2", L, d, c.Hidden)
	add("w3", L, c.Hidden, d)
	add("rms_final_weight", d)
	add("freq_cis_real", c.SeqLen, hd/2)
	add("freq_cis_imag", c.SeqLen, hd/2)
	if !c.SharedClassifier {
		add("wcls", c.Vocab, d)
	}
	if off != size {
		classifier := "shared classifier (vocab_size > 0)"
		if !c.SharedClassifier {
			classifier = "separate classifier wcls (vocab_size < 0)"
		}
		implies := fmt.Sprintf("%d bytes", off)
		if off == math.MaxInt64 {
			implies = "more than 2^63 bytes"
		}
		return nil, fmt.Errorf("%w: header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, %s, seq_len %d) implies %s, file has %d",
			ErrTruncated, c.Dim, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.Vocab, classifier, c.SeqLen, implies, size)
	}
	return f, nil
}

// satAdd returns a+b (both ≥ 0), or math.MaxInt64 if that overflows.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}
