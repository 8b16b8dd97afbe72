//go:build amd64 && gc && !purego

package simd

// kChunk is the super-blocks whose scales the dispatchers unpack onto the
// stack before one kernel call.
const kChunk = 16

func dotQ4K(w []byte, x []float32) float32 {
	if !useAsm {
		return dotQ4KGeneric(w, x)
	}
	var sc [16 * kChunk]float32
	var s float32
	for b, nb := 0, len(x)/kBlockSize; b < nb; b += kChunk {
		n := min(kChunk, nb-b)
		wb := w[b*q4KBlockBytes : (b+n)*q4KBlockBytes]
		for i := 0; i < n; i++ {
			q4KScales(sc[16*i:], wb[i*q4KBlockBytes:])
		}
		s += dotQ4KAVX2(wb, x[b*kBlockSize:(b+n)*kBlockSize], sc[:16*n])
	}
	return s
}

func dotQ6K(w []byte, x []float32) float32 {
	if !useAsm {
		return dotQ6KGeneric(w, x)
	}
	var sc [16 * kChunk]float32
	var s float32
	for b, nb := 0, len(x)/kBlockSize; b < nb; b += kChunk {
		n := min(kChunk, nb-b)
		wb := w[b*q6KBlockBytes : (b+n)*q6KBlockBytes]
		for i := 0; i < n; i++ {
			q6KScales(sc[16*i:], wb[i*q6KBlockBytes:])
		}
		s += dotQ6KAVX2(wb, x[b*kBlockSize:(b+n)*kBlockSize], sc[:16*n])
	}
	return s
}

func q4KToF32(dst []float32, w []byte) {
	if !useAsm {
		q4KToF32Generic(dst, w)
		return
	}
	var sc [16 * kChunk]float32
	for b, nb := 0, len(dst)/kBlockSize; b < nb; b += kChunk {
		n := min(kChunk, nb-b)
		wb := w[b*q4KBlockBytes : (b+n)*q4KBlockBytes]
		for i := 0; i < n; i++ {
			q4KScales(sc[16*i:], wb[i*q4KBlockBytes:])
		}
		q4KToF32AVX2(dst[b*kBlockSize:(b+n)*kBlockSize], wb, sc[:16*n])
	}
}

func q6KToF32(dst []float32, w []byte) {
	if !useAsm {
		q6KToF32Generic(dst, w)
		return
	}
	var sc [16 * kChunk]float32
	for b, nb := 0, len(dst)/kBlockSize; b < nb; b += kChunk {
		n := min(kChunk, nb-b)
		wb := w[b*q6KBlockBytes : (b+n)*q6KBlockBytes]
		for i := 0; i < n; i++ {
			q6KScales(sc[16*i:], wb[i*q6KBlockBytes:])
		}
		q6KToF32AVX2(dst[b*kBlockSize:(b+n)*kBlockSize], wb, sc[:16*n])
	}
}
