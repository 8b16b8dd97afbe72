//go:build !amd64 || !gc || purego

package simd

import "testing"

func q8lSets(t testing.TB) []kernelSet { return kernelSets(t) }
