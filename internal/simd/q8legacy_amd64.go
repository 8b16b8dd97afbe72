//go:build amd64 && gc && !purego

package simd

import "golang.org/x/sys/cpu"

// hasLegacyVNNI records whether the avx512 set's Q8_0/Q8_1 dots may use
// AVX-512 VNNI (VPDPBUSD on YMM); useLegacyVNNI selects them (tests switch
// it off to run the AVX2 kernels, which the avx512 set takes without VNNI).
var (
	hasLegacyVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI
	useLegacyVNNI = hasLegacyVNNI
)

// dotQ8Legacy dispatches the nb-block dot of type t.
func dotQ8Legacy(t qdotType, w, q []byte, nb int) float32 {
	vnni := useAVX512 && useLegacyVNNI
	if !useAsm {
		return dotQ8LegacyGeneric(t, w, q, nb)
	}
	switch t {
	case qdQ40:
		if vnni {
			return dotQ40Q80VNNI(w, q, nb)
		}
		return dotQ40Q80AVX2(w, q, nb)
	case qdQ41:
		if vnni {
			return dotQ41Q81VNNI(w, q, nb)
		}
		return dotQ41Q81AVX2(w, q, nb)
	case qdQ50:
		if vnni {
			return dotQ50Q80VNNI(w, q, nb)
		}
		return dotQ50Q80AVX2(w, q, nb)
	case qdQ51:
		if vnni {
			return dotQ51Q81VNNI(w, q, nb)
		}
		return dotQ51Q81AVX2(w, q, nb)
	case qdIQ4NL:
		if vnni {
			return dotIQ4NLQ80VNNI(w, q, nb)
		}
		return dotIQ4NLQ80AVX2(w, q, nb)
	case qdMXFP4:
		if vnni {
			return dotMXFP4Q80VNNI(w, q, nb)
		}
		return dotMXFP4Q80AVX2(w, q, nb)
	case qdQ80:
		if vnni {
			return dotQ80Q80VNNI(w, q, nb)
		}
		return dotQ80Q80AVX2(w, q, nb)
	}
	return dotQ8LegacyGeneric(t, w, q, nb)
}
