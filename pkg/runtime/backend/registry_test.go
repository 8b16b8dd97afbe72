package backend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// fake returns a registration named name whose Open returns the CPU
// backend and counts its calls in *opened.
func fake(name string, opened *int) backend.Registration {
	return backend.Registration{
		Name:        name,
		Description: "a test backend",
		Open: func(context.Context, backend.OpenOptions) (backend.Backend, error) {
			*opened++
			return cpu.New(1), nil
		},
	}
}

func TestRegistryRegister(t *testing.T) {
	var n int
	reg, err := backend.NewRegistry(fake("b", &n), fake("a", &n), fake("x-1", &n))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := reg.Names(), []string{"b", "a", "x-1"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q (registration order)", got, want)
	}
	r, err := reg.Lookup("a")
	if err != nil || r.Name != "a" {
		t.Fatalf(`Lookup("a") = %q, %v`, r.Name, err)
	}
	if _, ok := reg.Default(); ok {
		t.Errorf("Default() found one in a registry without a default")
	}
	def := fake("d", &n)
	def.Default = true
	if err := reg.Register(def); err != nil {
		t.Fatal(err)
	}
	if d, ok := reg.Default(); !ok || d.Name != "d" {
		t.Errorf("Default() = %q, %v, want d", d.Name, ok)
	}

	noOpen := fake("noopen", &n)
	noOpen.Open = nil
	def2 := fake("d2", &n)
	def2.Default = true
	for _, tc := range []struct {
		name string
		reg  backend.Registration
		want string // in the error
	}{
		{"duplicate", fake("a", &n), "a is registered twice"},
		{"empty name", fake("", &n), `name ""`},
		{"upper case", fake("CUDA", &n), `name "CUDA"`},
		{"space", fake("my gpu", &n), `name "my gpu"`},
		{"auto", fake("auto", &n), `"auto" is reserved`},
		{"no Open", noOpen, "noopen has no Open"},
		{"second default", def2, "d and d2 are both the default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := reg.Register(tc.reg)
			if !errors.Is(err, backend.ErrRegistration) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register(%q) = %v, want ErrRegistration mentioning %q", tc.reg.Name, err, tc.want)
			}
		})
	}
	if got, want := reg.Names(), []string{"b", "a", "x-1", "d"}; !slices.Equal(got, want) {
		t.Errorf("after refused registrations, Names() = %q, want %q", got, want)
	}
	if _, err := backend.NewRegistry(fake("a", &n), fake("a", &n)); !errors.Is(err, backend.ErrRegistration) {
		t.Errorf("NewRegistry(a, a) = %v, want ErrRegistration", err)
	}
}

func TestRegistryLookupUnknown(t *testing.T) {
	var n int
	reg, err := backend.NewRegistry(fake("cpu", &n), fake("cuda", &n))
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { _, err := reg.Lookup("tpu"); return err },
		func() error { _, err := reg.Open(context.Background(), "tpu", backend.OpenOptions{}); return err },
	} {
		err := call()
		if !errors.Is(err, backend.ErrUnknownBackend) || !strings.Contains(err.Error(), `"tpu" (registered: cpu, cuda)`) {
			t.Errorf("unknown backend: %v, want ErrUnknownBackend naming tpu and listing cpu, cuda", err)
		}
	}
	if n != 0 {
		t.Errorf("a failed lookup opened %d backends", n)
	}
	var empty backend.Registry
	if _, err := empty.Lookup("cpu"); !errors.Is(err, backend.ErrUnknownBackend) {
		t.Errorf("zero Registry: Lookup = %v, want ErrUnknownBackend", err)
	}
}

func TestRegistryOpen(t *testing.T) {
	var n int
	why := errors.New("this kvq was built without the tpu tag")
	off := fake("tpu", &n)
	off.Unavailable = why
	reg, err := backend.NewRegistry(fake("cpu", &n), off)
	if err != nil {
		t.Fatal(err)
	}
	be, err := reg.Open(context.Background(), "cpu", backend.OpenOptions{Threads: 2})
	if err != nil || be == nil || n != 1 {
		t.Fatalf(`Open("cpu") = %v, %v after %d opens, want a backend after 1`, be, err, n)
	}
	_, err = reg.Open(context.Background(), "tpu", backend.OpenOptions{})
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, why) || n != 1 {
		t.Errorf(`Open("tpu") = %v (%d opens), want ErrUnavailable wrapping the reason, without calling Open`, err, n)
	}
	if err := off.Supports(backend.Need{}); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Supports of an unavailable backend = %v, want ErrUnavailable", err)
	}
}

// TestRegistrationSupports: Supports asks KV about every format of every
// spec (K, V and the per-layer overrides') and Weight about every dtype,
// and names the first one refused.
func TestRegistrationSupports(t *testing.T) {
	formats := quant.Formats()
	parse := func(s string) quant.Spec {
		t.Helper()
		spec, err := formats.ParseSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	var n int
	r := fake("pick", &n)
	r.KV = func(f quant.Format) error {
		if strings.HasPrefix(f.Name(), "int") {
			return fmt.Errorf("%w: no kernel for %s", backend.ErrUnsupported, f.Name())
		}
		return nil
	}
	r.Weight = func(dt tensor.DType) error {
		if dt == tensor.Q80 {
			return fmt.Errorf("%w: weight dtype %v", backend.ErrUnsupported, dt)
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		need backend.Need
		want string // "" for nil, else in the error
	}{
		{"nothing", backend.Need{}, ""},
		{"fp16", backend.Need{Caches: []quant.Spec{parse("fp16")}, Weights: []tensor.DType{tensor.F16, tensor.BF16}}, ""},
		{"k only", backend.Need{Caches: []quant.Spec{parse("k=int8,v=fp16")}}, "cache k=int8,v=fp16: backend: unsupported: no kernel for int8"},
		{"v only", backend.Need{Caches: []quant.Spec{parse("k=q8_0,v=int4")}}, "no kernel for int4"},
		{"override", backend.Need{Caches: []quant.Spec{parse("fp16"), parse("q8_0,l-1=int2")}}, "no kernel for int2"},
		{"weights", backend.Need{Caches: []quant.Spec{parse("fp16")}, Weights: []tensor.DType{tensor.F32, tensor.Q80}}, "weight dtype Q8_0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Supports(tc.need)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Supports = %v, want nil", err)
			case tc.want != "" && (!errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "backend pick")):
				t.Errorf("Supports = %v, want ErrUnsupported naming the backend and %q", err, tc.want)
			}
		})
	}
	// Nil KV and Weight: everything runs.
	all := fake("all", &n)
	if err := all.Supports(backend.Need{Caches: []quant.Spec{parse("int2")}, Weights: []tensor.DType{tensor.Q80}}); err != nil {
		t.Errorf("Supports with nil KV and Weight = %v, want nil", err)
	}
}
