//go:build !amd64 || !gc || purego

package simd

func dotQ8Legacy(t qdotType, w, q []byte, nb int) float32 { return dotQ8LegacyGeneric(t, w, q, nb) }
