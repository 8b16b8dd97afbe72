package train

import "github.com/kvqlabs/kvq/internal/simd"

// transposeP transposes src (rows×cols, back to back) into dst (cols×rows)
// with the pool: tasks own fixed blocks of source rows, so they write
// disjoint columns of dst.
func (p pool) transposeP(dst, src []float32, rows, cols int) {
	p.blocks(rows, 64, func(_, lo, hi int) {
		simd.TransposeF32(dst[lo:], rows, src[lo*cols:], cols, hi-lo, cols)
	})
}

// grow returns s with length n, reallocating when its capacity is short.
// The contents are not preserved.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
