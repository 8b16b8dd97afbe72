//go:build !amd64 || !gc || purego

package simd

func dotQ4KQ8KRows(dst []float32, w, q []byte, nb int) {
	dotKQ8KRows(dst, w, q, nb, q4KBlockBytes, nil, dotQ4KQ8K)
}

func dotQ6KQ8KRows(dst []float32, w, q []byte, nb int) {
	dotKQ8KRows(dst, w, q, nb, q6KBlockBytes, nil, dotQ6KQ8K)
}
