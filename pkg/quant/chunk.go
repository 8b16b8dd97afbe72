package quant

import (
	"sync"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Attention on packed tiles decodes at most chunkFloats values (a few rows)
// at a time into a stack buffer in L1, then runs the shared register-blocked
// kernels simd.ScoresF32 and simd.AccumulateF32 on them. The dequantized
// cache is never materialized; each tile byte is read once per step.
const chunkFloats = 2048

// chunkRows is how many rows of dim values one chunk holds.
func chunkRows(dim int) int { return max(1, chunkFloats/dim) }

// decodeFunc writes rows [row0, row0+n) of tile into dst as float32.
type decodeFunc func(dst []float32, tile []byte, row0, n int)

// chunk is a pooled buffer: a buffer passed to a decodeFunc (an indirect
// call) escapes, so a stack array would be heap-allocated per call.
type chunk struct{ buf []float32 }

// chunkPool holds chunk buffers of at least chunkFloats values; a call that
// needs more (many queries at once, as prefill attention scores a block of
// query tokens) grows the one it got, so no call allocates and zeroes one.
var chunkPool = sync.Pool{New: func() any { return &chunk{buf: make([]float32, chunkFloats)} }}

// chunkBuf returns a buffer of n values; pass the second result to
// releaseChunk when done.
func chunkBuf(n int) ([]float32, *chunk) {
	c := chunkPool.Get().(*chunk)
	if cap(c.buf) < n {
		c.buf = make([]float32, n)
	}
	return c.buf[:n], c
}

func releaseChunk(c *chunk) { chunkPool.Put(c) }

// scoresChunked implements Codec.Scores for codecs with a fast decode.
func scoresChunked(decode decodeFunc, dim int, dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	rows, pooled := chunkBuf(dim * min(n, chunkRows(dim)))
	defer releaseChunk(pooled)
	step := chunkRows(dim)
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		decode(rows[:m*dim], tile, row0+r, m)
		simd.ScoresF32(dst[r:], ldd, q, nq, dim, rows[:m*dim], m)
	}
}

// accumulateChunked implements Codec.Accumulate for codecs with a fast decode.
func accumulateChunked(decode decodeFunc, dim int, acc []float32, w []float32, ldw, nq int, tile []byte, row0, n int) {
	rows, pooled := chunkBuf(dim * min(n, chunkRows(dim)))
	defer releaseChunk(pooled)
	step := chunkRows(dim)
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		decode(rows[:m*dim], tile, row0+r, m)
		simd.AccumulateF32(acc, w[r:], ldw, nq, dim, rows[:m*dim], m)
	}
}

// scratch returns a float32 buffer of n values, on the caller's stack array
// when it fits.
func scratch(buf []float32, n int) []float32 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]float32, n)
}

// lut is a codebook of up to 16 levels in the form the table-lookup
// kernels take: a fixed-size array, level k at index k, zero past the last
// level. Codecs build theirs once, in NewCodec.
type lut [16]float32

// newLUT returns the table of the levels cb (at most 16).
func newLUT(cb []float32) lut {
	var t lut
	copy(t[:], cb)
	return t
}

// lutUnpack sets u[j] = t[code j] for the codes of a packed bit stream
// (little end first, bits per code; at most 4). For 2, 3 and 4 bits it is
// one table-lookup kernel call, which needs len(u) to be a multiple of 4, 8
// and 2 (a row of dim codes packs into whole bytes, so it is); b may run
// past the codes.
func lutUnpack(u []float32, b []byte, bits int, t *lut) {
	switch bits {
	case 4:
		simd.LUT4ToF32(u, b[:len(u)/2], (*[16]float32)(t))
	case 3:
		simd.LUT3ToF32(u, b[:len(u)/8*3], (*[8]float32)(t[:8]))
	case 2:
		simd.LUT2ToF32(u, b[:len(u)/4], (*[4]float32)(t[:4]))
	default:
		for j := range u {
			u[j] = t[getBits(b, j, bits)]
		}
	}
}

// scoresCodes is simd.ScoresU8 or simd.ScoresU4 by bits (8 or 4).
func scoresCodes(bits int, dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	if bits == 8 {
		simd.ScoresU8(dst, ldd, q, ldq, nq, cols, codes, ldc, n)
		return
	}
	simd.ScoresU4(dst, ldd, q, ldq, nq, cols, codes, ldc, n)
}

// accumulateCodes is simd.AccumulateU8 or simd.AccumulateU4 by bits (8 or 4).
func accumulateCodes(bits int, acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	if bits == 8 {
		simd.AccumulateU8(acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
		return
	}
	simd.AccumulateU4(acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
}
