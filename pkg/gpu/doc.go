// Package gpu is the seam for kvq's CUDA backend. The CUDA implementation of
// tensor.Backend (through gorgonia.org/cu) will live behind the `cuda` build
// tag; the default build needs no cgo and reports that the GPU backend is not
// compiled in.
package gpu

import "errors"

// ErrUnavailable reports that no GPU backend can be opened.
var ErrUnavailable = errors.New("gpu: GPU backend not available")

// Options configure Open.
type Options struct {
	Device int // CUDA device ordinal
}
