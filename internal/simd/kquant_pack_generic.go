//go:build !amd64 || !gc || purego

package simd

import "math"

func matMulDecoded(dst []float32, ldd int, x []float32, nt, cols int, dec RowDecoder, r0, r1 int) int {
	return r0
}

func matMulDecodedTokens() int { return math.MaxInt }
