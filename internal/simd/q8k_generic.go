//go:build !amd64 || !gc || purego

package simd

func dotQ4KQ8K(w, q []byte, nb int) float32 { return dotQ4KQ8KGeneric(w, q, nb) }

func dotQ5KQ8K(w, q []byte, nb int) float32 { return dotQ5KQ8KGeneric(w, q, nb) }

func dotQ6KQ8K(w, q []byte, nb int) float32 { return dotQ6KQ8KGeneric(w, q, nb) }

const hasVNNI = false

var useVNNI = false

func quantizeQ8K(dst []byte, x []float32) { quantizeQ8KGeneric(dst, x) }
