package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestDecodeQ80Activations: the backend's decode products of Q8_0 weights
// (one and three token rows, 2 workers; plain, interruptible, and as three
// one-row groups) give, bit for bit, the pure-Go twin path: each token row
// quantized to Q8_0 (simd.QuantizeQ80, llama.cpp's x86 quantize_row_q8_0)
// and dotted with each weight row by the generic twin of simd.DotQ80Q80
// (ggml_vec_dot_q8_0_q8_0's arithmetic), so a token's result does not
// depend on the tokens beside it; they differ from the fp32-activation
// product (F32Activations), which they would equal if the Q8_0 path were
// not taken, and by no more than the activations' rounding. Prefill (40
// token rows, and the fp32 packed threshold simd.MatMulPackTokensQ80) takes
// the same quantized path (simd.MatMulQ80Q80): every token row the twin's
// bits too, plain and interruptible.
func TestDecodeQ80Activations(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	const rows, cols = 70, 768
	vals := normals(r, rows*cols, 0.05)
	w := modeltest.WeightFromF32("w", tensor.Q80, rows, cols, vals)
	rb := tensor.Q80.RowBytes(cols)
	be := cpu.New(2)
	m, err := be.Upload(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, nt := range []int{1, 3} {
		x := normals(r, nt*cols, 1)
		want := quantizedTwin(w.Raw, rows, rb, x, nt, cols, cols/32*simd.Q80BlockBytes, simd.QuantizeQ80, simd.DotQ80Q80)
		ones := make([]int, nt)
		for i := range ones {
			ones[i] = 1
		}
		for name, b := range map[string]backend.Backend{
			"MatMul":        be,
			"Interruptible": be.Interruptible(make(chan struct{})),
			"RowGroups":     be.RowGroups(ones),
		} {
			got := make([]float32, nt*rows)
			b.MatMul(cpu.Wrap(got), cpu.Wrap(x), nt, m)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s nt=%d: dst[%d] = %v, Q8_0 twin %v", name, nt, i, got[i], want[i])
				}
			}
		}
		f32 := make([]float32, nt*rows)
		be.F32Activations().MatMul(cpu.Wrap(f32), cpu.Wrap(x), nt, m)
		same, maxRel := 0, 0.0
		for tk := 0; tk < nt; tk++ {
			for i := 0; i < rows; i++ {
				var mag float64
				for c := 0; c < cols; c++ {
					mag += math.Abs(float64(vals[i*cols+c]) * float64(x[tk*cols+c]))
				}
				if f32[tk*rows+i] == want[tk*rows+i] {
					same++
				}
				maxRel = max(maxRel, math.Abs(float64(want[tk*rows+i])-float64(f32[tk*rows+i]))/mag)
			}
		}
		if same > nt*rows/4 {
			t.Errorf("nt=%d: %d of %d outputs equal the fp32-activation product's: the Q8_0 path was not taken", nt, same, nt*rows)
		}
		if maxRel > 0.01 { // half a step of max|x|/127 a block
			t.Errorf("nt=%d: the Q8_0 product is %g (relative to Σ|wx|) off the fp32 one", nt, maxRel)
		}
	}
	for _, nt := range []int{40, min(simd.MatMulPackTokensQ80(), 200)} {
		x := normals(r, nt*cols, 1)
		want := quantizedTwin(w.Raw, rows, rb, x, nt, cols, cols/32*simd.Q80BlockBytes, simd.QuantizeQ80, simd.DotQ80Q80)
		for name, b := range map[string]backend.Backend{"MatMul": be, "Interruptible": be.Interruptible(make(chan struct{}))} {
			got := make([]float32, nt*rows)
			b.MatMul(cpu.Wrap(got), cpu.Wrap(x), nt, m)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s prefill of %d rows: dst[%d] = %v, Q8_0 twin %v", name, nt, i, got[i], want[i])
				}
			}
		}
	}
}
