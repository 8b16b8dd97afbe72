package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"unsafe"

	"github.com/kvqlabs/kvq/internal/mmap"
	"github.com/kvqlabs/kvq/pkg/kvqerr"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// LoadOptions control Load.
type LoadOptions struct {
	// Tokenizer is the tokenizer file for formats that keep it separately
	// (llama2.c). Empty: tokenizer.bin, then a single tok*.bin, beside the model.
	Tokenizer string
	// Mmap keeps the weights mapped from the model's files in place. By
	// default a file of at least 64 MiB is read into transparent huge
	// pages where Linux has them and half the available memory holds it
	// (mmap.Weights): a decode step streams every weight once, and 2 MiB
	// pages make that faster; mapping costs no copy and shares the page
	// cache, for a model larger than the memory left.
	Mmap bool
}

// Load opens a model and detects its format: a directory is a Hugging Face
// checkpoint (config.json, safetensors, tokenizer.json); a file is GGUF by
// its magic, else a llama2.c checkpoint if its header is plausible and the
// file exactly the size the header implies (see pkg/llama2c); any other
// file fails with ErrFormat. The model's weights stay in memory (mapped, or
// read into huge pages: LoadOptions.Mmap) until Close; a done ctx stops
// the read.
//
// No size a header declares is trusted: each is checked against the
// tensors the file holds, and so against its size, before anything is
// allocated from it, and a mismatch fails with one error naming the file,
// the key and its value.
//
// Errors about the files are of the input kind (kvqerr.IsInput): ErrFormat,
// ErrModel, ErrUnsupported and the parsers' sentinels, and a missing model,
// shard or tokenizer file.
func Load(ctx context.Context, path string, opts LoadOptions) (*Model, error) {
	m, err := load(ctx, path, opts)
	if err != nil && errors.Is(err, fs.ErrNotExist) && !kvqerr.IsInput(err) {
		err = kvqerr.Input(err)
	}
	return m, err
}

func load(ctx context.Context, path string, opts LoadOptions) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: model: %w", err)
	}
	if st.IsDir() {
		return loadHF(ctx, path, opts)
	}
	f, err := mmap.Weights(ctx, path, opts.Mmap)
	if err != nil {
		return nil, fmt.Errorf("runtime: model: %w", err)
	}
	var m *Model
	if bytes.HasPrefix(f.Data, []byte("GGUF")) {
		m, err = loadGGUF(ctx, f, path)
	} else {
		m, err = loadLlama2C(ctx, f, path, opts)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	m.closers = append(m.closers, f)
	if len(m.StopIDs) == 0 && m.Tokenizer != nil && m.Tokenizer.EOS() >= 0 {
		m.StopIDs = []int{m.Tokenizer.EOS()}
	}
	return m, nil
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f32s views b as float32 in place when possible, else decodes a copy.
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// u16s views b as uint16 in place when possible, else decodes a copy.
func u16s(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	v := make([]uint16, len(b)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v
}

// newWeight wraps raw bytes of the given dtype as a [rows][cols] weight.
func newWeight(name string, dt tensor.DType, rows, cols int, data []byte) (*tensor.Weight, error) {
	w := &tensor.Weight{Name: name, DType: dt, Rows: rows, Cols: cols}
	switch dt {
	case tensor.F32:
		w.F32 = f32s(data)
	case tensor.F16, tensor.BF16:
		w.U16 = u16s(data)
	default: // Q8_0 and the other packed block types
		w.Raw = data
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}
