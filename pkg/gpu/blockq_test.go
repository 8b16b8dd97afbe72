//go:build cudaemu || cuda

package gpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

// blockDTypes are the GGML block types other than Q8_0 (kernels/blockq.cuh).
var blockDTypes = []kvqtensor.DType{
	kvqtensor.Q40, kvqtensor.Q41, kvqtensor.Q50, kvqtensor.Q51,
	kvqtensor.Q2K, kvqtensor.Q3K, kvqtensor.Q4K, kvqtensor.Q5K, kvqtensor.Q6K,
	kvqtensor.IQ4NL, kvqtensor.IQ4XS, kvqtensor.MXFP4,
}

// blockScaleFields are the byte offsets of each block type's fp16 scales
// (d, and dmin or m where the type has one).
var blockScaleFields = map[kvqtensor.DType][]int{
	kvqtensor.Q40: {0}, kvqtensor.Q41: {0, 2}, kvqtensor.Q50: {0}, kvqtensor.Q51: {0, 2},
	kvqtensor.Q2K: {80, 82}, kvqtensor.Q3K: {108}, kvqtensor.Q4K: {0, 2}, kvqtensor.Q5K: {0, 2},
	kvqtensor.Q6K: {208}, kvqtensor.IQ4NL: {0}, kvqtensor.IQ4XS: {0},
}

// randBlockWeight is a rows × cols weight of dtype dt made of random
// blocks: every code, scale and high-bit byte random, except that the
// fp16 scales are random in ±[0.002, 0.012) and MXFP4's E8M0 exponents in
// 118..131 (so that values stay finite and within fp16), with the first
// MXFP4 block's exponent 1 (the subnormal scale).
func randBlockWeight(rng *rand.Rand, dt kvqtensor.DType, rows, cols int) *kvqtensor.Weight {
	w := &kvqtensor.Weight{Name: "w", DType: dt, Rows: rows, Cols: cols, Raw: make([]byte, rows*dt.RowBytes(cols))}
	for i := range w.Raw {
		w.Raw[i] = byte(rng.Uint32())
	}
	_, bb := dt.Block()
	for o := 0; o < len(w.Raw); o += bb {
		if dt == kvqtensor.MXFP4 {
			w.Raw[o] = byte(118 + rng.IntN(14))
			continue
		}
		for _, f := range blockScaleFields[dt] {
			v := float32(0.002 + 0.01*rng.Float64())
			if rng.IntN(4) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(w.Raw[o+f:], simd.F32ToF16Scalar(v))
		}
	}
	if dt == kvqtensor.MXFP4 {
		w.Raw[0] = 1
	}
	return w
}

// newBlockCase is newMatMulCase for a random block weight.
func newBlockCase(rng *rand.Rand, dt kvqtensor.DType, nt, rows, cols int) *matMulCase {
	w := randBlockWeight(rng, dt, rows, cols)
	c := &matMulCase{w: w, nt: nt, x: randVec(rng, nt*cols, 1)}
	row := make([]float32, cols)
	c.want, c.mag = make([]float64, nt*rows), make([]float64, nt*rows)
	for r := 0; r < rows; r++ {
		cpu.Row(row, w, r)
		for t := 0; t < nt; t++ {
			var s, m float64
			for j, v := range row {
				p := float64(c.x[t*cols+j]) * float64(v)
				s += p
				m += max(p, -p)
			}
			c.want[t*rows+r], c.mag[t*rows+r] = s, m
		}
	}
	return c
}

// TestBlockEmbed checks the device's decoding of every block type bit for
// bit against the CPU's (pkg/gguf's, itself bit-exact with ggml's) through
// Embed, on random blocks.
func TestBlockEmbed(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(40, 3))
	for _, dt := range blockDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			qk, _ := dt.Block()
			rows, cols := 5, 2*qk
			w := randBlockWeight(rng, dt, rows, cols)
			m, err := b.Upload(w)
			if err != nil {
				t.Fatal(err)
			}
			ids := []int32{4, 0, 2, 1, 3}
			e := dev(b.Alloc(len(ids) * cols))
			defer b.Free(e)
			b.Embed(e, m, ids)
			got := get(t, b, e, len(ids)*cols)
			want := make([]float32, cols)
			for i, id := range ids {
				cpu.Row(want, w, int(id))
				for j, v := range want {
					if got[i*cols+j] != v {
						t.Fatalf("row %d value %d = %v, want %v (the CPU's)", id, j, got[i*cols+j], v)
					}
				}
			}
		})
	}
}

// TestBlockMatMul runs the block types' GEMV (1..8 activation rows and a
// batch of 11, two launches) and tensor-core GEMM (both tile heights) on
// random blocks against the float64 product of the CPU's decoded weights,
// the device's reference kernel and cpu.MatMul (the packed CPU product):
// the GEMV within 2e-6·Σ|x·w| (fp32 summation), the GEMM within
// 2·2^-11·Σ|x·w| + fp32 (activations and decoded weights rounded to fp16).
func TestBlockMatMul(t *testing.T) {
	b := openTest(t)
	rng := rand.New(rand.NewPCG(40, 4))
	for _, dt := range blockDTypes {
		qk, _ := dt.Block()
		cols := 512
		if qk == 32 {
			cols = 160
		}
		for _, nt := range []int{1, 2, 5, 8, 11} {
			t.Run(fmt.Sprintf("%v/gemv/nt=%d", dt, nt), func(t *testing.T) {
				newBlockCase(rng, dt, nt, 19, cols).check(t, b, []mmPath{pathGEMV}, nt == 5)
			})
		}
		t.Run(fmt.Sprintf("%v/gemm", dt), func(t *testing.T) {
			newBlockCase(rng, dt, 21, 133, cols).check(t, b, []mmPath{mmAuto, pathGEMM64, pathGEMM128}, false)
		})
	}
}

// TestBlockSupport checks that Upload and the Registration take every
// block type and still refuse a dtype kvq does not know.
func TestBlockSupport(t *testing.T) {
	for _, dt := range append([]kvqtensor.DType{kvqtensor.Q80}, blockDTypes...) {
		if err := supportsWeight(dt); err != nil {
			t.Errorf("supportsWeight(%v) = %v", dt, err)
		}
	}
	if err := supportsWeight(kvqtensor.MXFP4 + 1); err == nil {
		t.Errorf("supportsWeight(%d) accepted an unknown dtype", kvqtensor.MXFP4+1)
	}
}
