//go:build cudaemu || cuda

package gpu

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

// TestGPTOSSRefused: the kernels have no attention-sink term and the MoE
// ops no expert biases or clamped SwiGLU yet, so the GPU backend reports
// ErrUnsupported for both instead of computing without them, and the
// runtime refuses a GPT-OSS model on it before running anything.
func TestGPTOSSRefused(t *testing.T) {
	b := openTest(t)
	t.Run("attention sinks", func(t *testing.T) {
		l, err := kvcache.NewLayout(kvcache.Geometry{Layers: 1, KVHeads: 1, HeadDim: 64}, quant.Spec{K: quant.FP16, V: quant.FP16}, 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kvcache.New(l, kvcache.Options{Blocks: 2, Storage: b})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.AddSeq(0)
		p, err := c.Reserve([]kvcache.Append{{Seq: 0, N: 2}})
		if err != nil {
			t.Fatal(err)
		}
		k, v, q, out := put(t, b, make([]float32, 128)), put(t, b, make([]float32, 128)), put(t, b, make([]float32, 256)), b.Alloc(256)
		b.WriteKV(c.Storage(), 0, k, v, p)
		b.Attention(out, q, k, v, c.Storage(), 0, p, backend.AttnParams{Heads: 2, Scale: 0.125, Sinks: []float32{1, 2}})
		if err := b.Download(make([]float32, 1), out, 0); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("Attention with sinks: %v, want ErrUnsupported", err)
		}
	})
	t.Run("expert extras", func(t *testing.T) {
		w, err := b.Upload(&kvqtensor.Weight{Name: "w", DType: kvqtensor.F32, Rows: 32, Cols: 32, F32: make([]float32, 32*32)})
		if err != nil {
			t.Fatal(err)
		}
		e := &backend.Experts{Gate: []backend.Matrix{w}, Up: []backend.Matrix{w}, Down: []backend.Matrix{w}, Alpha: 1.702, Limit: 7}
		out := b.Alloc(32)
		b.ExpertFFN(out, put(t, b, make([]float32, 32)), 1, put(t, b, []float32{0, 1}), 1, e)
		if err := b.Download(make([]float32, 1), out, 0); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("ExpertFFN with the clamped SwiGLU: %v, want ErrUnsupported", err)
		}
	})
	t.Run("runner", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := modeltest.WriteGPTOSSGGUF(path, modeltest.GPTOSS{Seed: 1}); err != nil {
			t.Fatal(err)
		}
		m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		_, err = runtime.NewRunner(m, runtime.RunnerOptions{Backend: b})
		if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "attention sinks") {
			t.Errorf("NewRunner(GPT-OSS on the GPU) = %v, want ErrUnsupported naming attention sinks", err)
		}
	})
}
