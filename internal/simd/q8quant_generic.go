//go:build !amd64 || !gc || purego

package simd

func quantizeQ80(dst []byte, x []float32) { quantizeQ80Generic(dst, x) }
