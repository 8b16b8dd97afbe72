package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestInterruptibleMatMul: the interruptible view's matrix product, which
// computes each goroutine's rows in runs and looks at its channel between
// them, gives bit-identical results while the channel is open, and
// computes nothing once it is closed; and a product over three goroutines
// gives the bits of one.
func TestInterruptibleMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q80} {
		for _, sh := range []struct{ rows, cols, nt int }{
			{7, 32, 1}, {100, 64, 5}, {257, 96, 17},
			// Runs of 960 rows (runRows; 896 on the packed path, whole
			// chunks of 128), the last of each goroutine's share shorter.
			{3205, 256, 520},
			// A decode step over a share in one run.
			{3000, 2048, 1},
			// Runs of 96 rows by 168 tokens (2^27 / (96·8192), rounded down
			// to 4), the last token block 96 or 98 tokens.
			{120, 8192, 600}, {120, 8192, 602},
			{1000, 4096, 64}, // 480 rows by all 64 tokens
		} {
			t.Run(fmt.Sprintf("%v/%dx%d/nt=%d", dt, sh.rows, sh.cols, sh.nt), func(t *testing.T) {
				vals := make([]float32, sh.rows*sh.cols)
				for i := range vals {
					vals[i] = float32(rng.NormFloat64())
				}
				x := make([]float32, sh.nt*sh.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				w := modeltest.WeightFromF32("w", dt, sh.rows, sh.cols, vals)
				be := cpu.New(3)
				m, err := be.Upload(w)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, sh.nt*sh.rows)
				be.MatMul(cpu.Wrap(want), cpu.Wrap(x), sh.nt, m)
				got := make([]float32, len(want))
				if sh.nt >= cpu.PackTokens(dt) {
					// One goroutine, one call over all the rows: on the
					// packed path the three goroutines' chunks (whole
					// packed chunks, taken spread) give the same bits.
					cpu.New(1).MatMul(cpu.Wrap(got), cpu.Wrap(x), sh.nt, m)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("MatMul on 3 goroutines: dst[%d] = %v, on one %v (bit for bit)", i, want[i], got[i])
						}
					}
				}
				open := make(chan struct{})
				be.Interruptible(open).MatMul(cpu.Wrap(got), cpu.Wrap(x), sh.nt, m)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("interruptible MatMul: dst[%d] = %v, want %v (bit for bit)", i, got[i], want[i])
					}
				}
				closed := make(chan struct{})
				close(closed)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				be.Interruptible(closed).MatMul(cpu.Wrap(got), cpu.Wrap(x), sh.nt, m)
				for i, v := range got {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("MatMul after done closed wrote dst[%d] = %v", i, v)
					}
				}
			})
		}
	}
}
