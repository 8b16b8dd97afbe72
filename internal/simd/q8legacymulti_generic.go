//go:build !amd64 || !gc || purego

package simd

func q80X4(qdotType) func(w []byte, stride int, q []byte, nb int, dst *[4]float32) { return nil }

func q80Runs(qdotType, []float32, []byte, []byte, int) bool { return false }
