//go:build amd64 && gc && !purego

package simd

// The block dots take whole blocks (the exported functions require them),
// on AVX-512 when selected, else AVX2, else the Go twin.

func dotQ40(w []byte, x []float32) float32 {
	switch {
	case useAVX512:
		return dotQ40AVX512(w, x)
	case useAsm:
		return dotQ40AVX2(w, x)
	}
	return dotQ40Generic(w, x)
}

func dotQ41(w []byte, x, xs []float32) float32 {
	switch {
	case useAVX512:
		return dotQ41AVX512(w, x, xs)
	case useAsm:
		return dotQ41AVX2(w, x, xs)
	}
	return dotQ41Generic(w, x, xs)
}

func dotQ50(w []byte, x []float32) float32 {
	switch {
	case useAVX512:
		return dotQ50AVX512(w, x)
	case useAsm:
		return dotQ50AVX2(w, x)
	}
	return dotQ50Generic(w, x)
}

func dotQ51(w []byte, x, xs []float32) float32 {
	switch {
	case useAVX512:
		return dotQ51AVX512(w, x, xs)
	case useAsm:
		return dotQ51AVX2(w, x, xs)
	}
	return dotQ51Generic(w, x, xs)
}

func dotIQ4NL(w []byte, x []float32) float32 {
	switch {
	case useAVX512:
		return dotIQ4NLAVX512(w, x)
	case useAsm:
		return dotIQ4NLAVX2(w, x)
	}
	return dotIQ4NLGeneric(w, x)
}

func dotMXFP4(w []byte, x []float32) float32 {
	switch {
	case useAVX512:
		return dotMXFP4AVX512(w, x)
	case useAsm:
		return dotMXFP4AVX2(w, x)
	}
	return dotMXFP4Generic(w, x)
}

// dotIQ4XS runs the kernel over the whole row; it unpacks each
// super-block's scales into a scratch of 8 values on the stack.
func dotIQ4XS(w []byte, x []float32) float32 {
	var sc [8]float32
	switch {
	case useAVX512:
		return dotIQ4XSAVX512(w, x, sc[:])
	case useAsm:
		return dotIQ4XSAVX2(w, x, sc[:])
	}
	return dotIQ4XSGeneric(w, x)
}

// q23KBlocks decodes the len(dst)/256 (at most 4) q2_K (q3_K with three)
// super-blocks at w with the AVX2 decoder, their scales unpacked onto the
// stack first.
func q23KBlocks(dst []float32, w []byte, three bool) {
	if !useAsm {
		q23KBlocksGeneric(dst, w, three)
		return
	}
	var sc [32 * 4]float32
	n := len(dst) / kBlockSize
	if three {
		for i := 0; i < n; i++ {
			q3KScales(sc[32*i:], w[i*q3KBlockBytes:])
		}
		q3KToF32AVX2(dst, w, sc[:32*n])
		return
	}
	for i := 0; i < n; i++ {
		q2KScales(sc[32*i:], w[i*q2KBlockBytes:])
	}
	q2KToF32AVX2(dst, w, sc[:32*n])
}
