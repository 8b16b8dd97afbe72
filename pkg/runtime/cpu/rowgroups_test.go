package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestRowGroups: through a RowGroups view, every row of a group gets the
// bits of a MatMul over its group alone, and a row of a group of one the
// bits of a one-row MatMul — with groups that put the step's row count on
// both sides of the kernels' thresholds (the 4-token blocks, the packed
// path from 32, 64 or 256 rows), decode rows before, between and after
// prefill groups, runs of one-row groups of every length the multi-token
// kernels split (simd.MatMulEachF16), on several workers, with and without
// Interruptible, and columns with and without a tail.
func TestRowGroups(t *testing.T) {
	const rows = 80
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, rows*301)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q80} {
		for _, cols := range []int{288, 301} { // 301: a tail past the vector kernels' steps
			if dt == tensor.Q80 && cols%32 != 0 {
				continue
			}
			b := cpu.New(3)
			m, err := b.Upload(modeltest.WeightFromF32("w", dt, rows, cols, vals[:rows*cols]))
			if err != nil {
				t.Fatal(err)
			}
			for _, groups := range [][]int{
				{1, 1, 1, 1, 1}, {1, 40, 1, 1, 7, 1, 1, 1, 1}, {300, 1, 1, 1}, {5, 70, 1, 3, 1, 1, 1, 1, 2},
				{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 8, 1, 1},
			} {
				nt := 0
				for _, n := range groups {
					nt += n
				}
				x := make([]float32, nt*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				want := make([]float32, nt*rows)
				row := 0
				for _, n := range groups {
					dst, _ := b.UploadF32(make([]float32, n*rows))
					src, _ := b.UploadF32(x[row*cols : (row+n)*cols])
					b.MatMul(dst, src, n, m)
					b.Download(want[row*rows:(row+n)*rows], dst, 0)
					row += n
				}
				for _, view := range []backend.Backend{b.RowGroups(groups), b.Interruptible(make(chan struct{})).(backend.RowGroups).RowGroups(groups)} {
					dst, _ := view.UploadF32(make([]float32, nt*rows))
					src, _ := view.UploadF32(x)
					view.MatMul(dst, src, nt, m)
					got := make([]float32, nt*rows)
					view.Download(got, dst, 0)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v, %d columns, groups %v: row %d col %d = %v, %v alone", dt, cols, groups, i/rows, i%rows, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// BenchmarkRowGroupsDecode compares a batched decode step's product over
// 16 rows (2048×2048 weights, one worker) plain, where the rows take the
// 4-token kernel, and through RowGroups, where each takes the one-row
// kernel (the price of batch invariance).
func BenchmarkRowGroupsDecode(b *testing.B) {
	const rows, cols, nt = 2048, 2048, 16
	rng := rand.New(rand.NewPCG(1, 2))
	vals, x := normals(rng, rows*cols, 1), normals(rng, nt*cols, 1)
	ones := make([]int, nt)
	for i := range ones {
		ones[i] = 1
	}
	for _, dt := range []tensor.DType{tensor.F16, tensor.Q80} {
		be := cpu.New(1)
		m, err := be.Upload(modeltest.WeightFromF32("w", dt, rows, cols, vals))
		if err != nil {
			b.Fatal(err)
		}
		dst, _ := be.UploadF32(make([]float32, nt*rows))
		src, _ := be.UploadF32(x)
		for _, v := range []struct {
			name string
			be   backend.Backend
		}{{"plain", be}, {"rowgroups", be.RowGroups(ones)}} {
			b.Run(dt.String()+"/"+v.name, func(b *testing.B) {
				for b.Loop() {
					v.be.MatMul(dst, src, nt, m)
				}
			})
		}
	}
}
