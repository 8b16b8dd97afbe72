package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestExpertFFNSkipsUnused: an expert no token chose is never read: its
// matrices here hold no data at all (a read would panic), as an expert
// whose pages of the memory map were never touched.
func TestExpertFFNSkipsUnused(t *testing.T) {
	const nt, ne, k, dim, hidden = 9, 4, 2, 32, 16
	rng := rand.New(rand.NewPCG(1, 2))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	mk := func(rows, cols int, empty bool) backend.Matrix {
		w := &tensor.Weight{Name: "e", DType: tensor.F32, Rows: rows, Cols: cols}
		if !empty {
			w.F32 = vals(rows * cols)
		}
		return &Matrix{w: w}
	}
	var ex backend.Experts
	for e := 0; e < ne; e++ {
		unused := e == 2
		ex.Gate = append(ex.Gate, mk(hidden, dim, unused))
		ex.Up = append(ex.Up, mk(hidden, dim, unused))
		ex.Down = append(ex.Down, mk(dim, hidden, unused))
	}
	route := make([]float32, nt*2*k)
	for i := 0; i < nt; i++ {
		route[i*2*k], route[i*2*k+1] = float32(i%2), 3 // experts 0 or 1, and 3
		route[i*2*k+2], route[i*2*k+3] = 0.7, 0.3
	}
	b := New(2)
	dst := b.Alloc(nt * dim)
	b.ExpertFFN(dst, Wrap(vals(nt*dim)), nt, Wrap(route), k, &ex)
	for i, v := range b.Host(dst) {
		if v == 0 {
			t.Fatalf("value %d is 0: the chosen experts did not run", i)
		}
	}
}
