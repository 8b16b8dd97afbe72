package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowOpsOverWorkers checks that RMSNorm and RoPE, which split a
// prefill's token rows between the workers, give every row the bits the
// one-goroutine loop gives it: rows enough for several chunks (rowOpChunk
// values each) and a last partial one, so a wrong row offset or a skipped
// or repeated chunk shows.
func TestRowOpsOverWorkers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const nt, dim, heads, headDim = 101, 2048, 16, 128
	if nt <= rowOpChunk/dim || nt <= rowOpChunk/(heads*headDim) {
		t.Fatalf("%d rows fit one chunk: the test would not split them", nt)
	}
	x := make([]float32, nt*dim)
	w := make([]float32, dim)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(1 + 0.1*r.NormFloat64())
	}
	angles := make([]float32, nt*headDim)
	for tk := 0; tk < nt; tk++ {
		for k := 0; k < headDim/2; k++ {
			s, c := math.Sincos(float64(tk) * math.Pow(10000, -float64(2*k)/headDim))
			angles[tk*headDim+k], angles[tk*headDim+headDim/2+k] = float32(c), float32(s)
		}
	}
	for _, workers := range []int{2, 3} {
		be := New(workers)
		got := &Tensor{data: make([]float32, nt*dim)}
		be.RMSNorm(got, &Tensor{data: x}, nt, &Tensor{data: w}, 1e-5)
		want := make([]float32, nt*dim)
		RMSNorm(want, x, nt, w, 1e-5)
		sameBits(t, "RMSNorm", workers, got.data, want, dim)
		for _, neox := range []bool{true, false} {
			par := &Tensor{data: append([]float32(nil), x...)}
			be.RoPE(par, nt, heads, headDim, headDim, &Tensor{data: angles}, neox)
			one := &Tensor{data: append([]float32(nil), x...)}
			New(1).RoPE(one, nt, heads, headDim, headDim, &Tensor{data: angles}, neox)
			sameBits(t, "RoPE", workers, par.data, one.data, heads*headDim)
		}
	}
}

func sameBits(t *testing.T, what string, workers int, got, want []float32, row int) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s on %d workers: row %d value %d = %v, want %v", what, workers, i/row, i%row, got[i], want[i])
		}
	}
}
