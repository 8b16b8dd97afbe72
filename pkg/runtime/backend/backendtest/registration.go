package backendtest

import (
	"context"
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// RunRegistration checks a backend's Registration against the backend
// it opens: a registry takes it; when it is unavailable, Open is refused
// with the reason and nothing more is checked (the test passes); otherwise the opened
// backend bears its name, its KV answer agrees with the backend's
// SupportsKV for every preset of quant.Formats(), and its Weight answer
// with Upload for every weight dtype (refusals wrap
// backend.ErrUnsupported on both sides). The backend is opened with
// OpenOptions{Threads: 1} and closed at the end when it has a Close
// method.
func RunRegistration(t *testing.T, r backend.Registration) {
	t.Helper()
	reg, err := backend.NewRegistry(r)
	if err != nil {
		t.Fatal(err)
	}
	be, err := reg.Open(context.Background(), r.Name, backend.OpenOptions{Threads: 1})
	if r.Unavailable != nil {
		if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, r.Unavailable) {
			t.Errorf("%s is unavailable (%v), but Open = %v, want ErrUnavailable with the reason", r.Name, r.Unavailable, err)
		}
		if err := r.Supports(backend.Need{}); !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("%s is unavailable, but Supports = %v", r.Name, err)
		}
		t.Logf("%s: unavailable: %v", r.Name, r.Unavailable)
		return
	}
	if err != nil {
		t.Skipf("%s: available but does not open here: %v", r.Name, err)
	}
	if c, ok := be.(interface{ Close() }); ok {
		defer c.Close()
	}
	if be.Name() != r.Name {
		t.Errorf("the %s registration opens a backend named %q", r.Name, be.Name())
	}
	if r.Description == "" {
		t.Errorf("%s has no description", r.Name)
	}
	formats := quant.Formats()
	for _, name := range formats.Names() {
		f, err := formats.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Supports(backend.Need{Caches: []quant.Spec{quant.NewSpec(name, f, f)}})
		want := be.SupportsKV(f)
		switch {
		case (got == nil) != (want == nil):
			t.Errorf("%s: the registration says %v for KV format %s, the backend's SupportsKV %v", r.Name, got, name, want)
		case got != nil && (!errors.Is(got, backend.ErrUnsupported) || !errors.Is(want, backend.ErrUnsupported)):
			t.Errorf("%s: KV format %s refused with %v (registration) and %v (SupportsKV), want both to wrap ErrUnsupported", r.Name, name, got, want)
		}
	}
	for _, w := range testWeights() {
		got := r.Supports(backend.Need{Weights: []tensor.DType{w.DType}})
		_, want := be.Upload(w)
		switch {
		case (got == nil) != (want == nil):
			t.Errorf("%s: the registration says %v for weight dtype %v, the backend's Upload %v", r.Name, got, w.DType, want)
		case got != nil && (!errors.Is(got, backend.ErrUnsupported) || !errors.Is(want, backend.ErrUnsupported)):
			t.Errorf("%s: weight dtype %v refused with %v (registration) and %v (Upload), want both to wrap ErrUnsupported", r.Name, w.DType, got, want)
		}
	}
}

// testWeights returns a valid 2×32 weight of each dtype.
func testWeights() []*tensor.Weight {
	const rows, cols = 2, 32
	n := rows * cols
	f32 := make([]float32, n)
	u16 := make([]uint16, n)
	for i := range f32 {
		f32[i] = float32(i%7) / 8
		u16[i] = 0x3c00 // 1.0 in fp16 (1.0078125 in bf16)
	}
	q80 := make([]byte, rows*tensor.Q80.RowBytes(cols))
	for b := 0; b < len(q80); b += tensor.Q80BlockBytes {
		q80[b], q80[b+1] = 0x00, 0x3c // scale 1.0
	}
	return []*tensor.Weight{
		{Name: "w.f32", DType: tensor.F32, Rows: rows, Cols: cols, F32: f32},
		{Name: "w.f16", DType: tensor.F16, Rows: rows, Cols: cols, U16: u16},
		{Name: "w.bf16", DType: tensor.BF16, Rows: rows, Cols: cols, U16: u16},
		{Name: "w.q8_0", DType: tensor.Q80, Rows: rows, Cols: cols, Raw: q80},
	}
}
