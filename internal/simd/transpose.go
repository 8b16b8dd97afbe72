package simd

import "fmt"

// TransposeF32 writes dst[c*ldd+r] = src[r*lds+c] for r < rows, c < cols:
// src holds rows rows of stride lds, dst receives cols rows of stride ldd.
// No other dst element is touched. The assembly moves whole 8×8 tiles and
// the twin the ragged edges; it is data movement only, so every kernel set
// gives the same result. It panics if a slice is too short for the shapes
// or a stride is shorter than its rows.
func TransposeF32(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	switch {
	case rows < 0 || cols < 0:
		panic(fmt.Sprintf("simd: TransposeF32: negative shape %d×%d", rows, cols))
	case rows == 0 || cols == 0:
		return
	case lds < cols || ldd < rows:
		panic(fmt.Sprintf("simd: TransposeF32: strides lds %d, ldd %d too short for %d×%d", lds, ldd, rows, cols))
	case len(src) < (rows-1)*lds+cols:
		panic(fmt.Sprintf("simd: TransposeF32: len(src) %d < %d", len(src), (rows-1)*lds+cols))
	case len(dst) < (cols-1)*ldd+rows:
		panic(fmt.Sprintf("simd: TransposeF32: len(dst) %d < %d", len(dst), (cols-1)*ldd+rows))
	}
	transposeF32(dst, ldd, src, lds, rows, cols)
}

// transposeF32Generic goes in 8×8 tiles, so that both sides are touched a
// cache line at a time, then the ragged edges.
func transposeF32Generic(dst []float32, ldd int, src []float32, lds, rows, cols int) {
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
	transposeEdges(dst, ldd, src, lds, rows, cols)
}

// transposeEdges transposes what the 8×8 tiles leave: the last cols%8
// columns of the first rows&^7 rows, then the last rows%8 rows.
func transposeEdges(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	r8, c8 := rows&^7, cols&^7
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
