// Package cachetest is the conformance suite every quant.Format runs through
// the paged cache: byte accounting against real allocations, codec kernels
// against their own Decode, and attention on packed tiles against float64
// attention on the dequantized rows the cache holds.
package cachetest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
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
			t.Run(name, func(t *testing.T) { cache(t, spec, dim, opts.Tol) })
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

// randRows returns n rows of dim values: Gaussian with a few large outlier
// channels, as real keys have.
func randRows(rng *rand.Rand, n, dim int) []float32 {
	x := make([]float32, n*dim)
	for i := range x {
		v := rng.NormFloat64()
		if i%dim == 3 || i%dim == dim/2 {
			v = v*4 + 6
		}
		x[i] = float32(v)
	}
	return x
}

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

// cache runs a paged cache with the spec and checks accounting and attention.
func cache(t *testing.T, spec quant.Spec, dim int, tol float64) {
	g := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: dim}
	l, err := kvcache.NewLayout(g, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 24
	opts := kvcache.Options{Blocks: blocks}
	if l.AnyPreRoPE() {
		opts.RoPE = testRoPE(dim)
	}
	c, err := kvcache.New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(dim), 11))
	lens := []int{l.BlockTokens + 3, 2*l.BlockTokens + l.BlockTokens/2 + 1}
	for id, n := range lens {
		if err := c.AddSeq(kvcache.SeqID(id)); err != nil {
			t.Fatal(err)
		}
		// Two appends: a prefill and a run of single-token steps.
		for _, part := range []int{n - 7, 7} {
			pos, err := c.Begin(kvcache.SeqID(id), part)
			if err != nil {
				t.Fatalf("Begin: %v (block %d tokens, %d blocks)", err, l.BlockTokens, blocks)
			}
			for i := 0; i < part; i++ {
				for layer := 0; layer < g.Layers; layer++ {
					c.Put(layer, kvcache.SeqID(id), pos+i, randRows(rng, g.KVHeads, dim), randRows(rng, g.KVHeads, dim))
				}
			}
		}
	}
	// Byte accounting: what Stats (from Layout) says equals what is held.
	st := c.Stats()
	if held := c.HeldBytes(); held != st.Allocated.Total-st.Allocated.State {
		t.Errorf("Stats: %d bytes of K/V and windows, buffers hold %d", st.Allocated.Total-st.Allocated.State, held)
	}
	wantBlocks := 0
	for _, n := range lens {
		wantBlocks += l.BlocksFor(n)
	}
	if st.BlocksUsed != wantBlocks {
		t.Errorf("blocks used = %d, want %d", st.BlocksUsed, wantBlocks)
	}
	// Attention on packed data vs float64 attention on Read rows.
	const nHeads = 8
	nq := nHeads / g.KVHeads
	scr := &kvcache.Scratch{}
	for id, n := range lens {
		seq := kvcache.SeqID(id)
		for _, r := range [][2]int{{0, n}, {0, 1}, {n / 3, n - 2}, {n - 1, n}} {
			from, to := r[0], r[1]
			for layer := 0; layer < g.Layers; layer++ {
				q := randRows(rng, nHeads, dim)
				got := make([]float32, nHeads*dim)
				scale := float32(1 / math.Sqrt(float64(dim)))
				c.Attend(got, q, nHeads, layer, seq, from, to, scale, scr)
				keys := make([]float32, (to-from)*dim)
				vals := make([]float32, (to-from)*dim)
				for h := 0; h < g.KVHeads; h++ {
					c.Read(keys, layer, seq, true, h, from, to)
					c.Read(vals, layer, seq, false, h, from, to)
					vmax := maxAbs(vals)
					for i := 0; i < nq; i++ {
						qh := h*nq + i
						want := refAttend(q[qh*dim:(qh+1)*dim], keys, vals, dim, float64(scale))
						for d := 0; d < dim; d++ {
							if diff := math.Abs(float64(got[qh*dim+d]) - want[d]); diff > tol*vmax+1e-6 {
								t.Fatalf("seq %d layer %d [%d,%d) head %d dim %d: packed attention %v, on decoded rows %v (diff %g > %g)",
									seq, layer, from, to, qh, d, got[qh*dim+d], want[d], diff, tol*vmax)
							}
						}
					}
				}
			}
		}
	}
}

// refAttend is float64 attention of one query over rows of keys and values.
func refAttend(q, keys, vals []float32, dim int, scale float64) []float64 {
	n := len(keys) / dim
	s := make([]float64, n)
	m := math.Inf(-1)
	for j := 0; j < n; j++ {
		for d := 0; d < dim; d++ {
			s[j] += float64(q[d]) * float64(keys[j*dim+d])
		}
		s[j] *= scale
		m = math.Max(m, s[j])
	}
	var sum float64
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		sum += s[j]
	}
	out := make([]float64, dim)
	for j := 0; j < n; j++ {
		for d := 0; d < dim; d++ {
			out[d] += s[j] / sum * float64(vals[j*dim+d])
		}
	}
	return out
}

// testRoPE is a normal-pairing rotary embedding with theta 10000.
func testRoPE(dim int) func(rows []float32, pos0 int) {
	return func(rows []float32, pos0 int) {
		for r := 0; r < len(rows)/dim; r++ {
			x, pos := rows[r*dim:(r+1)*dim], pos0+r
			for i := 0; i < dim/2; i++ {
				th := float64(pos) * math.Pow(10000, -float64(2*i)/float64(dim))
				s, c := math.Sincos(th)
				a, b := float64(x[2*i]), float64(x[2*i+1])
				x[2*i], x[2*i+1] = float32(a*c-b*s), float32(a*s+b*c)
			}
		}
	}
}
