//go:build cudaemu || cuda

package gpu_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
	cpubackend "github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestMoEModelAgainstCPU runs tiny Mixtral and Qwen3-MoE checkpoints (F16
// GGUF) on the GPU backend and on the CPU one: a 13-token prefill and four
// decode steps give the same logits within the tensor-core GEMM's
// rounding (the prefill's activations rounded to fp16, and the keys and
// values it caches with them): about 1e-3 of the largest logit on the
// emulator; the bound is 1e-2.
func TestMoEModelAgainstCPU(t *testing.T) {
	for _, spec := range []modeltest.Spec{
		{Arch: "mixtral", Experts: 4, ExpertsUsed: 2, RouterScale: 4, Seed: 3, DType: "F16"},
		{Arch: "qwen3moe", Layers: 3, Experts: 6, ExpertsUsed: 2, ExpertHidden: 32, NormTopK: true, MLPOnly: []int{0}, RouterScale: 4, Seed: 4, DType: "F16"},
	} {
		t.Run(spec.Arch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := modeltest.WriteGGUF(path, spec); err != nil {
				t.Fatal(err)
			}
			m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkStepsNearCPU(t, m, fp16Layout(t, m), 1e-2)
		})
	}
}

// checkStepsNearCPU runs a 13-token prefill and 4 decode steps of m on the
// CPU and on the GPU backend with caches of layout l, and checks that each
// step's GPU logits are within tol of the largest CPU logit (which must not
// be 0). The CPU keeps float32 activations (its decode products of MXFP4
// and the legacy types quantize them to Q8_0 otherwise, as llama.cpp's do;
// the GPU's GEMV keeps them in float32).
func checkStepsNearCPU(t *testing.T, m *runtime.Model, l *kvcache.Layout, tol float64) {
	t.Helper()
	logits := func(opts runtime.RunnerOptions) [][]float32 {
		r, err := runtime.NewRunner(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(32)})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.AddSeq(0)
		var out [][]float32
		toks := []int{5, 17, 33, 2, 99, 120, 7, 64, 250, 3, 11, 80, 42}
		for step := 0; step < 5; step++ {
			got, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: toks}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got[0])
			toks = []int{(step*37 + 5) % m.Vocab}
		}
		return out
	}
	cpu, gpu := logits(runtime.RunnerOptions{Backend: cpubackend.New(0).F32Activations()}), logits(runtime.RunnerOptions{Backend: openGPU(t)})
	for s := range cpu {
		var d, mx float64
		for i := range cpu[s] {
			d = math.Max(d, math.Abs(float64(gpu[s][i]-cpu[s][i])))
			mx = math.Max(mx, math.Abs(float64(cpu[s][i])))
		}
		t.Logf("step %d: max |GPU − CPU| %.3g of max |logit| %.3g", s, d, mx)
		if d > tol*mx || mx == 0 {
			t.Errorf("step %d: GPU logits differ from the CPU's by %.3g (max |logit| %.3g)", s, d, mx)
		}
	}
}
