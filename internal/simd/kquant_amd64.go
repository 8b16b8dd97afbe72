//go:build amd64 && gc && !purego

package simd

// The kernels unpack each super-block's scales themselves, into a 16-value
// scratch on the caller's stack. The AVX-512 ones (kquant512.go in
// _generate) run where useAVX512 and kquant512 say.

func dotQ4K(w []byte, x []float32) float32 {
	if !useAsm {
		return dotQ4KGeneric(w, x)
	}
	var sc [16]float32
	return dotQ4KAVX2(w, x, sc[:])
}

func dotQ6K(w []byte, x []float32) float32 {
	if !useAsm {
		return dotQ6KGeneric(w, x)
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		return dotQ6KAVX512(w, x, sc[:])
	}
	return dotQ6KAVX2(w, x, sc[:])
}

func q4KToF32(dst []float32, w []byte) {
	if !useAsm {
		q4KToF32Generic(dst, w)
		return
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		q4KToF32AVX512(dst, w, sc[:])
		return
	}
	q4KToF32AVX2(dst, w, sc[:])
}

func q6KToF32(dst []float32, w []byte) {
	if !useAsm {
		q6KToF32Generic(dst, w)
		return
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		q6KToF32AVX512(dst, w, sc[:])
		return
	}
	q6KToF32AVX2(dst, w, sc[:])
}

func dotQ5K(w []byte, x []float32) float32 {
	if !useAsm {
		return dotQ5KGeneric(w, x)
	}
	var sc [16]float32
	return dotQ5KAVX2(w, x, sc[:])
}

func q5KToF32(dst []float32, w []byte) {
	if !useAsm {
		q5KToF32Generic(dst, w)
		return
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		q5KToF32AVX512(dst, w, sc[:])
		return
	}
	q5KToF32AVX2(dst, w, sc[:])
}

func dotQ4KSums(w []byte, x, xs []float32) float32 {
	if !useAsm {
		return dotQ4KSumsGeneric(w, x, xs)
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		return dotQ4KSumsAVX512(w, x, xs, sc[:])
	}
	return dotQ4KSumsAVX2(w, x, xs, sc[:])
}

func dotQ5KSums(w []byte, x, xs []float32) float32 {
	if !useAsm {
		return dotQ5KSumsGeneric(w, x, xs)
	}
	var sc [16]float32
	if useAVX512 && kquant512 {
		return dotQ5KSumsAVX512(w, x, xs, sc[:])
	}
	return dotQ5KSumsAVX2(w, x, xs, sc[:])
}

func groupSums32(xs, x []float32) {
	if !useAsm {
		groupSums32Generic(xs, x)
		return
	}
	groupSums32AVX2(xs, x)
}

func lutBlocks(dst []float32, codes []byte, stride int, sc []float32, table *[16]int8) {
	if !useAsm || len(sc) == 0 {
		lutBlocksGeneric(dst, codes, stride, sc, table)
		return
	}
	_ = codes[(len(sc)-1)*stride+15]
	_ = dst[32*len(sc)-1]
	lutBlocksAVX2(dst, codes, stride, sc, table)
}

// q23KToF32 unpacks the scales of up to 16 super-blocks at a time onto the
// stack (32 float32 values each) and runs the q2_K or q3_K kernel.
func q23KToF32(dst []float32, w []byte, blockBytes int, scales func([]float32, []byte), generic func([]float32, []byte)) {
	if !useAsm {
		generic(dst, w)
		return
	}
	var sc [32 * 16]float32
	nb := len(dst) / kBlockSize
	for b := 0; b < nb; b += 16 {
		n := min(16, nb-b)
		wb := w[b*blockBytes : (b+n)*blockBytes]
		for i := 0; i < n; i++ {
			scales(sc[32*i:], wb[i*blockBytes:])
		}
		kernel := q2KToF32AVX2
		if blockBytes == q3KBlockBytes {
			kernel = q3KToF32AVX2
		}
		kernel(dst[b*kBlockSize:(b+n)*kBlockSize], wb, sc[:32*n])
	}
}

// kquant512 says whether the AVX-512 k-quant kernels run when the AVX-512
// set is selected: the switch for a microarchitecture where they would be
// slower than the AVX2 ones. None is known: on Zen 4, which runs 512-bit
// operations in two halves, every one of them is 1.03–1.28× its AVX2
// kernel (docs/performance.md, "K-quant kernels on Zen 4"). The tests run
// them wherever the CPU has them (forEachKSet).
var kquant512 = true
