//go:build !amd64 || !gc || purego

package simd

import "testing"

func q8lSets(t *testing.T) []kernelSet { return kernelSets(t) }
