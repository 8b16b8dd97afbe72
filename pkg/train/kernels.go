package train

import "math"

// expf returns e^x in float32 to within about 2 ulp (relative error below
// 2.5e-7 for x in [-87.3, 88.7]); it is 0 below -87.3.
//
// math.Exp in float64 costs several times more, and softmax and SwiGLU
// evaluate an exponential for every attention score and hidden unit: the
// causal softmax alone needs ~L²/2 of them per head, layer and pass.
// (internal/simd has no vector exponential yet.)
func expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693145751953125 // ln 2 split for Cody–Waite reduction
		ln2lo = 1.42860682030941723212e-6
		magic = 12582912 // 1.5·2^23: adding it rounds to an integer
	)
	switch {
	case x < -87.3:
		return 0
	case x > 88.3 || x != x: // near overflow (2^128 in the scaling) and NaN
		return float32(math.Exp(float64(x)))
	}
	f := x*log2e + magic
	n := int32(math.Float32bits(f)) - int32(math.Float32bits(magic))
	fn := f - magic
	r := x - fn*ln2hi - fn*ln2lo
	// e^r on |r| <= ln2/2 by its Taylor series to r^6 (truncation < 1.3e-7).
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// sigmoid is 1/(1+e^-x) with expf.
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

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
