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

// TestPrefillKQ8KActivations: on every kernel set, the backend's
// q4_K, q5_K and q6_K products (and q4_0's, q5_0's and iq4_nl's, on Q8_0 activations) over many token rows (40, and simd.MatMulDecodedTokens,
// where the packed fp32 path used to start; 2 workers, plain and
// interruptible; the default kernels, forced AVX2 and the pure-Go twins)
// give, bit for bit, the pure-Go Q8_K twin path, each token
// row quantized (simd.QuantizeQ8K; QuantizeQ80 for the legacy types) and dotted with each
// weight row (DotQ4KQ8K, DotQ5KQ8K, DotQ6KQ8K, DotQ40Q80, DotQ50Q80, DotIQ4NLQ80), and so decode's bits; F32Activations keeps the fp32 product (which differs).
func TestPrefillKQ8KActivations(t *testing.T) {
	q8k := qAct{simd.QuantizeQ8K, 256, simd.Q8KBlockBytes}
	q80 := qAct{simd.QuantizeQ80, 32, simd.Q80BlockBytes}
	for _, tc := range []struct {
		dt  tensor.DType
		gt  gguf.Type
		dot func(w, q []byte) float32
		act qAct
	}{
		{tensor.Q4K, gguf.Q4K, simd.DotQ4KQ8K, q8k},
		{tensor.Q5K, gguf.Q5K, simd.DotQ5KQ8K, q8k},
		{tensor.Q6K, gguf.Q6K, simd.DotQ6KQ8K, q8k},
		{tensor.Q40, gguf.Q40, simd.DotQ40Q80, q80},
		{tensor.Q50, gguf.Q50, simd.DotQ50Q80, q80},
		{tensor.IQ4NL, gguf.IQ4NL, simd.DotIQ4NLQ80, q80},
	} {
		for _, ks := range []struct {
			name  string
			force func() func()
		}{
			{"default", func() func() { return func() {} }},
			{"avx2", simd.ForceAVX2},
			{"generic", simd.ForceGeneric},
		} {
			t.Run(tc.dt.String()+"/"+ks.name, func(t *testing.T) {
				defer ks.force()()
				testPrefillKQ8K(t, tc.dt, tc.gt, tc.dot, tc.act)
			})
		}
	}
}

// qAct is how a weight type's products quantize a token row: the
// quantizer, and its blocks' values and bytes.
type qAct struct {
	quant       func(dst []byte, x []float32)
	vals, bytes int
}

func testPrefillKQ8K(t *testing.T, dt tensor.DType, gt gguf.Type, dot func(w, q []byte) float32, act qAct) {
	r := rand.New(rand.NewPCG(46, 4))
	const rows, cols = 70, 768
	vals := normals(r, rows*cols, 0.05)
	rb := dt.RowBytes(cols)
	w := &tensor.Weight{Name: "w", DType: dt, Rows: rows, Cols: cols, Raw: make([]byte, rows*rb)}
	for i := 0; i < rows; i++ {
		gguf.QuantizeRow(gt, w.Raw[i*rb:(i+1)*rb], vals[i*cols:(i+1)*cols])
	}
	be := cpu.New(2)
	m, err := be.Upload(w)
	if err != nil {
		t.Fatal(err)
	}
	nts := []int{40}
	if p := simd.MatMulDecodedTokens(); p < 1000 && p != 40 {
		nts = append(nts, p)
	}
	for _, nt := range nts {
		x := normals(r, nt*cols, 1)
		f32 := make([]float32, nt*rows)
		be.F32Activations().MatMul(cpu.Wrap(f32), cpu.Wrap(x), nt, m)
		want := quantizedTwin(w.Raw, rows, rb, x, nt, cols, cols/act.vals*act.bytes, act.quant, dot)
		same := 0
		for i := range want {
			if math.Float32bits(f32[i]) == math.Float32bits(want[i]) {
				same++
			}
		}
		if same == len(want) {
			t.Fatalf("nt=%d: the F32Activations product equals the Q8_K twin's everywhere", nt)
		}
		open := make(chan struct{})
		for name, mm := range map[string]func(dst []float32){
			"MatMul":        func(dst []float32) { be.MatMul(cpu.Wrap(dst), cpu.Wrap(x), nt, m) },
			"Interruptible": func(dst []float32) { be.Interruptible(open).MatMul(cpu.Wrap(dst), cpu.Wrap(x), nt, m) },
		} {
			got := make([]float32, nt*rows)
			mm(got)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s nt=%d: dst[%d] = %v, want %v", name, nt, i, got[i], want[i])
				}
			}
		}
	}
}
