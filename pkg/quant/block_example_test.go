package quant_test

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// One block of 32 values in llama.cpp's q4_0: an fp16 scale and 16 bytes of
// 4-bit codes, 18 bytes in all.
func ExampleQuantizeRowQ40() {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i) / 4
	}
	b := make([]byte, 18)
	quant.QuantizeRowQ40(b, x)
	y := make([]float32, 32)
	quant.DequantizeRowQ40(y, b)
	fmt.Printf("% x\n", b[:4])
	fmt.Println(x[5], "→", y[5], "|", x[31], "→", y[31])
	// Output:
	// c0 bb 48 48
	// 1.25 → 0.96875 | 7.75 → 7.75
}

// The llama.cpp cache types are formats of the registry, with and without
// llama.cpp's Hadamard rotation.
func ExampleRegistry_Lookup_llamacpp() {
	r := quant.Formats()
	for _, name := range []string{"q8_0", "q4_0:rot"} {
		f, _ := r.Lookup(name)
		c, _ := f.NewCodec(quant.CodecParams{Dim: 128})
		fmt.Println(f.Name(), c.TileBytes(1), "bytes per token and head")
	}
	_, err := r.MustLookup("q4_0").NewCodec(quant.CodecParams{Dim: 80})
	fmt.Println(err)
	// Output:
	// q8_0 136 bytes per token and head
	// q4_0:rot 72 bytes per token and head
	// quant: unsupported head size: q4_0: head size 80 is not a multiple of the block size 32 (llama.cpp refuses it too)
}
