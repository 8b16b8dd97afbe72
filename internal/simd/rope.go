package simd

// RotateNeoX applies rotary embedding to one head vector in the half-split
// layout (Hugging Face Llama, GPT-NeoX): with half = len(c), each pair
// (v[i], v[i+half]) is rotated by the angle whose cosine and sine are c[i]
// and s[i]:
//
//	v[i], v[i+half] = v[i]·c[i] − v[i+half]·s[i], v[i]·s[i] + v[i+half]·c[i]
//
// Each product is rounded to float32 before the sum (no fused multiply-add),
// so every kernel set gives the same bits. It panics unless len(s) ==
// len(c) and len(v) == 2·len(c).
func RotateNeoX(v, c, s []float32) {
	checkLen("RotateNeoX", len(s), len(c))
	checkLen("RotateNeoX", len(v), 2*len(c))
	rotateNeoX(v, c, s)
}

// RotatePairs applies rotary embedding to one head vector in the
// interleaved layout (llama.cpp's normal RoPE, llama2.c): each pair
// (v[2i], v[2i+1]) is rotated by (c[i], s[i]), with the rounding of
// RotateNeoX. It panics unless len(s) == len(c) and len(v) == 2·len(c).
func RotatePairs(v, c, s []float32) {
	checkLen("RotatePairs", len(s), len(c))
	checkLen("RotatePairs", len(v), 2*len(c))
	rotatePairs(v, c, s)
}

// rotateNeoXGeneric is RotateNeoX's pure-Go twin.
func rotateNeoXGeneric(v, c, s []float32) { rotateNeoXFrom(v, c, s, 0) }

// rotateNeoXFrom rotates the pairs i >= i0 of RotateNeoX (the assembly
// leaves the last len(c) mod 8 to it); the float32 conversions forbid the
// compiler to fuse a product into the sum.
func rotateNeoXFrom(v, c, s []float32, i0 int) {
	half := len(c)
	lo, hi := v[:half], v[half:2*half]
	s = s[:half]
	for i := i0; i < half; i++ {
		a, b := lo[i], hi[i]
		lo[i] = float32(a*c[i]) - float32(b*s[i])
		hi[i] = float32(a*s[i]) + float32(b*c[i])
	}
}

// rotatePairsGeneric is RotatePairs' pure-Go twin.
func rotatePairsGeneric(v, c, s []float32) {
	v = v[:2*len(c)]
	s = s[:len(c)]
	for i, ci := range c {
		a, b := v[2*i], v[2*i+1]
		v[2*i] = float32(a*ci) - float32(b*s[i])
		v[2*i+1] = float32(b*ci) + float32(a*s[i])
	}
}
