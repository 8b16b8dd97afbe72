//go:build amd64 && gc && !purego

package simd

// matMulDecoded is MatMulDecoded's packed path: matMulPacked's blocking
// and micro-kernels (gemmpack_amd64.go) with the panels filled by the
// caller's decoder instead of widened from F16, BF16 or Q8_0.
func matMulDecoded(dst []float32, ldd int, x []float32, nt, cols int, dec RowDecoder, r0, r1 int) int {
	if !useAsm {
		return r0
	}
	var tmp [16 * packKC]float32
	buf := packBufs.Get().(*[packChunk * packKC]float32)
	defer packBufs.Put(buf)
	wp := buf[:]
	end := r0 + (r1-r0)/16*16
	for rc := r0; rc < end; rc += packChunk {
		re := min(rc+packChunk, end)
		for c0 := 0; c0 < cols; c0 += packKC {
			kn := min(packKC, cols-c0)
			for p := rc; p < re; p += 16 {
				for j := 0; j < 16; j++ {
					dec.DecodeRow(tmp[j*kn:(j+1)*kn], p+j, c0)
				}
				transpose8F32AVX2(&wp[(p-rc)*kn], 16, &tmp[0], kn, 16, kn)
			}
			gemmPanels(dst, ldd, x, nt, cols, c0, wp, kn, re-rc, rc)
		}
	}
	return end
}

func matMulDecodedTokens() int { return packTokens(true, false) }
