//go:build cudaemu || cuda

package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

// TestConformanceMoE runs the conformance suite's MoE ops (routing and
// the grouped expert FFNs against float64 references) as MatMul chooses
// its paths (the 70-token case runs the tensor-core GEMM: its tolerance),
// then with every product on the GEMV at the CPU's tolerance.
func TestConformanceMoE(t *testing.T) {
	b := openTest(t)
	t.Run("auto", func(t *testing.T) {
		backendtest.RunMoE(t, b, backendtest.Options{OpTol: opTolGEMM})
	})
	t.Run("gemv", func(t *testing.T) {
		defer func(n int) { b.dense.gemmMinNT = n }(b.dense.gemmMinNT)
		b.dense.gemmMinNT = math.MaxInt
		backendtest.RunMoE(t, b, backendtest.Options{OpTol: opTolFP32})
	})
}

// TestMoEAgainstCPU: the routes equal the CPU backend's exactly, and the
// expert FFN's output (GEMV path) is within float32 rounding of the CPU's,
// for a batch in which some experts take many tokens and one none.
func TestMoEAgainstCPU(t *testing.T) {
	b := openTest(t)
	defer func(n int) { b.dense.gemmMinNT = n }(b.dense.gemmMinNT)
	b.dense.gemmMinNT = math.MaxInt
	c := cpu.New(1)
	rng := rand.New(rand.NewPCG(7, 9))
	const nt, ne, k, dim, hidden = 11, 5, 2, 64, 32
	logits := randVec(rng, nt*ne, 2)
	for i := 0; i < nt; i++ {
		logits[i*ne+ne-1] = -100 // expert ne-1: never chosen
	}
	var ge, ce backend.Experts
	for e := 0; e < ne; e++ {
		for _, p := range []struct {
			g, c  *[]backend.Matrix
			r, cl int
		}{{&ge.Gate, &ce.Gate, hidden, dim}, {&ge.Up, &ce.Up, hidden, dim}, {&ge.Down, &ce.Down, dim, hidden}} {
			w := modeltest.WeightFromF32("e", kvqtensor.F16, p.r, p.cl, randVec(rng, p.r*p.cl, 0.2))
			gm, err := b.Upload(w)
			if err != nil {
				t.Fatal(err)
			}
			cm, _ := c.Upload(w)
			*p.g, *p.c = append(*p.g, gm), append(*p.c, cm)
		}
	}
	x := randVec(rng, nt*dim, 1)
	for _, r := range []backend.Routing{backend.TopKSoftmax, backend.SoftmaxTopK, backend.SoftmaxTopKNorm} {
		gl, err := b.UploadF32(logits)
		if err != nil {
			t.Fatal(err)
		}
		groute, croute := b.Alloc(nt*2*k), c.Alloc(nt*2*k)
		b.Route(groute, gl, nt, ne, k, r)
		c.Route(croute, cpu.Wrap(logits), nt, ne, k, r)
		got := make([]float32, nt*2*k)
		if err := b.Download(got, groute, 0); err != nil {
			t.Fatal(err)
		}
		if want := c.Host(croute); !slices.Equal(got, want) {
			t.Fatalf("%v: routes %v, CPU %v", r, got, want)
		}
		gx, err := b.UploadF32(x)
		if err != nil {
			t.Fatal(err)
		}
		gd, cd := b.Alloc(nt*dim), c.Alloc(nt*dim)
		b.ExpertFFN(gd, gx, nt, groute, k, &ge)
		c.ExpertFFN(cd, cpu.Wrap(x), nt, croute, k, &ce)
		out := make([]float32, nt*dim)
		if err := b.Download(out, gd, 0); err != nil {
			t.Fatal(err)
		}
		want := c.Host(cd)
		for i := range out {
			if d := math.Abs(float64(out[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%v: value %d = %v, CPU %v", r, i, out[i], want[i])
			}
		}
		for _, x := range []backend.Tensor{gl, groute, gx, gd} {
			b.Free(x)
		}
	}
}
