package kvcache

import "github.com/kvqlabs/kvq/internal/simd"

// softmax replaces x with softmax(scale·x) in place: the SIMD kernels find
// the maximum, exponentiate the shifted scores and sum them in float64.
func softmax(x []float32, scale float32) {
	if len(x) == 0 {
		return
	}
	m := simd.MaxF32(x) * scale
	if scale < 0 {
		m = minScaled(x, scale)
	}
	sum := simd.ExpShiftSum(x, scale, m)
	simd.ScaleF32(x, float32(1/sum))
}

// minScaled is the largest scale·x when scale is negative.
func minScaled(x []float32, scale float32) float32 {
	m := x[0]
	for _, v := range x {
		m = min(m, v)
	}
	return m * scale
}
