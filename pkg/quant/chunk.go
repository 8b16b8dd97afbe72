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

// chunkPool holds chunk buffers: a buffer passed to a decodeFunc (an
// indirect call) escapes, so a stack array would be heap-allocated per call.
var chunkPool = sync.Pool{New: func() any { return new([chunkFloats]float32) }}

// chunkBuf returns a buffer of n values; pass the second result to
// releaseChunk when done.
func chunkBuf(n int) ([]float32, *[chunkFloats]float32) {
	if n > chunkFloats {
		return make([]float32, n), nil
	}
	b := chunkPool.Get().(*[chunkFloats]float32)
	return b[:n], b
}

func releaseChunk(b *[chunkFloats]float32) {
	if b != nil {
		chunkPool.Put(b)
	}
}

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

// lutUnpack sets u[j] = cb[code j] for the codes of a packed bit stream
// (little end first, bits per code).
func lutUnpack(u []float32, b []byte, bits int, cb []float32) {
	n := len(u)
	switch bits {
	case 4:
		for j := 0; j+1 < n; j += 2 {
			x := b[j>>1]
			u[j], u[j+1] = cb[x&15], cb[x>>4]
		}
	case 2:
		for j := 0; j+3 < n; j += 4 {
			x := b[j>>2]
			u[j], u[j+1], u[j+2], u[j+3] = cb[x&3], cb[x>>2&3], cb[x>>4&3], cb[x>>6]
		}
	case 3:
		for j := 0; j+7 < n; j += 8 {
			o := j * 3 / 8
			w := uint32(b[o]) | uint32(b[o+1])<<8 | uint32(b[o+2])<<16
			for k := 0; k < 8; k++ {
				u[j+k] = cb[w>>(3*k)&7]
			}
		}
	default:
		for j := 0; j < n; j++ {
			u[j] = cb[getBits(b, j, bits)]
		}
	}
}
