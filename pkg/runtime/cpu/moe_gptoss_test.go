package cpu_test

import (
	"math"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// TestClampedSwiGLU checks GPT-OSS's activation against the reference
// implementation's formula in float64, at and beyond the clamps.
func TestClampedSwiGLU(t *testing.T) {
	const alpha, limit = 1.702, 7.0
	gs := []float32{-9, -7, -1.5, -0.25, 0, 0.3, 2, 6.99, 7, 7.01, 20}
	us := []float32{-12, -7, -0.5, 0, 0.4, 1, 3, 6.5, 7, 8, 100}
	var g, u []float32
	for _, a := range gs {
		for _, b := range us {
			g, u = append(g, a), append(u, b)
		}
	}
	want := make([]float64, len(g))
	for i := range g {
		x := math.Min(float64(g[i]), limit)
		y := math.Max(math.Min(float64(u[i]), limit), -limit)
		want[i] = x / (1 + math.Exp(-alpha*x)) * (y + 1)
	}
	cpu.ClampedSwiGLU(g, u, alpha, limit)
	for i, w := range want {
		if d := math.Abs(float64(g[i]) - w); d > 1e-6*math.Max(1, math.Abs(w)) {
			t.Errorf("gate %v up %v: %v, want %v", gs[i/len(us)], us[i%len(us)], g[i], w)
		}
	}
}
