package train

// transpose writes dst[c*ldd+r] = src[r*lds+c] for r < rows, c < cols,
// in 8×8 tiles so that both sides are touched a cache line at a time.
func transpose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	const tile = 8
	r8, c8 := rows&^(tile-1), cols&^(tile-1)
	for r0 := 0; r0 < r8; r0 += tile {
		for c0 := 0; c0 < c8; c0 += tile {
			var a [tile][tile]float32
			for i := range a {
				a[i] = [tile]float32(src[(r0+i)*lds+c0:])
			}
			for j := 0; j < tile; j++ {
				d := (*[tile]float32)(dst[(c0+j)*ldd+r0:])
				d[0], d[1], d[2], d[3] = a[0][j], a[1][j], a[2][j], a[3][j]
				d[4], d[5], d[6], d[7] = a[4][j], a[5][j], a[6][j], a[7][j]
			}
		}
	}
	// Ragged edges: the last columns of the tiled rows, then the last rows.
	for r := 0; r < r8; r++ {
		for c := c8; c < cols; c++ {
			dst[c*ldd+r] = src[r*lds+c]
		}
	}
	for r := r8; r < rows; r++ {
		for c := 0; c < cols; c++ {
			dst[c*ldd+r] = src[r*lds+c]
		}
	}
}

// transposeP transposes src (rows×cols, back to back) into dst (cols×rows)
// with the pool: tasks own fixed blocks of source rows, so they write
// disjoint columns of dst.
func (p pool) transposeP(dst, src []float32, rows, cols int) {
	p.blocks(rows, 64, func(_, lo, hi int) {
		transpose(dst[lo:], rows, src[lo*cols:], cols, hi-lo, cols)
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
