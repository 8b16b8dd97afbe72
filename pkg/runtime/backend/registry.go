package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// A Registration describes one backend to a Registry: its name, how to
// open it, whether this build (and machine) can, and what it runs. Each
// backend package exports a function returning its Registration (cpu's,
// gpu's), which it defines in every build: a backend compiled out by its
// build tag still registers, as unavailable, with the reason.
//
// Making a Registration must be cheap and must not open a device: a
// command builds the registry before it parses its flags. Open and
// Probe are where devices are found.
type Registration struct {
	// Name is what users type (kvq's --device) and what the opened
	// backend's Name returns: lower-case letters, digits and '-', not
	// "auto" (which names the choice among backends).
	Name string
	// Description says in a few words what the backend runs on ("the
	// host CPU (Go with SIMD assembly kernels)").
	Description string
	// Unavailable says why the backend cannot be opened in this build or
	// on this machine, as a sentence for the user without a package
	// prefix ("this kvq was built without CUDA; ..."); nil when Open can
	// be tried (a device may still fail to open).
	Unavailable error
	// Default marks the backend the runtime makes by itself when given
	// none (the CPU: a runtime.Runner with a nil Backend makes its own,
	// with the runner's worker count). A caller that picks it passes no
	// backend, and kvq's --device auto falls back to it. At most one
	// registration of a Registry is the default.
	Default bool
	// Open opens the backend. It is not called while Unavailable is set.
	Open func(ctx context.Context, o OpenOptions) (Backend, error)
	// KV reports whether the backend stores and attends over KV format f,
	// before it is opened: nil, or an error wrapping ErrUnsupported that
	// names the format. It agrees with the opened backend's SupportsKV
	// (backendtest.RunRegistration checks it). Nil: every format.
	KV func(f quant.Format) error
	// Weight reports whether the backend computes with weights of dtype
	// dt: nil, or an error wrapping ErrUnsupported that names the dtype.
	// It agrees with the opened backend's Upload. Nil: every dtype.
	Weight func(dt tensor.DType) error
	// Probe, when set, describes the devices the backend finds on this
	// machine, one line each (kvq version prints them); an error says
	// why it finds none. It is not called while Unavailable is set.
	Probe func() ([]string, error)
}

// OpenOptions configure Registration.Open.
type OpenOptions struct {
	// Threads is the number of goroutines a host backend computes with
	// (0: every CPU); device backends ignore it.
	Threads int
	// Device is the ordinal of the device to open (0: the first); host
	// backends ignore it.
	Device int
}

// Need is what a run asks of a backend: the cache specs it makes caches
// of and the dtypes of its model's weights.
type Need struct {
	// Caches are checked format by format: each spec's K and V and its
	// per-layer overrides'.
	Caches  []quant.Spec
	Weights []tensor.DType
}

// Supports reports whether the backend can run what n asks, without
// opening it: nil, or an error naming the first format or dtype it does
// not run (wrapping ErrUnsupported), or why it is unavailable (wrapping
// ErrUnavailable).
func (r Registration) Supports(n Need) error {
	if r.Unavailable != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, r.Name, r.Unavailable)
	}
	for _, s := range n.Caches {
		fs := []quant.Format{s.K, s.V}
		for _, o := range s.Overrides {
			fs = append(fs, o.K, o.V)
		}
		for _, f := range fs {
			if f == nil || r.KV == nil {
				continue
			}
			if err := r.KV(f); err != nil {
				return fmt.Errorf("backend %s: cache %s: %w", r.Name, s.String(), err)
			}
		}
	}
	for _, dt := range n.Weights {
		if r.Weight == nil {
			break
		}
		if err := r.Weight(dt); err != nil {
			return fmt.Errorf("backend %s: %w", r.Name, err)
		}
	}
	return nil
}

// Registry is the set of backends a program can run on, in the order they
// were registered (the order kvq version lists them and --device auto
// tries them). The zero value is an empty registry. It is not safe for
// concurrent use while backends are being registered; once built, it is
// only read.
//
// A Registry is a value the program builds, not process-wide state:
// kvq builds its registry from an explicit list in one file of its
// command layer (cmd/kvq/internal/cli/cmdutil/backends.go), and tests
// build their own.
type Registry struct {
	regs []Registration
}

// NewRegistry returns a registry of regs, in order; the first bad or
// duplicate registration is an error (see Register).
func NewRegistry(regs ...Registration) (*Registry, error) {
	r := &Registry{}
	for _, reg := range regs {
		if err := r.Register(reg); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds reg. It refuses (with an error wrapping ErrRegistration)
// a name that is empty, "auto", not lower-case letters, digits and '-',
// or already registered; a registration without Open; and a second
// Default.
func (r *Registry) Register(reg Registration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRegistration, fmt.Sprintf(format, args...))
	}
	switch {
	case !validName(reg.Name):
		return bad("name %q: want lower-case letters, digits and '-'", reg.Name)
	case reg.Name == "auto":
		return bad(`name "auto" is reserved (it names the choice among backends)`)
	case reg.Open == nil:
		return bad("%s has no Open", reg.Name)
	}
	for _, o := range r.regs {
		if o.Name == reg.Name {
			return bad("%s is registered twice", reg.Name)
		}
		if o.Default && reg.Default {
			return bad("%s and %s are both the default", o.Name, reg.Name)
		}
	}
	r.regs = append(r.regs, reg)
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Lookup returns the backend named name. An unknown name is an error
// wrapping ErrUnknownBackend that lists the registered names.
func (r *Registry) Lookup(name string) (Registration, error) {
	for _, reg := range r.regs {
		if reg.Name == name {
			return reg, nil
		}
	}
	return Registration{}, fmt.Errorf("%w %q (registered: %s)", ErrUnknownBackend, name, strings.Join(r.Names(), ", "))
}

// Names returns the registered names, in order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.regs))
	for i, reg := range r.regs {
		names[i] = reg.Name
	}
	return names
}

// All returns the registrations, in order (a copy).
func (r *Registry) All() []Registration { return append([]Registration(nil), r.regs...) }

// Default returns the default registration (see Registration.Default),
// and false when none is.
func (r *Registry) Default() (Registration, bool) {
	for _, reg := range r.regs {
		if reg.Default {
			return reg, true
		}
	}
	return Registration{}, false
}

// Open opens the backend named name: an error wraps ErrUnknownBackend for
// a name not registered, ErrUnavailable (and the reason) for a backend
// this build or machine lacks, or is the backend's own.
func (r *Registry) Open(ctx context.Context, name string, o OpenOptions) (Backend, error) {
	reg, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	if reg.Unavailable != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, name, reg.Unavailable)
	}
	return reg.Open(ctx, o)
}
