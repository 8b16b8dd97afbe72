//go:build cudaemu || cuda

package gpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend/backendtest"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
)

// openTest opens the GPU backend (the emulator under cudaemu), skipping
// the test where none is available.
func openTest(t *testing.T) *Backend {
	t.Helper()
	be, err := Open(context.Background(), Options{})
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no GPU backend: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := be.(*Device)
	t.Cleanup(d.Close)
	return d.Backend()
}

// put uploads v.
func put(t *testing.T, b *Backend, v []float32) *tensor {
	t.Helper()
	x, err := b.UploadF32(append([]float32(nil), v...))
	if err != nil {
		t.Fatal(err)
	}
	return dev(x)
}

// get downloads the first n values of x.
func get(t *testing.T, b *Backend, x *tensor, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := b.Download(out, x, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

func randVec(rng *rand.Rand, n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * std)
	}
	return v
}

// Tolerances of the conformance suite (backendtest.Options.OpTol, error
// relative to the sum of the magnitudes of an op's terms).
const (
	// opTolFP32 is the CPU's: float32 products and sums. Every op but the
	// tensor-core GEMM meets it (the GEMV and the fp32 GEMM included).
	opTolFP32 = 2e-6
	// opTolGEMM covers the tensor-core GEMM, which RunOps reaches with 17
	// activation rows: the activations are rounded to bf16 for BF16
	// weights (unit roundoff 2^-8 = 3.9e-3 per term, the bound), to fp16
	// (2^-11) for F16 and Q8_0 weights (whose dequantized values are
	// rounded to fp16 too), and summed in fp32.
	opTolGEMM = 4e-3
)

// TestConformanceOps runs the conformance suite's dense ops as MatMul
// chooses its paths (the suite's 17-row products run the tensor-core
// GEMM, so the tolerance is the GEMM's), then with every product on the
// GEMV at the CPU's tolerance, which checks the other ops tightly too.
func TestConformanceOps(t *testing.T) {
	b := openTest(t)
	t.Run("auto", func(t *testing.T) {
		backendtest.RunOps(t, b, backendtest.Options{OpTol: opTolGEMM})
	})
	t.Run("gemv", func(t *testing.T) {
		defer func(n int) { b.dense.gemmMinNT = n }(b.dense.gemmMinNT)
		b.dense.gemmMinNT = math.MaxInt
		backendtest.RunOps(t, b, backendtest.Options{OpTol: opTolFP32})
	})
}

// TestRoPEAgainstCPU checks RoPEAngles and RoPE against the CPU backend
// on partial rotary dims, both pairings and many positions: angles within
// one float32 ulp (CUDA's and Go's double sin/cos may round a value near
// a float boundary differently), rotations within 2 ulp of |x|.
func TestRoPEAgainstCPU(t *testing.T) {
	b := openTest(t)
	c := cpu.New(1)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name                string
		nt, heads, dim, rot int
		neox                bool
	}{
		{"normal/full", 7, 3, 16, 16, false},
		{"neox/full", 7, 3, 16, 16, true},
		{"normal/partial", 70, 2, 80, 32, false},
		{"neox/partial", 70, 2, 80, 32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := make([]float64, tc.rot/2)
			for i := range inv {
				inv[i] = math.Pow(500000, -float64(2*i)/float64(tc.rot))
			}
			pos := make([]int32, tc.nt)
			for i := range pos {
				pos[i] = int32(rng.IntN(200000))
			}
			pos[0] = 0
			ga := dev(b.Alloc(tc.nt * tc.rot))
			b.RoPEAngles(ga, pos, inv)
			ca := c.Alloc(tc.nt * tc.rot)
			c.RoPEAngles(ca, pos, inv)
			got, want := get(t, b, ga, tc.nt*tc.rot), c.Host(ca)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > ulp32(want[i]) {
					t.Fatalf("RoPEAngles value %d = %v, CPU %v", i, got[i], want[i])
				}
			}
			x := randVec(rng, tc.nt*tc.heads*tc.dim, 1)
			gx := put(t, b, x)
			b.RoPE(gx, tc.nt, tc.heads, tc.dim, tc.rot, ga, tc.neox)
			cx := cpu.Wrap(append([]float32(nil), x...))
			c.RoPE(cx, tc.nt, tc.heads, tc.dim, tc.rot, ca, tc.neox)
			got, want = get(t, b, gx, len(x)), c.Host(cx)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 4*ulp32(4) {
					t.Fatalf("RoPE value %d = %v, CPU %v", i, got[i], want[i])
				}
			}
		})
	}
}

// ulp32 is the spacing of float32 values at |v|.
func ulp32(v float32) float64 {
	a := math.Abs(float64(v))
	return float64(math.Nextafter32(float32(a), math.MaxFloat32)) - a
}

// TestScratchReuse runs ops that upload host inputs with growing and
// shrinking sizes, interleaved, so that each reads its own upload after
// the scratch buffers have been reused and reallocated.
func TestScratchReuse(t *testing.T) {
	b := openTest(t)
	const width = 5
	rng := rand.New(rand.NewPCG(4, 4))
	src := randVec(rng, 1000*width, 1)
	s := put(t, b, src)
	for _, n := range []int{1, 3, 200, 2, 999, 7, 1000} {
		rows := make([]int32, n)
		for i := range rows {
			rows[i] = int32(rng.IntN(1000))
		}
		d := dev(b.Alloc(n * width))
		b.Gather(d, s, rows, width)
		// A second gather of other rows, issued before the first is read.
		rows2 := make([]int32, n/2+1)
		for i := range rows2 {
			rows2[i] = int32(rng.IntN(1000))
		}
		d2 := dev(b.Alloc(len(rows2) * width))
		b.Gather(d2, s, rows2, width)
		for k, tc := range []struct {
			d    *tensor
			rows []int32
		}{{d, rows}, {d2, rows2}} {
			got := get(t, b, tc.d, len(tc.rows)*width)
			for i, r := range tc.rows {
				for j := 0; j < width; j++ {
					if got[i*width+j] != src[int(r)*width+j] {
						t.Fatalf("n=%d gather %d: row %d value %d = %v, want %v", n, k, i, j, got[i*width+j], src[int(r)*width+j])
					}
				}
			}
		}
		b.Free(d)
		b.Free(d2)
	}
}

// TestElementwiseGuards checks that the element-wise ops touch exactly
// the values they are asked to: sentinels after n survive.
func TestElementwiseGuards(t *testing.T) {
	b := openTest(t)
	const n, guard = 1037, 64
	rng := rand.New(rand.NewPCG(9, 9))
	sentinel := float32(-12345)
	mk := func() (*tensor, []float32) {
		v := randVec(rng, n+guard, 1)
		for i := n; i < len(v); i++ {
			v[i] = sentinel
		}
		return put(t, b, v), v
	}
	checkGuard := func(name string, x *tensor) {
		t.Helper()
		got := get(t, b, x, n+guard)
		for i := n; i < n+guard; i++ {
			if got[i] != sentinel {
				t.Fatalf("%s wrote value %d past n = %d: %v", name, i, n, got[i])
			}
		}
	}
	d, _ := mk()
	s, sv := mk()
	b.Add(d, s, n)
	checkGuard("Add", d)
	b.SwiGLU(d, s, n)
	checkGuard("SwiGLU", d)
	b.Copy(d, s, n)
	checkGuard("Copy", d)
	got := get(t, b, d, n)
	for i := range got {
		if got[i] != sv[i] {
			t.Fatalf("Copy value %d = %v, want %v", i, got[i], sv[i])
		}
	}
	bias := put(t, b, randVec(rng, 61, 1))
	b.AddBias(d, 17, bias) // 17·61 = 1037
	checkGuard("AddBias", d)
	w := put(t, b, randVec(rng, 61, 1))
	b.RMSNorm(d, d, 17, w, 1e-6)
	checkGuard("RMSNorm", d)
}

// TestIndexPanics checks that out-of-range ids and rows panic on the host
// (a kernel would read out of bounds) instead of launching.
func TestIndexPanics(t *testing.T) {
	b := openTest(t)
	src := put(t, b, make([]float32, 20))
	dst := dev(b.Alloc(25))
	for _, rows := range [][]int32{{4}, {-1}, {0, 1, 2, 3, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Gather(rows %v of 4) did not panic", rows)
				}
			}()
			b.Gather(dst, src, rows, 5)
		}()
	}
	if err := b.Download(make([]float32, 1), dst, 0); err != nil {
		t.Fatalf("Download after the panics: %v", err)
	}
}
