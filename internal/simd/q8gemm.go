package simd

import (
	"encoding/binary"
	"math"
)

// MatMulQ80Q80 multiplies nt token rows of Q8_0 activations by the
// transpose of a Q8_0 weight matrix, for weight rows r0 to r1-1 only: q
// holds the token rows back to back, each cols/32 blocks (QuantizeQ80, so
// codes in −127..127), and w the weight rows of as many Q8_0 blocks. It
// sets
//
//	dst[t*ldd+r] = DotQ80Q80(w[r*rb:(r+1)*rb], q[t*rb:(t+1)*rb])   for t < nt, r0 <= r < r1
//
// (rb = cols/32*34) bit for bit, on every kernel set, however the tokens
// and rows are split between calls: prefill over quantized activations
// gives decode's bits. No other dst entry is written. On amd64 whole
// panels of weight rows go through an int8 tile GEMM (q8gemm_amd64.go;
// 16 rows and AVX-512 VNNI on the avx512 set where the CPU has it, else
// 8 rows and AVX2) from a few token rows on; other rows, and fewer tokens,
// take DotQ80Q80Rows per token row. It panics unless cols%32 == 0, and as
// MatMulQ80 does.
func MatMulQ80Q80(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	checkQ80("MatMulQ80Q80", cols)
	rb := cols / q80BlockSize * Q80BlockBytes
	checkMatMul("MatMulQ80Q80", len(dst), ldd, len(q), nt, rb, len(w), rb, r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulQ80Q80(dst, ldd, q, nt, cols/q80BlockSize, w, r0, r1)
}

// matMulQ80Q80Generic is MatMulQ80Q80's twin: one twin dot per pair.
func matMulQ80Q80Generic(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	rb := nb * Q80BlockBytes
	for t := 0; t < nt; t++ {
		qt := q[t*rb : (t+1)*rb]
		for r := r0; r < r1; r++ {
			dst[t*ldd+r] = dotQ8LegacyGeneric(qdQ80, w[r*rb:(r+1)*rb], qt, nb)
		}
	}
}

// matMulQ80Q80Rows sets rows [r0, r1) of every token row with the set's
// row dots (DotQ80Q80Rows).
func matMulQ80Q80Rows(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	rb := nb * Q80BlockBytes
	for t := 0; t < nt; t++ {
		dotQ80Rows(qdQ80, dst[t*ldd+r0:t*ldd+r1], w[r0*rb:r1*rb], q[t*rb:(t+1)*rb], nb)
	}
}

// q8gActs sets ac, per token row and block, to the pair the tile kernels
// take (the block's scale as float32 bits, −128·Σ codes): the twin of
// q8gemmActsAVX2.
func q8gActs(ac []int32, q []byte, nt, nb int) {
	const lo = 0x00ff00ff00ff00ff
	for i := 0; i < nt*nb; i++ {
		blk := q[i*Q80BlockBytes : (i+1)*Q80BlockBytes]
		var u uint64 // Σ (code+128): the bytes XOR 0x80 as unsigned, 8 at a time
		for k := 2; k < Q80BlockBytes; k += 8 {
			x := binary.LittleEndian.Uint64(blk[k:]) ^ 0x8080808080808080
			x = x&lo + x>>8&lo                // four 16-bit sums of two
			u += x * 0x0001000100010001 >> 48 // their sum (≤ 2040)
		}
		ac[2*i] = int32(math.Float32bits(F16ToF32Scalar(binary.LittleEndian.Uint16(blk))))
		ac[2*i+1] = -128 * (int32(u) - 32*128)
	}
}
