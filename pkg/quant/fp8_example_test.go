package quant_test

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
)

func ExampleEncodeE4M3() {
	for _, x := range []float32{1, 0.3, 464, 500} {
		sat, torch := quant.EncodeE4M3(x, true), quant.EncodeE4M3(x, false)
		fmt.Printf("%v → %#02x (%v), non-saturating %#02x (%v)\n", x, sat, quant.DecodeE4M3(sat), torch, quant.DecodeE4M3(torch))
	}
	// Output:
	// 1 → 0x38 (1), non-saturating 0x38 (1)
	// 0.3 → 0x2a (0.3125), non-saturating 0x2a (0.3125)
	// 464 → 0x7e (448), non-saturating 0x7e (448)
	// 500 → 0x7e (448), non-saturating 0x7f (NaN)
}

// vLLM's fp8 KV cache with a scale per KV head: code = fp8(x/scale), so 100
// with scale 0.25 stores 400, which ties between 384 and 416 and rounds to
// the even mantissa: 384, read back as 96.
func ExampleNewFP8() {
	scales, err := quant.ParseFP8Scales([]byte(`{"k_scale": {"0": [0.5, 0.25]}, "v_scale": {"0": 0.125}}`), "scales.json")
	if err != nil {
		panic(err)
	}
	f, err := quant.NewFP8(quant.E4M3, quant.FP8Options{Scales: scales})
	if err != nil {
		panic(err)
	}
	c, _ := f.NewCodec(quant.CodecParams{Dim: 4, Layer: 0, Head: 1, Key: true})
	tile := make([]byte, c.TileBytes(1))
	c.Encode(tile, 0, []float32{1, -2, 100, 0.001}, 1)
	out := make([]float32, 4)
	c.Decode(out, tile, 0, 1)
	fmt.Println(f.Name())
	fmt.Printf("% x → %v\n", tile, out)
	// Output:
	// fp8-e4m3:scales@scales.json
	// 48 d0 7c 02 → [1 -2 96 0.0009765625]
}
