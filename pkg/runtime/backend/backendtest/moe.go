package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// RefRoute is the float64 reference of backend.MoE's Route for one token:
// the k chosen experts, most weighted first (ties to the lower index),
// and their weights.
func RefRoute(logits []float32, k int, r backend.Routing) ([]int, []float64) {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	top := idx[:k]
	m := float64(logits[top[0]])
	w := make([]float64, k)
	var s float64
	for j, e := range top {
		w[j] = math.Exp(float64(logits[e]) - m)
		s += w[j]
	}
	if r == backend.SoftmaxTopK {
		s = 0
		for _, v := range logits {
			s += math.Exp(float64(v) - m)
		}
	}
	for j := range w {
		w[j] /= s
	}
	return top, w
}

// RunMoE checks a backend's backend.MoE ops against float64 references:
// Route in each routing order (indices exactly, weights within 1e-6), and
// ExpertFFN on routes where some experts take many tokens and some none,
// for each weight dtype. It skips a backend without backend.MoE.
func RunMoE(t *testing.T, be backend.Backend, opts Options) {
	opts.defaults()
	moe, ok := be.(backend.MoE)
	if !ok {
		t.Skipf("%s backend does not implement backend.MoE", be.Name())
	}
	rng := rand.New(rand.NewPCG(11, 13))
	for _, r := range []backend.Routing{backend.TopKSoftmax, backend.SoftmaxTopK, backend.SoftmaxTopKNorm} {
		for _, sh := range [][3]int{{1, 4, 2}, {9, 8, 2}, {33, 128, 8}, {5, 6, 6}} {
			nt, n, k := sh[0], sh[1], sh[2]
			t.Run(fmt.Sprintf("Route/%d/%dx%d/top%d", r, nt, n, k), func(t *testing.T) {
				logits := randVec(rng, nt*n, 3)
				logits[0] = logits[1] // a tie: the lower index first
				dst := be.Alloc(nt * 2 * k)
				defer be.Free(dst)
				moe.Route(dst, upload(t, be, logits), nt, n, k, r)
				got := download(t, be, dst, nt*2*k)
				for i := 0; i < nt; i++ {
					top, w := RefRoute(logits[i*n:(i+1)*n], k, r)
					for j := range top {
						if e := got[i*2*k+j]; e != float32(top[j]) {
							t.Fatalf("token %d slot %d: expert %v, want %d (logits %v)", i, j, e, top[j], logits[i*n:(i+1)*n])
						}
						if d := math.Abs(float64(got[i*2*k+k+j]) - w[j]); d > 1e-6 {
							t.Fatalf("token %d slot %d: weight %v, want %v", i, j, got[i*2*k+k+j], w[j])
						}
					}
				}
			})
		}
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q80} {
		// nt, experts, k, dim, hidden: one decode row; a batch where
		// every expert has tokens; a long prefill over few experts (the
		// packed kernels) with one expert left unused.
		for _, sh := range [][5]int{{1, 4, 2, 64, 32}, {13, 6, 3, 32, 96}, {70, 5, 2, 64, 64}} {
			nt, ne, k, dim, hidden := sh[0], sh[1], sh[2], sh[3], sh[4]
			t.Run(fmt.Sprintf("ExpertFFN/%v/%dtok/%dexperts/top%d/dim%d", dt, nt, ne, k, dim), func(t *testing.T) {
				var ex backend.Experts
				var gate, up, down [][]float64
				for e := 0; e < ne; e++ {
					for _, p := range []struct {
						dst  *[]backend.Matrix
						ref  *[][]float64
						r, c int
					}{{&ex.Gate, &gate, hidden, dim}, {&ex.Up, &up, hidden, dim}, {&ex.Down, &down, dim, hidden}} {
						w := modeltest.WeightFromF32(fmt.Sprintf("e%d", e), dt, p.r, p.c, randVec(rng, p.r*p.c, 1/math.Sqrt(float64(p.c))))
						m, err := be.Upload(w)
						if err != nil {
							t.Fatal(err)
						}
						*p.dst = append(*p.dst, m)
						*p.ref = append(*p.ref, dequant(w))
					}
				}
				x := randVec(rng, nt*dim, 1)
				route := make([]float32, nt*2*k)
				for i := 0; i < nt; i++ {
					// The last expert is never chosen when nt > 13.
					avail := ne
					if nt > 13 {
						avail--
					}
					perm := rng.Perm(avail)
					for j := 0; j < k; j++ {
						route[i*2*k+j] = float32(perm[j])
						route[i*2*k+k+j] = float32(0.2 + rng.Float64())
					}
				}
				dst := be.Alloc(nt * dim)
				defer be.Free(dst)
				moe.ExpertFFN(dst, upload(t, be, x), nt, upload(t, be, route), k, &ex)
				want, mag := make([]float64, nt*dim), make([]float64, nt*dim)
				for i := 0; i < nt; i++ {
					for j := 0; j < k; j++ {
						e, w := int(route[i*2*k+j]), float64(route[i*2*k+k+j])
						a, am := make([]float64, hidden), make([]float64, hidden)
						for h := 0; h < hidden; h++ {
							var g, u, gm, um float64
							for c := 0; c < dim; c++ {
								xv := float64(x[i*dim+c])
								g += gate[e][h*dim+c] * xv
								u += up[e][h*dim+c] * xv
								gm += math.Abs(gate[e][h*dim+c] * xv)
								um += math.Abs(up[e][h*dim+c] * xv)
							}
							a[h] = g / (1 + math.Exp(-g)) * u
							am[h] = gm*math.Abs(u) + um*math.Abs(g) + math.Abs(a[h])
						}
						for c := 0; c < dim; c++ {
							for h := 0; h < hidden; h++ {
								want[i*dim+c] += w * down[e][c*hidden+h] * a[h]
								mag[i*dim+c] += w * math.Abs(down[e][c*hidden+h]) * am[h]
							}
						}
					}
				}
				check(t, "ExpertFFN", download(t, be, dst, nt*dim), want, mag, 4*opts.OpTol)
			})
		}
	}
}
