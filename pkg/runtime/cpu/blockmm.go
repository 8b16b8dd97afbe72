package cpu

import (
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// blockTypes maps the packed weight dtypes other than Q8_0 (which has its
// own SIMD kernels) to the GGML types pkg/gguf decodes.
var blockTypes = map[tensor.DType]gguf.Type{
	tensor.Q40: gguf.Q40, tensor.Q41: gguf.Q41, tensor.Q50: gguf.Q50, tensor.Q51: gguf.Q51,
	tensor.Q2K: gguf.Q2K, tensor.Q3K: gguf.Q3K, tensor.Q4K: gguf.Q4K, tensor.Q5K: gguf.Q5K, tensor.Q6K: gguf.Q6K,
	tensor.IQ4NL: gguf.IQ4NL, tensor.IQ4XS: gguf.IQ4XS, tensor.MXFP4: gguf.MXFP4,
}

// rowScratch recycles the float32 rows matMulBlocks decodes into.
var rowScratch = sync.Pool{New: func() any { return new([]float32) }}

// matMulBlocks is matMulRows for the packed GGML block types (the Go path;
// they have no SIMD kernels yet): each weight row r in [lo, hi) is decoded
// once into a scratch row of cols float32 values, exactly as ggml's
// dequantize_row_* does (gguf.DequantizeRow), and dotted with every token
// row x_t in fp32 (simd.DotF32): dst[t*ldd+r] = DotF32(W_r, x_t). The
// activations stay fp32 (llama.cpp quantizes them to Q8_K or Q8_0 for these
// products; docs/weight-formats.md shows the difference), and a token's
// result does not depend on how many tokens share the call. The whole
// matrix is never decoded: one row at a time, per goroutine.
func matMulBlocks(dst []float32, ldd int, x []float32, nt, cols int, w *tensor.Weight, lo, hi int) {
	gt, ok := blockTypes[w.DType]
	if !ok {
		panic("cpu: MatMul on unsupported dtype " + w.DType.String())
	}
	rb := w.DType.RowBytes(cols)
	sp := rowScratch.Get().(*[]float32)
	if cap(*sp) < cols {
		*sp = make([]float32, cols)
	}
	row := (*sp)[:cols]
	for r := lo; r < hi; r++ {
		gguf.DequantizeRow(gt, row, w.Raw[r*rb:(r+1)*rb])
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = simd.DotF32(row, x[t*cols:(t+1)*cols])
		}
	}
	rowScratch.Put(sp)
}
