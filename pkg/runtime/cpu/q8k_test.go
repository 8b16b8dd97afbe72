package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestDecodeQ8KActivations: the backend's decode products (one and three
// token rows, 2 workers, interruptible and not) of q4_K, q5_K and q6_K
// weights give, bit for bit, the pure-Go twin path: each token row
// quantized to Q8_K (simd.QuantizeQ8K, llama.cpp's quantize_row_q8_K_ref)
// and dotted with each weight row by the generic twins of
// simd.DotQ4KQ8K … (ggml_vec_dot_q*_K_q8_K's arithmetic); and they differ
// from the fp32-activation product, which they would equal if the Q8_K
// path were not taken.
func TestDecodeQ8KActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const rows, cols = 70, 768
	vals := normals(r, rows*cols, 0.05)
	for _, tc := range []struct {
		dt  tensor.DType
		gt  gguf.Type
		dot func(w, q []byte) float32
	}{
		{tensor.Q4K, gguf.Q4K, simd.DotQ4KQ8K},
		{tensor.Q5K, gguf.Q5K, simd.DotQ5KQ8K},
		{tensor.Q6K, gguf.Q6K, simd.DotQ6KQ8K},
	} {
		rb := tc.dt.RowBytes(cols)
		w := &tensor.Weight{Name: "w", DType: tc.dt, Rows: rows, Cols: cols, Raw: make([]byte, rows*rb)}
		dec := make([]float32, rows*cols)
		for i := 0; i < rows; i++ {
			gguf.QuantizeRow(tc.gt, w.Raw[i*rb:(i+1)*rb], vals[i*cols:(i+1)*cols])
			gguf.DequantizeRow(tc.gt, dec[i*cols:(i+1)*cols], w.Raw[i*rb:(i+1)*rb])
		}
		be := cpu.New(2)
		m, err := be.Upload(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, nt := range []int{1, 3} {
			x := normals(r, nt*cols, 1)
			want := quantizedTwin(w.Raw, rows, rb, x, nt, cols, cols/256*simd.Q8KBlockBytes, simd.QuantizeQ8K, tc.dot)
			open := make(chan struct{})
			for name, mm := range map[string]func(dst []float32){
				"MatMul":        func(dst []float32) { be.MatMul(cpu.Wrap(dst), cpu.Wrap(x), nt, m) },
				"Interruptible": func(dst []float32) { be.Interruptible(open).MatMul(cpu.Wrap(dst), cpu.Wrap(x), nt, m) },
			} {
				got := make([]float32, nt*rows)
				mm(got)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v %s nt=%d: dst[%d] = %v, Q8_K twin %v", tc.dt, name, nt, i, got[i], want[i])
					}
				}
			}
			f32 := make([]float32, nt*rows)
			be.F32Activations().MatMul(cpu.Wrap(f32), cpu.Wrap(x), nt, m)
			same, maxRel := 0, 0.0
			for tk := 0; tk < nt; tk++ {
				for i := 0; i < rows; i++ {
					var ref, mag float64
					for c := 0; c < cols; c++ {
						p := float64(dec[i*cols+c]) * float64(x[tk*cols+c])
						ref, mag = ref+p, mag+math.Abs(p)
					}
					if f32[tk*rows+i] == want[tk*rows+i] {
						same++
					}
					maxRel = max(maxRel, math.Abs(float64(want[tk*rows+i])-ref)/mag)
				}
			}
			if same > nt*rows/4 {
				t.Errorf("%v nt=%d: %d of %d outputs equal the fp32-activation product's: the Q8_K path was not taken", tc.dt, nt, same, nt*rows)
			}
			// Q8_K codes round each activation by at most half a step of
			// max|x|/127 per block: a relative error of order 1/254.
			if maxRel > 0.01 {
				t.Errorf("%v nt=%d: the Q8_K product is %g (relative to Σ|wx|) off the fp32 one", tc.dt, nt, maxRel)
			}
			t.Logf("%v nt=%d: largest Q8_K − fp32 difference %.2g of Σ|wx|", tc.dt, nt, maxRel)
		}
	}
}
