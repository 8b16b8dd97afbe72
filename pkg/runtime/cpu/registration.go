package cpu

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Name is the CPU backend's name: its Name, and its key in a
// backend.Registry (kvq's --device cpu).
const Name = "cpu"

// Registration describes the CPU backend to a backend.Registry: always
// available, the runtime's default (a runner given no backend makes its
// own, New(workers)), every KV format and every weight dtype.
func Registration() backend.Registration {
	return backend.Registration{
		Name:        Name,
		Description: "the host CPU (Go with SIMD assembly kernels)",
		Default:     true,
		Open: func(_ context.Context, o backend.OpenOptions) (backend.Backend, error) {
			return New(o.Threads), nil
		},
		Weight: supportsWeight,
	}
}

// supportsWeight reports whether Upload takes weights of dtype dt.
func supportsWeight(dt tensor.DType) error {
	switch dt {
	case tensor.F32, tensor.F16, tensor.BF16, tensor.Q80:
		return nil
	}
	if _, ok := blockTypes[dt]; ok {
		return nil
	}
	return fmt.Errorf("%w: cpu: weight dtype %v", backend.ErrUnsupported, dt)
}
