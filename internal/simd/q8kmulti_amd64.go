//go:build amd64 && gc && !purego

package simd

// dotQ4KQ8KRows and dotQ6KQ8KRows take four rows a call in the avx512
// set's kernels (VNNI where useVNNI), the rest one at a time.
func dotQ4KQ8KRows(dst []float32, w, q []byte, nb int) {
	var x4 func(w []byte, stride int, q []byte, nb int, dst *[4]float32)
	switch {
	case useAVX512 && useVNNI:
		x4 = dotQ4KQ8KX4VNNI
	case useAVX512:
		x4 = dotQ4KQ8KX4AVX512
	}
	dotKQ8KRows(dst, w, q, nb, q4KBlockBytes, x4, dotQ4KQ8K)
}

func dotQ6KQ8KRows(dst []float32, w, q []byte, nb int) {
	var x4 func(w []byte, stride int, q []byte, nb int, dst *[4]float32)
	switch {
	case useAVX512 && useVNNI:
		x4 = dotQ6KQ8KX4VNNI
	case useAVX512:
		x4 = dotQ6KQ8KX4AVX512
	}
	dotKQ8KRows(dst, w, q, nb, q6KBlockBytes, x4, dotQ6KQ8K)
}
