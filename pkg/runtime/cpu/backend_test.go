package cpu_test

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// TestConformance runs the backend conformance suite on the CPU backend,
// with one worker and with several (results must not depend on them), with
// float32 activations (F32Activations): the suite's references take them
// so, where the backend's own Q8_0 decode products quantize them
// (TestDecodeQ80Activations checks those).
func TestConformance(t *testing.T) {
	backendtest.Run(t, cpu.New(1).F32Activations(), backendtest.Options{Dims: []int{64}})
	t.Run("workers=3", func(t *testing.T) {
		backendtest.Run(t, cpu.New(3).F32Activations(), backendtest.Options{Formats: []string{"fp16", "int4", "kivi2", "q4_0:rot", "kvquant4", "quanto4:r8"}, Dims: []int{64}})
	})
}

// TestBackendRegistration checks the CPU's Registration against the
// backend it opens, and that it is the runtime's default.
func TestBackendRegistration(t *testing.T) {
	r := cpu.Registration()
	backendtest.RunRegistration(t, r)
	if !r.Default || r.Unavailable != nil {
		t.Errorf("cpu registration: Default %v, Unavailable %v; want the available default", r.Default, r.Unavailable)
	}
}

// TestSlidingCache runs backendtest.RunSlidingCache on the CPU backend:
// window-only storage of a sliding layer attends as full storage does, on
// fp16, a quantized format with fp16 windows and a token-grouped format.
func TestSlidingCache(t *testing.T) {
	for _, text := range []string{"fp16", "int4,sink=2,residual=3", "int4:channel", "q4_0"} {
		spec, err := quant.Formats().ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(text, func(t *testing.T) { backendtest.RunSlidingCache(t, cpu.New(2), spec, 64) })
	}
}
