// Package backendtest is the conformance suite every backend.Backend must
// pass: each dense op against a float64 reference, and, for every cache
// format the backend supports, the KV writes and attention of a paged
// cache against float64 attention on the rows the cache decodes (tight)
// and on the rows that were put (within a stated per-format bound); and
// (RunRegistration) that a backend's Registration agrees with the backend
// it opens.
//
// The CPU backend runs it in its tests; the CUDA backend runs it under the
// cuda build tag on a GPU and under cudaemu on the CPU emulator.
package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Options tune Run.
type Options struct {
	// Formats are the cache formats to test (default: every preset of
	// quant.Formats() the backend supports).
	Formats []string
	// Dims are the head sizes of the KV tests (default 64 and 128).
	Dims []int
	// OpTol is the largest allowed error of a dense op, relative to the
	// sum of the magnitudes of its terms (default 2e-6: float32
	// accumulation; a device with other summation orders may need more).
	OpTol float64
}

func (o *Options) defaults() {
	if len(o.Dims) == 0 {
		o.Dims = []int{64, 128}
	}
	if o.OpTol == 0 {
		o.OpTol = 2e-6
	}
}

// Run runs the whole suite on be.
func Run(t *testing.T, be backend.Backend, opts Options) {
	opts.defaults()
	t.Run("ops", func(t *testing.T) { RunOps(t, be, opts) })
	t.Run("kv", func(t *testing.T) { RunKV(t, be, opts) })
	t.Run("moe", func(t *testing.T) { RunMoE(t, be, opts) })
	t.Run("softcap", func(t *testing.T) { RunSoftcap(t, be, opts) })
}

// upload puts host values on the backend.
func upload(t *testing.T, be backend.Backend, v []float32) backend.Tensor {
	t.Helper()
	x, err := be.UploadF32(append([]float32(nil), v...))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// download reads n values of x.
func download(t *testing.T, be backend.Backend, x backend.Tensor, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := be.Download(out, x, 0); err != nil {
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

// check compares got with want within tol·mag[i] + tiny, naming the op.
func check(t *testing.T, op string, got []float32, want, mag []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*mag[i]+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: value %d = %v, float64 reference %v (diff %.3g > %.3g)", op, i, got[i], want[i], d, tol*mag[i])
		}
	}
}

// dequant returns the values of weight w as float64, exactly.
func dequant(w *tensor.Weight) []float64 {
	n := w.Rows * w.Cols
	out := make([]float64, n)
	switch w.DType {
	case tensor.F32:
		for i, v := range w.F32 {
			out[i] = float64(v)
		}
	case tensor.F16:
		for i, v := range w.U16 {
			out[i] = float64(simd.F16ToF32Scalar(v))
		}
	case tensor.BF16:
		for i, v := range w.U16 {
			out[i] = float64(simd.BF16ToF32Scalar(v))
		}
	case tensor.Q80:
		for b := 0; b < n/tensor.Q80BlockSize; b++ {
			blk := w.Raw[b*tensor.Q80BlockBytes:]
			d := float64(simd.F16ToF32Scalar(uint16(blk[0]) | uint16(blk[1])<<8))
			for i := 0; i < tensor.Q80BlockSize; i++ {
				out[b*tensor.Q80BlockSize+i] = d * float64(int8(blk[2+i]))
			}
		}
	}
	return out
}

// RunOps checks every dense op against float64 references on odd sizes.
func RunOps(t *testing.T, be backend.Backend, opts Options) {
	opts.defaults()
	rng := rand.New(rand.NewPCG(3, 5))
	tol := opts.OpTol
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q80} {
		for _, sh := range [][3]int{{1, 7, 32}, {3, 33, 64}, {17, 130, 96}, {5, 64, 256}} {
			nt, rows, cols := sh[0], sh[1], sh[2]
			t.Run(fmt.Sprintf("MatMul/%v/%dx%dx%d", dt, nt, rows, cols), func(t *testing.T) {
				w := modeltest.WeightFromF32("w", dt, rows, cols, randVec(rng, rows*cols, 0.3))
				m, err := be.Upload(w)
				if err != nil {
					t.Fatal(err)
				}
				x := randVec(rng, nt*cols, 1)
				dst := be.Alloc(nt * rows)
				defer be.Free(dst)
				be.MatMul(dst, upload(t, be, x), nt, m)
				wv := dequant(w)
				want, mag := make([]float64, nt*rows), make([]float64, nt*rows)
				for i := 0; i < nt; i++ {
					for r := 0; r < rows; r++ {
						for c := 0; c < cols; c++ {
							p := float64(x[i*cols+c]) * wv[r*cols+c]
							want[i*rows+r] += p
							mag[i*rows+r] += math.Abs(p)
						}
					}
				}
				check(t, "MatMul", download(t, be, dst, nt*rows), want, mag, tol)
				// Embed: row ids of the same weight.
				ids := []int32{int32(rows - 1), 0, int32(rows / 2)}
				e := be.Alloc(len(ids) * cols)
				defer be.Free(e)
				be.Embed(e, m, ids)
				want, mag = make([]float64, len(ids)*cols), make([]float64, len(ids)*cols)
				for i, id := range ids {
					copy(want[i*cols:], wv[int(id)*cols:(int(id)+1)*cols])
				}
				check(t, "Embed", download(t, be, e, len(ids)*cols), want, mag, 0)
			})
		}
	}
	t.Run("RMSNorm", func(t *testing.T) {
		for _, sh := range [][2]int{{1, 8}, {5, 63}, {3, 256}} {
			nt, d := sh[0], sh[1]
			x, w := randVec(rng, nt*d, 2), randVec(rng, d, 1)
			xt, dst := upload(t, be, x), be.Alloc(nt*d)
			be.RMSNorm(dst, xt, nt, upload(t, be, w), 1e-5)
			want, mag := make([]float64, nt*d), make([]float64, nt*d)
			for i := 0; i < nt; i++ {
				var ss float64
				for _, v := range x[i*d : (i+1)*d] {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(d)+1e-5)
				for j := 0; j < d; j++ {
					want[i*d+j] = float64(x[i*d+j]) * inv * float64(w[j])
					mag[i*d+j] = math.Abs(want[i*d+j]) * float64(d)
				}
			}
			check(t, "RMSNorm", download(t, be, dst, nt*d), want, mag, tol)
			// In place, as the per-head q/k norms run.
			be.RMSNorm(xt, xt, nt, upload(t, be, w), 1e-5)
			check(t, "RMSNorm in place", download(t, be, xt, nt*d), want, mag, tol)
		}
	})
	t.Run("AddBias/Add/Copy/SwiGLU/Gather", func(t *testing.T) {
		const nt, d = 7, 37
		x, bias, y := randVec(rng, nt*d, 1), randVec(rng, d, 1), randVec(rng, nt*d, 1)
		zero := make([]float64, nt*d)
		xt := upload(t, be, x)
		be.AddBias(xt, nt, upload(t, be, bias))
		want := make([]float64, nt*d)
		for i := range want {
			want[i] = float64(x[i] + bias[i%d])
		}
		check(t, "AddBias", download(t, be, xt, nt*d), want, zero, 0)
		be.Add(xt, upload(t, be, y), nt*d)
		for i := range want {
			want[i] = float64(x[i] + bias[i%d] + y[i])
		}
		check(t, "Add", download(t, be, xt, nt*d), want, zero, 0)
		ct := be.Alloc(nt * d)
		be.Copy(ct, xt, nt*d)
		check(t, "Copy", download(t, be, ct, nt*d), want, zero, 0)
		g, u := randVec(rng, nt*d, 3), randVec(rng, nt*d, 1)
		gt := upload(t, be, g)
		be.SwiGLU(gt, upload(t, be, u), nt*d)
		mag := make([]float64, nt*d)
		for i := range want {
			x := float64(g[i])
			want[i] = x / (1 + math.Exp(-x)) * float64(u[i])
			mag[i] = math.Abs(want[i]) * 4
		}
		check(t, "SwiGLU", download(t, be, gt, nt*d), want, mag, tol)
		rows := []int32{6, 0, 3, 3}
		dt := be.Alloc(len(rows) * d)
		be.Gather(dt, upload(t, be, y), rows, d)
		want = want[:len(rows)*d]
		for i, r := range rows {
			for j := 0; j < d; j++ {
				want[i*d+j] = float64(y[int(r)*d+j])
			}
		}
		check(t, "Gather", download(t, be, dt, len(rows)*d), want, zero[:len(want)], 0)
	})
	t.Run("RoPE", func(t *testing.T) {
		for _, neox := range []bool{false, true} {
			for _, sh := range [][3]int{{3, 2, 8}, {5, 3, 64}} {
				nt, heads, dim := sh[0], sh[1], sh[2]
				rot := dim
				if dim > 8 {
					rot = dim / 2 // partial rotary
				}
				inv := make([]float64, rot/2)
				for i := range inv {
					inv[i] = math.Pow(10000, -float64(2*i)/float64(rot))
				}
				pos := []int32{0, 1, 17, 300, 4095}[:nt]
				ang := be.Alloc(nt * rot)
				be.RoPEAngles(ang, pos, inv)
				x := randVec(rng, nt*heads*dim, 1)
				xt := upload(t, be, x)
				be.RoPE(xt, nt, heads, dim, rot, ang, neox)
				want, mag := make([]float64, len(x)), make([]float64, len(x))
				for i := 0; i < nt; i++ {
					for h := 0; h < heads; h++ {
						v := x[(i*heads+h)*dim : (i*heads+h+1)*dim]
						out := want[(i*heads+h)*dim : (i*heads+h+1)*dim]
						for k := range v {
							out[k] = float64(v[k])
						}
						for k := 0; k < rot/2; k++ {
							a, b := k, k+rot/2
							if !neox {
								a, b = 2*k, 2*k+1
							}
							s, c := math.Sincos(float64(pos[i]) * inv[k])
							out[a] = float64(v[a])*c - float64(v[b])*s
							out[b] = float64(v[a])*s + float64(v[b])*c
						}
					}
				}
				for i := range mag {
					mag[i] = 4 // |x| ≲ 4: angles and products in float32
				}
				check(t, fmt.Sprintf("RoPE neox=%v %dx%dx%d", neox, nt, heads, dim), download(t, be, xt, len(x)), want, mag, 1e-6)
			}
		}
	})
}
