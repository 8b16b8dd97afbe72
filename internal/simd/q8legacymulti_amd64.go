//go:build amd64 && gc && !purego

package simd

// q80X4 returns the four-row kernel of type t in the current set, or nil:
// the avx512 set's with AVX-512 VNNI (useLegacyVNNI), else the AVX2 one
// (the avx2 set, and the avx512 set without VNNI, whose one-row dots are
// the AVX2 kernels too).
func q80X4(t qdotType) func(w []byte, stride int, q []byte, nb int, dst *[4]float32) {
	if !useAsm {
		return nil
	}
	if useAVX512 && useLegacyVNNI {
		switch t {
		case qdQ40:
			return dotQ40Q80X4VNNI
		case qdQ50:
			return dotQ50Q80X4VNNI
		case qdIQ4NL:
			return dotIQ4NLQ80X4VNNI
		case qdQ80:
			return dotQ80Q80X4VNNI
		}
		return nil
	}
	switch t {
	case qdQ40:
		return dotQ40Q80X4AVX2
	case qdQ50:
		return dotQ50Q80X4AVX2
	case qdIQ4NL:
		return dotIQ4NLQ80X4AVX2
	case qdQ80:
		return dotQ80Q80X4AVX2
	}
	return nil
}
