//go:build cudaemu || cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

var allDTypes = []kvqtensor.DType{kvqtensor.F32, kvqtensor.F16, kvqtensor.BF16, kvqtensor.Q80}

// gemmTol is the stated error bound of MatMul's GEMM for a weight dtype,
// relative to Σ|x·w| of each output: for the tensor-core kernels the unit
// roundoff of the activations' rounding (bf16 2^-8, fp16 2^-11), plus, for
// Q8_0, that of the dequantized weights' rounding to fp16, plus 2e-5 for
// the fp32 summation (whose rounding inside the mma is not specified to
// be round-to-nearest); for F32 weights (fp32 GEMM) the CPU's 2e-6.
//
// The other block types (blockq_test.go) are rounded to fp16 like Q8_0.
func gemmTol(dt kvqtensor.DType) float64 {
	if dt.Packed() {
		return 2*0x1p-11 + 2e-5
	}
	switch dt {
	case kvqtensor.F16:
		return 0x1p-11 + 2e-5
	case kvqtensor.BF16:
		return 0x1p-8 + 2e-5
	case kvqtensor.Q80:
		return 2*0x1p-11 + 2e-5
	}
	return opTolFP32
}

// mmPath is one way to run MatMul.
type mmPath struct {
	name      string
	gemmMinNT int // activation rows from which the GEMM runs
	tile      int // forced GEMM tile height, 0 for MatMul's choice
}

var (
	mmAuto      = mmPath{"auto", gemvMaxNT + 1, 0}
	pathGEMV    = mmPath{"gemv", math.MaxInt, 0}
	pathGEMM64  = mmPath{"gemm64", 1, 64}
	pathGEMM128 = mmPath{"gemm128", 1, 128}
)

// tol is the path's bound for dtype dt on nt activation rows.
func (p mmPath) tol(dt kvqtensor.DType, nt int) float64 {
	if nt >= p.gemmMinNT {
		return gemmTol(dt)
	}
	return opTolFP32
}

// matMulCase is a weight with activations and the float64 reference
// product with the magnitudes Σ|x·w| of its terms.
type matMulCase struct {
	w         *kvqtensor.Weight
	nt        int
	x         []float32
	want, mag []float64
}

func newMatMulCase(rng *rand.Rand, dt kvqtensor.DType, nt, rows, cols int) *matMulCase {
	w := modeltest.WeightFromF32("w", dt, rows, cols, randVec(rng, rows*cols, 0.3))
	c := &matMulCase{w: w, nt: nt, x: randVec(rng, nt*cols, 1)}
	wv := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		row := make([]float32, cols)
		cpu.Row(row, w, r)
		for j, v := range row {
			wv[r*cols+j] = float64(v)
		}
	}
	c.want, c.mag = make([]float64, nt*rows), make([]float64, nt*rows)
	for t := 0; t < nt; t++ {
		for r := 0; r < rows; r++ {
			var s, m float64
			for j := 0; j < cols; j++ {
				p := float64(c.x[t*cols+j]) * wv[r*cols+j]
				s += p
				m += math.Abs(p)
			}
			c.want[t*rows+r], c.mag[t*rows+r] = s, m
		}
	}
	return c
}

// compare fails unless got is within tol·mag of want (and not NaN).
func compareMM(t *testing.T, what string, got []float32, want []float64, mag []float64, tol float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if d > tol*mag[i]+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: value %d = %v, want %v (diff %.3g > %.3g = %.3g·%.3g)", what, i, got[i], want[i], d, tol*mag[i], tol, mag[i])
		}
	}
}

const guardValues = 37 // sentinels after every output, to catch overruns

// run computes c on path p (x misaligned by one float when misaligned)
// and checks the sentinels after the output.
func (c *matMulCase) run(t *testing.T, b *Backend, m backend.Matrix, p mmPath, misaligned bool) []float32 {
	t.Helper()
	defer func(n, tile int) { b.dense.gemmMinNT, b.dense.gemmTile = n, tile }(b.dense.gemmMinNT, b.dense.gemmTile)
	b.dense.gemmMinNT, b.dense.gemmTile = p.gemmMinNT, p.tile
	rows := c.w.Rows
	xs := c.x
	if misaligned {
		xs = append([]float32{0}, c.x...)
	}
	x := put(t, b, xs)
	defer b.Free(x)
	xv := x
	if misaligned {
		xv = &tensor{p: x.at(1), n: len(c.x)}
	}
	init := make([]float32, c.nt*rows+guardValues)
	for i := range init {
		init[i] = -777
	}
	dst := put(t, b, init)
	defer b.Free(dst)
	b.MatMul(dst, xv, c.nt, m)
	out := get(t, b, dst, len(init))
	for i := c.nt * rows; i < len(out); i++ {
		if out[i] != -777 {
			t.Fatalf("%s: MatMul wrote value %d past its %d outputs", p.name, i, c.nt*rows)
		}
	}
	return out[:c.nt*rows]
}

// check runs c on each path and compares it with the float64 reference,
// the device's reference kernel and the CPU backend's MatMul.
func (c *matMulCase) check(t *testing.T, b *Backend, paths []mmPath, misaligned bool) {
	t.Helper()
	m, err := b.Upload(c.w)
	if err != nil {
		t.Fatal(err)
	}
	n := c.nt * c.w.Rows
	// The reference kernel, itself checked against float64.
	x := put(t, b, c.x)
	ref := dev(b.Alloc(n))
	b.matMulRef(ref, x, c.nt, m)
	refv := get(t, b, ref, n)
	b.Free(ref)
	b.Free(x)
	compareMM(t, "reference kernel", refv, c.want, c.mag, opTolFP32)
	cpuv := make([]float32, n)
	cpu.MatMul(1, cpuv, c.x, c.nt, c.w)
	refAsF64 := make([]float64, n)
	cpuAsF64 := make([]float64, n)
	for i := range refv {
		refAsF64[i], cpuAsF64[i] = float64(refv[i]), float64(cpuv[i])
	}
	for _, p := range paths {
		got := c.run(t, b, m, p, misaligned)
		tol := p.tol(c.w.DType, c.nt)
		compareMM(t, p.name+" vs float64", got, c.want, c.mag, tol)
		compareMM(t, p.name+" vs reference kernel", got, refAsF64, c.mag, tol+opTolFP32)
		compareMM(t, p.name+" vs cpu.MatMul", got, cpuAsF64, c.mag, tol+opTolFP32)
	}
}

// TestMatMulPaths runs every MatMul path on every dtype over odd shapes:
// rows and activation rows that leave partial tiles and blocks, columns
// that are not multiples of the tiles' 32 or of the 16-byte chunks
// (rounded up to 32 for Q8_0), and activations that start off 16-byte
// alignment.
func TestMatMulPaths(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(7, 11))
	type shape struct{ nt, rows, cols int }
	for _, dt := range allDTypes {
		for _, sh := range []shape{{1, 37, 19}, {9, 5, 7}, {33, 130, 100}, {70, 129, 257}, {130, 260, 96}} {
			if dt == kvqtensor.Q80 {
				sh.cols = roundUp(sh.cols, 32)
			}
			paths := []mmPath{mmAuto, pathGEMM64, pathGEMM128}
			if sh.nt <= 33 {
				// The GEMV's many launches of 8 rows are slow on the
				// emulator (TestMatMulDecode covers it too).
				paths = append(paths, pathGEMV)
			}
			for _, mis := range []bool{false, true} {
				name := fmt.Sprintf("%v/%dx%dx%d", dt, sh.nt, sh.rows, sh.cols)
				if mis {
					name += "/misaligned"
				}
				t.Run(name, func(t *testing.T) {
					newMatMulCase(rng, dt, sh.nt, sh.rows, sh.cols).check(t, b, paths, mis)
				})
			}
		}
	}
}

// TestMatMulDecode runs the GEMV for every batch size it has a kernel for
// (1..8) and one that takes two launches.
func TestMatMulDecode(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(8, 1))
	for _, dt := range allDTypes {
		for nt := 1; nt <= gemvMaxNT+3; nt++ {
			if nt > gemvMaxNT && nt != gemvMaxNT+3 {
				continue
			}
			t.Run(fmt.Sprintf("%v/nt=%d", dt, nt), func(t *testing.T) {
				newMatMulCase(rng, dt, nt, 45, 320).check(t, b, []mmPath{pathGEMV}, false)
			})
		}
	}
}

// TestMatMulLarge runs MatMul's own choice on a prefill-sized product for
// every dtype (a few tiles of each kind and 16 K steps).
func TestMatMulLarge(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(5, 3))
	for _, dt := range allDTypes {
		for _, nt := range []int{100, 256} {
			t.Run(fmt.Sprintf("%v/%dx512x512", dt, nt), func(t *testing.T) {
				newMatMulCase(rng, dt, nt, 512, 512).check(t, b, []mmPath{mmAuto}, false)
			})
		}
	}
}

// TestUpload checks the layouts through Embed (every row, exactly as the
// CPU dequantizes it) and Upload's errors.
func TestUpload(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(2, 2))
	for _, dt := range allDTypes {
		for _, cols := range []int{32, 7, 100, 288} {
			if dt == kvqtensor.Q80 && cols%32 != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/cols=%d", dt, cols), func(t *testing.T) {
				const rows = 11
				w := modeltest.WeightFromF32("w", dt, rows, cols, randVec(rng, rows*cols, 2))
				m, err := b.Upload(w)
				if err != nil {
					t.Fatal(err)
				}
				if r, c := m.Dims(); r != rows || c != cols {
					t.Fatalf("Dims() = %d, %d, want %d, %d", r, c, rows, cols)
				}
				ids := []int32{10, 0, 5, 5, 3, 1, 2, 4, 6, 7, 8, 9}
				e := dev(b.Alloc(len(ids) * cols))
				b.Embed(e, m, ids)
				got := get(t, b, e, len(ids)*cols)
				want := make([]float32, cols)
				for i, id := range ids {
					cpu.Row(want, w, int(id))
					for j, v := range want {
						if got[i*cols+j] != v {
							t.Fatalf("Embed row %d (id %d) value %d = %v, want %v", i, id, j, got[i*cols+j], v)
						}
					}
				}
			})
		}
	}
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			w    *kvqtensor.Weight
			is   error
		}{
			{"dtype", &kvqtensor.Weight{Name: "w", DType: kvqtensor.DType(99), Rows: 1, Cols: 1}, backend.ErrUnsupported},
			{"short", &kvqtensor.Weight{Name: "w", DType: kvqtensor.F16, Rows: 2, Cols: 3, U16: make([]uint16, 5)}, kvqtensor.ErrShape},
			{"q8 cols", &kvqtensor.Weight{Name: "w", DType: kvqtensor.Q80, Rows: 1, Cols: 48, Raw: make([]byte, 51)}, kvqtensor.ErrShape},
			{"empty", &kvqtensor.Weight{Name: "w", DType: kvqtensor.F32}, kvqtensor.ErrShape},
		} {
			if _, err := b.Upload(tc.w); !errors.Is(err, tc.is) {
				t.Errorf("Upload(%s) = %v, want %v", tc.name, err, tc.is)
			}
		}
	})
}

// TestMatMulPanics checks that mismatched sizes panic before launching.
func TestMatMulPanics(t *testing.T) {
	b := openTest(t)
	w := modeltest.WeightFromF32("w", kvqtensor.F16, 4, 8, make([]float32, 32))
	m, err := b.Upload(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		dst, x, nt int
	}{{"dst", 7, 16, 2}, {"x", 8, 15, 2}, {"nt", 8, 16, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MatMul with short %s did not panic", tc.name)
				}
			}()
			b.MatMul(b.Alloc(tc.dst), b.Alloc(tc.x), tc.nt, m)
		}()
	}
	if err := b.Download(make([]float32, 1), b.Alloc(1), 0); err != nil {
		t.Fatalf("Download after the panics: %v", err)
	}
}

// TestMeasureBandwidth runs both probes on a small buffer (the figure
// means nothing on the emulator; on a GPU it should be most of the HBM's).
func TestMeasureBandwidth(t *testing.T) {
	b := openTest(t)
	r, err := b.MeasureBandwidth(1<<20+8, 2)
	if err != nil || !(r > 0) {
		t.Fatalf("MeasureBandwidth = %v, %v", r, err)
	}
	c, err := b.MeasureCopyBandwidth(1<<20, 2)
	if err != nil || !(c > 0) {
		t.Fatalf("MeasureCopyBandwidth = %v, %v", c, err)
	}
	t.Logf("read %.1f GB/s, copy %.1f GB/s (%s)", r, c, b.Info().Name)
	if _, err := b.MeasureBandwidth(0, 1); err == nil {
		t.Error("MeasureBandwidth(0, 1) succeeded")
	}
}
