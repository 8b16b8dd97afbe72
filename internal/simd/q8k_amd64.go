//go:build amd64 && gc && !purego

package simd

import "golang.org/x/sys/cpu"

// hasVNNI records whether the avx512 set's Q8_K dots may use AVX-512 VNNI
// (VPDPWSSD); useVNNI selects them (tests switch it off to run the
// AVX-512BW kernels on a CPU that has VNNI).
var (
	hasVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI
	useVNNI = hasVNNI
)

func dotQ4KQ8K(w, q []byte, nb int) float32 {
	switch {
	case useAVX512 && useVNNI:
		return dotQ4KQ8KVNNI(w, q, nb)
	case useAVX512:
		return dotQ4KQ8KAVX512(w, q, nb)
	case useAsm:
		return dotQ4KQ8KAVX2(w, q, nb)
	}
	return dotQ4KQ8KGeneric(w, q, nb)
}

func dotQ5KQ8K(w, q []byte, nb int) float32 {
	switch {
	case useAVX512 && useVNNI:
		return dotQ5KQ8KVNNI(w, q, nb)
	case useAVX512:
		return dotQ5KQ8KAVX512(w, q, nb)
	case useAsm:
		return dotQ5KQ8KAVX2(w, q, nb)
	}
	return dotQ5KQ8KGeneric(w, q, nb)
}

func dotQ6KQ8K(w, q []byte, nb int) float32 {
	switch {
	case useAVX512 && useVNNI:
		return dotQ6KQ8KVNNI(w, q, nb)
	case useAVX512:
		return dotQ6KQ8KAVX512(w, q, nb)
	case useAsm:
		return dotQ6KQ8KAVX2(w, q, nb)
	}
	return dotQ6KQ8KGeneric(w, q, nb)
}
