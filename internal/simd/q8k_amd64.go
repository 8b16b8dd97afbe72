//go:build amd64 && gc && !purego

package simd

import (
	"encoding/binary"
	"math"

	"golang.org/x/sys/cpu"
)

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

// quantizeQ8K takes each block's range with q8kRangeAVX2 and its codes
// and sums with q8kCodesAVX2; the scale's value is the largest of
// magnitude, and where the largest and the smallest tie in magnitude (or a
// NaN makes the range unspecified) the block goes to the twin, which picks
// the first as ggml does.
func quantizeQ8K(dst []byte, x []float32) {
	if !useAsm {
		quantizeQ8KGeneric(dst, x)
		return
	}
	for b := 0; b < len(x)/kBlockSize; b++ {
		xb := x[b*kBlockSize : (b+1)*kBlockSize]
		q := dst[b*Q8KBlockBytes : (b+1)*Q8KBlockBytes]
		mx, mn := q8kRangeAVX2(xb)
		var max float32
		switch {
		case mx > -mn:
			max = mx
		case mx < -mn:
			max = mn
		default: // a tie, zeros or NaN
			quantizeQ8KGeneric(q, xb)
			continue
		}
		iscale := -127 / max
		q8kCodesAVX2(q, xb, iscale)
		binary.LittleEndian.PutUint32(q, math.Float32bits(1/iscale))
	}
}
