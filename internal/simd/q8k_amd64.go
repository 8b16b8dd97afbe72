//go:build amd64 && gc && !purego

package simd

func dotQ4KQ8K(w, q []byte, nb int) float32 {
	if !useAsm {
		return dotQ4KQ8KGeneric(w, q, nb)
	}
	return dotQ4KQ8KAVX2(w, q, nb)
}

func dotQ5KQ8K(w, q []byte, nb int) float32 {
	if !useAsm {
		return dotQ5KQ8KGeneric(w, q, nb)
	}
	return dotQ5KQ8KAVX2(w, q, nb)
}

func dotQ6KQ8K(w, q []byte, nb int) float32 {
	if !useAsm {
		return dotQ6KQ8KGeneric(w, q, nb)
	}
	return dotQ6KQ8KAVX2(w, q, nb)
}
