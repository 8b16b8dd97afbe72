package cpu

import (
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// blockTypes maps the packed weight dtypes other than Q8_0 (which has its
// own SIMD kernels, simd.MatMulQ80, and its q8Dots entry) to the GGML
// types pkg/gguf decodes.
var blockTypes = map[tensor.DType]gguf.Type{
	tensor.Q40: gguf.Q40, tensor.Q41: gguf.Q41, tensor.Q50: gguf.Q50, tensor.Q51: gguf.Q51,
	tensor.Q2K: gguf.Q2K, tensor.Q3K: gguf.Q3K, tensor.Q4K: gguf.Q4K, tensor.Q5K: gguf.Q5K, tensor.Q6K: gguf.Q6K,
	tensor.IQ4NL: gguf.IQ4NL, tensor.IQ4XS: gguf.IQ4XS, tensor.MXFP4: gguf.MXFP4,
}

// fusedDots are the block types with a SIMD dot product over their packed
// blocks and float32 activations, which matMulBlocks uses below the packed
// threshold (simd.MatMulDecodedTokens) where q8Dots has no entry or the
// backend keeps float32 activations (Backend.F32Activations): each token
// then decodes the blocks again inside the kernel, in registers, never
// into a float32 row. q4_K, q5_K, q4_1 and q5_1 take the
// activations' 32-value group sums (simd.GroupSums32, once per token and
// call): q4_K and q5_K keep the scales out of their inner loop
// (simd.DotQ4KSums, DotQ5KSums, as llama.cpp arranges its k-quant dots),
// q4_1 and q5_1 add m·(group sum) per block (simd.DotQ41, DotQ51). q6_K
// decodes each value (simd.DotQ6K); q4_0, q5_0, iq4_nl, iq4_xs and mxfp4
// multiply each block's integer values with the activations and scale the
// block's sum once (simd.DotQ40 …). q2_K and q3_K decode 4 super-blocks at
// a time onto the stack and dot them (simd.DotQ2K, DotQ3K).
var fusedDots = map[tensor.DType]func(w []byte, x, xs []float32) float32{
	tensor.Q4K:   simd.DotQ4KSums,
	tensor.Q5K:   simd.DotQ5KSums,
	tensor.Q6K:   func(w []byte, x, _ []float32) float32 { return simd.DotQ6K(w, x) },
	tensor.Q40:   func(w []byte, x, _ []float32) float32 { return simd.DotQ40(w, x) },
	tensor.Q41:   simd.DotQ41,
	tensor.Q50:   func(w []byte, x, _ []float32) float32 { return simd.DotQ50(w, x) },
	tensor.Q51:   simd.DotQ51,
	tensor.IQ4NL: func(w []byte, x, _ []float32) float32 { return simd.DotIQ4NL(w, x) },
	tensor.IQ4XS: func(w []byte, x, _ []float32) float32 { return simd.DotIQ4XS(w, x) },
	tensor.MXFP4: func(w []byte, x, _ []float32) float32 { return simd.DotMXFP4(w, x) },
	tensor.Q2K:   func(w []byte, x, _ []float32) float32 { return simd.DotQ2K(w, x) },
	tensor.Q3K:   func(w []byte, x, _ []float32) float32 { return simd.DotQ3K(w, x) },
}

// groupSumDots are the fusedDots that read the activations' group sums.
var groupSumDots = map[tensor.DType]bool{tensor.Q4K: true, tensor.Q5K: true, tensor.Q41: true, tensor.Q51: true}

// q8Dot is one block type's decode product on quantized activations: the
// integer dot of a weight row with a token row's codes, its multi-row form
// (each row the one-row dot's bits; nil where the type has none), which
// one-token products take over their rows, the quantizer of the token rows,
// the values and bytes of one activation block, and its int8 tile GEMM
// over several token rows (each output the one-row dot's bits; nil where
// the type has none: then prefill keeps float32 activations, q8Prefill).
type q8Dot struct {
	dot         func(w, q []byte) float32
	rows        func(dst []float32, w, q []byte)
	quant       func(dst []byte, x []float32)
	vals, bytes int
	tile        func(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int)
}

// q8Dots are the weight types whose decode products (below the packed
// threshold, packTokens: simd.MatMulDecodedTokens, and
// simd.MatMulPackTokensQ80 for Q8_0) take the activations quantized, as
// llama.cpp's do: each token row of x is quantized once per matrix
// product (before the rows are split among the workers) to Q8_K blocks
// (q4_K, q5_K, q6_K; simd.QuantizeQ8K, bit for bit as ggml's
// quantize_row_q8_K_ref), Q8_0 blocks (q4_0, q5_0, iq4_nl, mxfp4, q8_0) or
// Q8_1 blocks (q4_1, q5_1), byte for byte as llama.cpp's x86
// quantize_row_q8_0/q8_1 (simd.QuantizeQ80, QuantizeQ81), and every weight
// row is dotted with the codes in integer arithmetic (simd.DotQ4KQ8K,
// DotQ40Q80, DotQ80Q80 …; the results agree with ggml_vec_dot_*_q8_* up
// to float32 rounding). A token's result is the one-row dot's whatever the
// number of tokens in the call. Q8_0, q4_0, q5_0, iq4_nl, q4_K, q5_K and
// q6_K weights take quantized activations at every number of token rows,
// on every CPU (q8Prefill): prefill multiplies the codes in the int8 tile
// GEMMs of simd.MatMulQ80Q80, MatMulQ40Q80, MatMulQ50Q80, MatMulIQ4NLQ80
// (their blocks widened to Q8_0 panel by panel), MatMulQ4KQ8K,
// MatMulQ5KQ8K and MatMulQ6KQ8K, each output the one-row dot's bits, so a token's logits are
// the same in a decode step and a prefill. The other types' prefill
// (simd.MatMulDecoded) keeps fp32
// activations, so there a token's logits differ slightly between a decode
// step and a prefill.
var q8Dots = map[tensor.DType]q8Dot{
	tensor.Q4K:   {simd.DotQ4KQ8K, simd.DotQ4KQ8KRows, simd.QuantizeQ8K, 256, simd.Q8KBlockBytes, simd.MatMulQ4KQ8K},
	tensor.Q5K:   {simd.DotQ5KQ8K, nil, simd.QuantizeQ8K, 256, simd.Q8KBlockBytes, simd.MatMulQ5KQ8K},
	tensor.Q6K:   {simd.DotQ6KQ8K, simd.DotQ6KQ8KRows, simd.QuantizeQ8K, 256, simd.Q8KBlockBytes, simd.MatMulQ6KQ8K},
	tensor.Q40:   {simd.DotQ40Q80, simd.DotQ40Q80Rows, simd.QuantizeQ80, 32, simd.Q80BlockBytes, simd.MatMulQ40Q80},
	tensor.Q41:   {simd.DotQ41Q81, nil, simd.QuantizeQ81, 32, simd.Q81BlockBytes, nil},
	tensor.Q50:   {simd.DotQ50Q80, simd.DotQ50Q80Rows, simd.QuantizeQ80, 32, simd.Q80BlockBytes, simd.MatMulQ50Q80},
	tensor.Q51:   {simd.DotQ51Q81, nil, simd.QuantizeQ81, 32, simd.Q81BlockBytes, nil},
	tensor.IQ4NL: {simd.DotIQ4NLQ80, simd.DotIQ4NLQ80Rows, simd.QuantizeQ80, 32, simd.Q80BlockBytes, simd.MatMulIQ4NLQ80},
	tensor.MXFP4: {simd.DotMXFP4Q80, nil, simd.QuantizeQ80, 32, simd.Q80BlockBytes, nil},
	tensor.Q80:   {simd.DotQ80Q80, simd.DotQ80Q80Rows, simd.QuantizeQ80, 32, simd.Q80BlockBytes, simd.MatMulQ80Q80},
}

// q8RowBytes returns the bytes of one token row of w's quantized
// activations (0 for a type without q8Dots).
func q8RowBytes(w *tensor.Weight) int {
	d, ok := q8Dots[w.DType]
	if !ok {
		return 0
	}
	return w.Cols / d.vals * d.bytes
}

// matMulQ8 sets dst[t*ldd+r], r in [lo, hi), to weight row r's q8Dots dot
// with token row t of q8 (quantizeTokens), t < nt: one token takes the
// type's multi-row form where it has one, several token rows its tile GEMM
// where it has one (Q8_0, q4_0, q5_0, iq4_nl, q4_K, q5_K, q6_K:
// simd.MatMulQ80Q80, MatMulQ40Q80, MatMulQ50Q80, MatMulIQ4NLQ80,
// MatMulQ4KQ8K, MatMulQ5KQ8K, MatMulQ6KQ8K; the same bits).
func matMulQ8(dst []float32, ldd int, q8 []byte, nt int, w *tensor.Weight, lo, hi int) {
	d := q8Dots[w.DType]
	rb, qrb := w.DType.RowBytes(w.Cols), q8RowBytes(w)
	if d.tile != nil && nt > 1 {
		d.tile(dst, ldd, q8, nt, w.Cols, w.Raw, lo, hi)
		return
	}
	if d.rows != nil && nt == 1 {
		d.rows(dst[lo:hi], w.Raw[lo*rb:hi*rb], q8[:qrb])
		return
	}
	for r := lo; r < hi; r++ {
		wr := w.Raw[r*rb : (r+1)*rb]
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = d.dot(wr, q8[t*qrb:(t+1)*qrb])
		}
	}
}

// q8Scratch recycles the activation buffers of quantizeTokens.
var q8Scratch = sync.Pool{New: func() any { return new([]byte) }}

// quantizeTokens returns the nt token rows of x quantized for w's q8Dots
// in a buffer from q8Scratch (releaseTokens gives it back), where w's
// products of perCall token rows at a time take them (below the packed
// threshold; at any number where q8Prefill) unless f32Act
// (Backend.F32Activations), or nil.
func quantizeTokens(x []float32, nt int, w *tensor.Weight, perCall int, f32Act bool) *[]byte {
	d, ok := q8Dots[w.DType]
	if f32Act || !ok || nt == 0 || perCall >= packTokens(w.DType) && !q8Prefill(w.DType) || w.Cols%d.vals != 0 {
		return nil
	}
	rb := q8RowBytes(w)
	sp := q8Scratch.Get().(*[]byte)
	if cap(*sp) < nt*rb {
		*sp = make([]byte, nt*rb)
	}
	*sp = (*sp)[:nt*rb]
	for t := 0; t < nt; t++ {
		d.quant((*sp)[t*rb:(t+1)*rb], x[t*w.Cols:(t+1)*w.Cols])
	}
	return sp
}

// q8Prefill reports whether products over weights of type dt take
// quantized activations at every number of token rows (unless
// F32Activations): the types whose q8Dots entry has a tile GEMM. On every
// CPU, so that kvq's arithmetic (and kvq eval's
// numbers) do not depend on the kernel set: Q8_0, whose prefill runs
// simd.MatMulQ80Q80's int8 tile GEMM, on the Zen 4 (AVX-512 VNNI) 3.2–3.6×
// the packed fp32 GEMM of simd.MatMulQ80 (quantization included;
// docs/performance.md), with its AVX2 tiles (ForceAVX2) 1.05–1.5×; and
// q4_K, q5_K and q6_K, their prefill through simd.MatMulQ4KQ8K's,
// MatMulQ5KQ8K's and MatMulQ6KQ8K's int8 tile GEMMs, on the Zen 4 with
// VNNI 3.2–3.8×, 2.9–3.3× and 2.9–3.3× MatMulDecoded's packed fp32 GEMM,
// with their AVX2 tiles (ForceAVX2) 1.6–2.0×, 1.6–1.8× and 1.3–1.5× at
// 32–512 token rows (simd.MatMulKQ8KPacked); and q4_0, q5_0 and iq4_nl
// through simd.MatMulQ40Q80, MatMulQ50Q80 and MatMulIQ4NLQ80
// (MatMulQ80Q80's tiles on their blocks widened to Q8_0).
// The 1B-shape Q4_0 file's two-thread prefill of 512 tokens on the Zen 4:
// see docs/performance.md, "Q4_0, Q5_0 and IQ4_NL prefill on the Q8_0 tiles".
func q8Prefill(dt tensor.DType) bool { return q8Dots[dt].tile != nil }

// q8Bytes returns *sp, nil for nil.
func q8Bytes(sp *[]byte) []byte {
	if sp == nil {
		return nil
	}
	return *sp
}

// releaseTokens returns quantizeTokens' buffer (nil: none) to q8Scratch.
func releaseTokens(sp *[]byte) {
	if sp != nil {
		q8Scratch.Put(sp)
	}
}

// rowDecoder decodes a weight's rows for simd.MatMulDecoded.
type rowDecoder struct {
	w      *tensor.Weight
	gt     gguf.Type
	rb     int // bytes per row
	bs, ts int // values and bytes per block
}

// DecodeRow implements simd.RowDecoder.
func (d *rowDecoder) DecodeRow(dst []float32, r, c0 int) {
	off := r*d.rb + c0/d.bs*d.ts
	decodeRow(d.gt, dst, d.w.Raw[off:off+len(dst)/d.bs*d.ts])
}

// decodeRow decodes one row of type gt as gguf.DequantizeRow does (ggml's
// to_float, bit for bit), with simd's decoders (every type the backend
// runs has one; gguf.DequantizeRow is the fallback for any other).
func decodeRow(gt gguf.Type, dst []float32, src []byte) {
	switch gt {
	case gguf.Q4K:
		simd.Q4KToF32(dst, src)
	case gguf.Q5K:
		simd.Q5KToF32(dst, src)
	case gguf.Q6K:
		simd.Q6KToF32(dst, src)
	case gguf.Q40:
		simd.Q40ToF32(dst, src)
	case gguf.Q41:
		simd.Q41ToF32(dst, src)
	case gguf.Q50:
		simd.Q50ToF32(dst, src)
	case gguf.Q51:
		simd.Q51ToF32(dst, src)
	case gguf.IQ4NL:
		simd.IQ4NLToF32(dst, src)
	case gguf.IQ4XS:
		simd.IQ4XSToF32(dst, src)
	case gguf.MXFP4:
		simd.MXFP4ToF32(dst, src)
	case gguf.Q2K:
		simd.Q2KToF32(dst, src)
	case gguf.Q3K:
		simd.Q3KToF32(dst, src)
	default:
		gguf.DequantizeRow(gt, dst, src)
	}
}

// rowScratch recycles the float32 rows matMulBlocks decodes into.
var rowScratch = sync.Pool{New: func() any { return new([]float32) }}

// matMulBlocks is matMulRows for the packed GGML block types, the whole
// matrix never decoded. From simd.MatMulDecodedTokens() token rows
// (prefill; packTokens reports that threshold, so that matMul keeps every
// run of one call on one side of it, and its row chunks at multiples of
// 16), 16-row panels are decoded a block of 256 columns at a time and
// multiplied in simd's packed micro-kernels (simd.MatMulDecoded). Below it
// q4_K, q5_K, q6_K, the legacy types, iq4_nl and mxfp4 with q8 (x
// quantized, quantizeTokens)
// take their integer dots over the blocks and the activations' codes
// (q8Dots), and otherwise every block type its SIMD dot product over the
// packed blocks (fusedDots). A type without one, and the rows past the last whole panel, each
// weight row r in [lo, hi) is decoded once into a scratch row of cols
// float32 values, exactly as ggml's dequantize_row_* does (decodeRow), and
// dotted with every token row x_t (simd.DotF32). Apart from q8's decode
// products the activations stay fp32 (llama.cpp quantizes them to Q8_K or Q8_0 for these products;
// docs/weight-formats.md shows the difference), and a token's result does
// not depend on how many tokens share the call (on either side of the
// threshold).
func matMulBlocks(dst []float32, ldd int, x []float32, q8 []byte, nt, cols int, w *tensor.Weight, lo, hi int) {
	gt, ok := blockTypes[w.DType]
	if !ok {
		panic("cpu: MatMul on unsupported dtype " + w.DType.String())
	}
	rb := w.DType.RowBytes(cols)
	if q8 == nil && nt >= simd.MatMulDecodedTokens() { // q8: q8Prefill
		bs, ts := w.DType.Block()
		lo = simd.MatMulDecoded(dst, ldd, x, nt, cols, &rowDecoder{w: w, gt: gt, rb: rb, bs: bs, ts: ts}, lo, hi)
		if lo == hi {
			return
		}
	}
	if q8 != nil {
		matMulQ8(dst, ldd, q8, nt, w, lo, hi)
		return
	}
	sp := rowScratch.Get().(*[]float32)
	defer rowScratch.Put(sp)
	if cap(*sp) < cols {
		*sp = make([]float32, cols)
	}
	if dot, ok := fusedDots[w.DType]; ok && nt < simd.MatMulDecodedTokens() {
		g := cols / 32
		if !groupSumDots[w.DType] {
			g = 0 // xs stays empty: the dot does not read it
		}
		if cap(*sp) < nt*g {
			*sp = make([]float32, nt*g)
		}
		xs := (*sp)[:nt*g]
		for t := 0; g > 0 && t < nt; t++ {
			simd.GroupSums32(xs[t*g:(t+1)*g], x[t*cols:(t+1)*cols])
		}
		for r := lo; r < hi; r++ {
			wr := w.Raw[r*rb : (r+1)*rb]
			for t := 0; t < nt; t++ {
				dst[t*ldd+r] = dot(wr, x[t*cols:(t+1)*cols], xs[t*g:(t+1)*g])
			}
		}
		return
	}
	row := (*sp)[:cols]
	for r := lo; r < hi; r++ {
		decodeRow(gt, row, w.Raw[r*rb:(r+1)*rb])
		for t := 0; t < nt; t++ {
			dst[t*ldd+r] = simd.DotF32(row, x[t*cols:(t+1)*cols])
		}
	}
}
