// Package cachetest is the conformance suite every quant.Format runs through
// the paged cache on the CPU backend: codec kernels against their own
// Decode, then backendtest.RunCache — byte accounting against real
// allocations, and attention on packed tiles against float64 attention on
// the dequantized rows the cache holds, at any head size. (Attention
// against the rows that were put, within a per-format bound, is
// backendtest.RunKV's, for the presets at usual head sizes.)
package cachetest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// Options tune Run.
type Options struct {
	// Dims are the head sizes to test (default 64 and 128).
	Dims []int
	// Tol is the largest allowed absolute difference between attention on
	// packed data and float64 attention on the decoded rows, relative to the
	// largest decoded value magnitude (default 1e-4).
	Tol float64
	// Windows also runs with sink=2,residual=5 when the format is quantized.
	Windows bool
}

// Run runs the suite for format f.
func Run(t *testing.T, f quant.Format, opts Options) {
	t.Helper()
	if len(opts.Dims) == 0 {
		opts.Dims = []int{64, 128}
	}
	if opts.Tol == 0 {
		opts.Tol = 1e-4
	}
	for _, dim := range opts.Dims {
		t.Run(f.Name()+"/codec/d"+itoa(dim), func(t *testing.T) { codecKernels(t, f, dim, opts.Tol) })
		specs := []quant.Spec{{K: f, V: f}}
		if opts.Windows && quant.Quantized(f) {
			specs = append(specs, quant.Spec{K: f, V: f, Sink: 2, Residual: 5})
		}
		for _, spec := range specs {
			name := f.Name() + "/cache/d" + itoa(dim)
			if spec.Residual > 0 {
				name += "/windows"
			}
			t.Run(name, func(t *testing.T) { backendtest.RunCache(t, cpu.New(1), spec, dim, opts.Tol, math.Inf(1)) })
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func randRows(rng *rand.Rand, n, dim int) []float32 { return backendtest.RandRows(rng, n, dim) }

// codecKernels checks Scores and Accumulate against Decode on one tile.
func codecKernels(t *testing.T, f quant.Format, dim int, tol float64) {
	rng := rand.New(rand.NewPCG(uint64(dim), 7))
	for _, key := range []bool{true, false} {
		c, err := f.NewCodec(quant.CodecParams{Dim: dim, Key: key, Layer: 1, Head: 0})
		if err != nil {
			t.Fatalf("NewCodec(dim %d): %v", dim, err)
		}
		g := c.TokenGroup()
		rows := g * max(2, (48+g-1)/g)
		tile := make([]byte, c.TileBytes(rows))
		src := randRows(rng, rows, dim)
		for r := 0; r < rows; r += g {
			c.Encode(tile, r, src[r*dim:], g)
		}
		dec := make([]float32, rows*dim)
		c.Decode(dec, tile, 0, rows)
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("Decode produced %v at %d from finite input", v, i)
			}
		}
		scale := maxAbs(dec)
		const nq = 3
		q := randRows(rng, nq, dim)
		for _, rng2 := range [][2]int{{0, rows}, {1, rows - 1}, {g, 2 * g}, {rows - 1, rows}} {
			r0, n := rng2[0], rng2[1]-rng2[0]
			if n <= 0 {
				continue
			}
			// Scores vs dot products with the decoded rows.
			ld := n + 2
			got := make([]float32, nq*ld)
			c.Scores(got, ld, q, nq, tile, r0, n)
			for i := 0; i < nq; i++ {
				for j := 0; j < n; j++ {
					var want, mag float64
					for d := 0; d < dim; d++ {
						want += float64(q[i*dim+d]) * float64(dec[(r0+j)*dim+d])
						mag += math.Abs(float64(q[i*dim+d]) * float64(dec[(r0+j)*dim+d]))
					}
					if diff := math.Abs(float64(got[i*ld+j]) - want); diff > tol*mag+1e-6 {
						t.Fatalf("key=%v Scores rows [%d,%d) q%d row %d = %v, Decode says %v (diff %g, tol %g)", key, r0, r0+n, i, j, got[i*ld+j], want, diff, tol*mag)
					}
				}
			}
			// Accumulate vs axpy with the decoded rows.
			w := make([]float32, nq*ld)
			for i := range w {
				w[i] = float32(rng.Float64())
			}
			acc := make([]float32, nq*dim)
			for i := range acc {
				acc[i] = 0.5
			}
			c.Accumulate(acc, w, ld, nq, tile, r0, n)
			for i := 0; i < nq; i++ {
				for d := 0; d < dim; d++ {
					want := 0.5
					var mag float64
					for j := 0; j < n; j++ {
						want += float64(w[i*ld+j]) * float64(dec[(r0+j)*dim+d])
						mag += math.Abs(float64(w[i*ld+j])) * scale
					}
					if diff := math.Abs(float64(acc[i*dim+d]) - want); diff > tol*mag+1e-6 {
						t.Fatalf("key=%v Accumulate rows [%d,%d) w%d dim %d = %v, Decode says %v (diff %g)", key, r0, r0+n, i, d, acc[i*dim+d], want, diff)
					}
				}
			}
		}
	}
}

func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}
