//go:build amd64 && gc && !purego

package simd

import "testing"

// q8lSets is kernelSets plus, on a CPU with AVX-512 VNNI, the avx512 set
// with the VNNI dots off.
func q8lSets(t testing.TB) []kernelSet {
	sets := kernelSets(t)
	if hasLegacyVNNI {
		sets = append(sets, kernelSet{"avx512-novnni", func() func() {
			useLegacyVNNI = false
			return func() { useLegacyVNNI = true }
		}})
	}
	return sets
}
