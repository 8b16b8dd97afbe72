package cmdutil

import (
	"github.com/kvqlabs/kvq/pkg/gpu"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// Backends returns the registry of every backend kvq can run on: the
// values --device accepts (besides auto) and the list kvq version prints,
// in this order, which is also the order --device auto tries them in
// (the default, the CPU, last).
//
// This list is the one place kvq names its backends. It is an explicit
// list rather than init-time registration (docs/style.md rule 11): each
// backend package exports its Registration in every build — one its
// build tag leaves out registers as unavailable, with the reason — so
// kvq must import the package either way, and a list makes the order
// visible and the registry a value tests replace (Factory.Backends)
// instead of process-wide state (rule 28). A new backend (ROCm, Metal)
// is its package, with its build tag, plus its import and one line here
// (docs/backends.md).
func Backends() *backend.Registry {
	reg, err := backend.NewRegistry(
		cpu.Registration(),
		gpu.Registration(),
	)
	if err != nil {
		panic(err) // two backends of one name: a programmer error
	}
	return reg
}

// BackendRegistry returns f.Backends, or Backends() when it is nil.
func (f *Factory) BackendRegistry() *backend.Registry {
	if f.Backends != nil {
		return f.Backends
	}
	return Backends()
}
