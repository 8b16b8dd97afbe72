//go:build !amd64 || !gc || purego

package simd

func dotQ4KQ8KRows(dst []float32, w, q []byte, nb int) {
	dotQ4KQ8KRowsGeneric(dst, w, q, nb)
}
