package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"strings"

	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// Write a tiny file, parse it back and read a tensor's data. With a file on
// disk, pass the *os.File and its size from Stat to Parse.
func Example() {
	w := safetensors.NewWriter()
	w.SetMetadata("format", "pt")
	norm := make([]byte, 0, 4*4)
	for _, x := range []float32{1, 1, 0.5, 2} {
		norm = binary.LittleEndian.AppendUint32(norm, math.Float32bits(x))
	}
	if err := w.Add("model.norm.weight", safetensors.F32, []int64{4}, norm); err != nil {
		log.Fatal(err)
	}
	if err := w.Add("lm_head.weight", safetensors.BF16, []int64{3, 4}, make([]byte, 3*4*2)); err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		log.Fatal(err)
	}

	r := bytes.NewReader(buf.Bytes())
	f, err := safetensors.Parse(r, r.Size())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Metadata["format"], len(f.Tensors), "tensors, data at", f.DataOffset)
	for _, t := range f.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Size, "bytes at", t.Offset)
	}

	t, _ := f.Tensor("model.norm.weight")
	data := make([]byte, t.Size)
	if _, err := r.ReadAt(data, t.Offset); err != nil {
		log.Fatal(err)
	}
	fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(data[8:])))
	// Output:
	// pt 2 tensors, data at 184
	// model.norm.weight F32 [4] 16 bytes at 184
	// lm_head.weight BF16 [3 4] 24 bytes at 200
	// 0.5
}

// Malformed headers give a *FormatError that says where and what, wrapping a
// sentinel error.
func ExampleParse_errors() {
	header := `{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}`
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	data = append(append(data, header...), make([]byte, 12)...)

	_, err := safetensors.Parse(bytes.NewReader(data), int64(len(data)))
	fmt.Println(errors.Is(err, safetensors.ErrOffsets))
	var fe *safetensors.FormatError
	if errors.As(err, &fe) {
		fmt.Printf("tensor %s, line %d, column %d: %s\n", fe.Tensor, fe.Line, fe.Column, fe.Detail)
	}
	// Output:
	// true
	// tensor w, line 1, column 57: data_offsets [0, 12] span 12 bytes, but F32 [2 2] needs 16
}

// Read a sharded checkpoint's index and list its shards. A loader joins each
// name to the model directory, opens it and parses it with Parse.
func ExampleParseIndex() {
	index := `{
  "metadata": {"total_size": 4096},
  "weight_map": {
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors"
  }
}`
	ix, err := safetensors.ParseIndex(strings.NewReader(index))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ix.TotalSize, ix.Files())
	fmt.Println(ix.WeightMap["model.norm.weight"])

	_, err = safetensors.ParseIndex(strings.NewReader(`{"weight_map": {"w": "../../etc/passwd"}}`))
	fmt.Println(err)
	// Output:
	// 4096 [model-00001-of-00002.safetensors model-00002-of-00002.safetensors]
	// model-00002-of-00002.safetensors
	// safetensors: bad index: tensor "w": shard file name "../../etc/passwd" contains a path separator (line 1, column 22, offset 21)
}
