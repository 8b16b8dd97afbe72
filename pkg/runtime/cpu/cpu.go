// Package cpu is the pure-Go (plus SIMD assembly) implementation of
// tensor.Backend. Matrix products are split by output rows across goroutines
// with a fixed partition, so results do not depend on the number of workers.
package cpu

import (
	"math"

	"github.com/kvqlabs/kvq/internal/par"
	"github.com/kvqlabs/kvq/internal/simd"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Backend runs compute on the CPU.
type Backend struct {
	workers par.Workers
}

var _ tensor.Backend = (*Backend)(nil)

// New returns a CPU backend using the given number of goroutines (0: all CPUs).
func New(workers int) *Backend { return &Backend{workers: par.Workers(workers)} }

// Workers is the backend's degree of parallelism.
func (b *Backend) Workers() par.Workers { return b.workers }

// Name implements tensor.Backend.
func (b *Backend) Name() string { return "cpu" }

// minRowWork is the smallest number of multiply-adds worth a goroutine.
const minRowWork = 1 << 15

// MatMul implements tensor.Backend.
func (b *Backend) MatMul(dst, x []float32, nt int, w *tensor.Weight) {
	rows, cols := w.Rows, w.Cols
	per := max(1, minRowWork/max(1, cols*nt))
	b.workers.For(rows, 4, per, func(lo, hi int) {
		switch w.DType {
		case tensor.F32:
			simd.MatMulF32(dst, rows, x, nt, cols, w.F32, lo, hi)
		case tensor.F16:
			simd.MatMulF16(dst, rows, x, nt, cols, w.U16, lo, hi)
		case tensor.BF16:
			simd.MatMulBF16(dst, rows, x, nt, cols, w.U16, lo, hi)
		case tensor.Q80:
			simd.MatMulQ80(dst, rows, x, nt, cols, w.Raw, lo, hi)
		default:
			panic("cpu: MatMul on unsupported dtype " + w.DType.String())
		}
	})
}

// RMSNorm implements tensor.Backend.
func (b *Backend) RMSNorm(dst, x []float32, nt int, weight []float32, eps float32) {
	d := len(weight)
	for t := 0; t < nt; t++ {
		xr := x[t*d : (t+1)*d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(d)+float64(eps)))
		dr := dst[t*d : (t+1)*d]
		for i, v := range xr {
			dr[i] = v * inv * weight[i]
		}
	}
}

// RoPE implements tensor.Backend.
func (b *Backend) RoPE(x []float32, nt, nHeads, headDim int, cos, sin []float32, neox bool) {
	half := len(cos) / nt
	for t := 0; t < nt; t++ {
		c := cos[t*half : (t+1)*half]
		s := sin[t*half : (t+1)*half]
		for h := 0; h < nHeads; h++ {
			RotateHead(x[(t*nHeads+h)*headDim:(t*nHeads+h+1)*headDim], c, s, neox)
		}
	}
}

// RotateHead applies the rotary embedding with the given cos/sin of each
// pair to one head vector v in place: pairs (i, i+len(c)) with neox,
// otherwise (2i, 2i+1).
func RotateHead(v, c, s []float32, neox bool) {
	if neox {
		simd.RotateNeoX(v[:2*len(c)], c, s)
		return
	}
	simd.RotatePairs(v[:2*len(c)], c, s)
}

// SwiGLU implements tensor.Backend.
func (b *Backend) SwiGLU(gate, up []float32) {
	for i, g := range gate {
		gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// Add implements tensor.Backend.
func (b *Backend) Add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

// Embed implements tensor.Backend.
func (b *Backend) Embed(dst []float32, w *tensor.Weight, ids []int) {
	d := w.Cols
	for t, id := range ids {
		Row(dst[t*d:(t+1)*d], w, id)
	}
}

// Row dequantizes row r of w into dst.
func Row(dst []float32, w *tensor.Weight, r int) {
	d := w.Cols
	switch w.DType {
	case tensor.F32:
		copy(dst, w.F32[r*d:(r+1)*d])
	case tensor.F16:
		simd.F16ToF32(dst, w.U16[r*d:(r+1)*d])
	case tensor.BF16:
		simd.BF16ToF32(dst, w.U16[r*d:(r+1)*d])
	case tensor.Q80:
		rb := w.DType.RowBytes(d)
		row := w.Raw[r*rb : (r+1)*rb]
		for blk := 0; blk < d/tensor.Q80BlockSize; blk++ {
			bb := row[blk*tensor.Q80BlockBytes:]
			scale := simd.F16ToF32Scalar(uint16(bb[0]) | uint16(bb[1])<<8)
			for i := 0; i < tensor.Q80BlockSize; i++ {
				dst[blk*tensor.Q80BlockSize+i] = scale * float32(int8(bb[2+i]))
			}
		}
	default:
		panic("cpu: Row on unsupported dtype " + w.DType.String())
	}
}
