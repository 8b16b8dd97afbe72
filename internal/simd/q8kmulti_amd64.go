//go:build amd64 && gc && !purego

package simd

// dotQ4KQ8KRows takes four rows a call in the avx512 set's kernels (VNNI
// where useVNNI), the rest one at a time.
func dotQ4KQ8KRows(dst []float32, w, q []byte, nb int) {
	if !useAVX512 || nb == 0 {
		dotQ4KQ8KRowsGeneric(dst, w, q, nb)
		return
	}
	rb := nb * q4KBlockBytes
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		d := (*[4]float32)(dst[i : i+4])
		if useVNNI {
			dotQ4KQ8KX4VNNI(w[i*rb:(i+4)*rb], rb, q, nb, d)
		} else {
			dotQ4KQ8KX4AVX512(w[i*rb:(i+4)*rb], rb, q, nb, d)
		}
	}
	dotQ4KQ8KRowsGeneric(dst[i:], w[i*rb:], q, nb)
}
