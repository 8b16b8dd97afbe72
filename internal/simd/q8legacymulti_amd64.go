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

// q80Runs is dotQ80Rows under the Zen 5 choice (zen5Enabled)
// for Q8_0 with AVX-512 VNNI: a row of each of four runs of rows a call
// (dotQ80Q80X4RunsVNNI, the four-row kernel's bits), the rows past whole
// runs one at a time. It reports false, having done nothing, elsewhere.
// On the Zen 5 the 1B Q8_0 model decoded 1.07× as fast as with four
// adjacent rows a call on one thread, 1.06× on two (BenchmarkDecodeGGUF,
// 4 runs each); see decodeStreams for the 16-bit weights.
func q80Runs(t qdotType, dst []float32, w, q []byte, nb int) bool {
	if t != qdQ80 || nb == 0 || !useAsm || !useLegacyVNNI || !zen5Enabled() {
		return false
	}
	rb := nb * q80BlockBytes
	per := len(dst) / 4
	var d [4]float32
	for i := range per {
		dotQ80Q80X4RunsVNNI(w[i*rb:], per*rb, q, nb, &d)
		for k, v := range d {
			dst[k*per+i] = v
		}
	}
	for i := 4 * per; i < len(dst); i++ {
		dst[i] = dotQ8Legacy(t, w[i*rb:(i+1)*rb], q, nb)
	}
	return true
}
