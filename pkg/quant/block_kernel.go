package quant

import (
	"sync"
	"unsafe"

	"github.com/kvqlabs/kvq/internal/simd"
)

// Attention kernels shared by the fp8 and the llama.cpp block formats.
//
// Scores and Accumulate decode a chunk of at most kernelFloats values (a few
// rows) into a buffer with internal/simd's decoders, then run
// simd.ScoresF32 / AccumulateF32 on the chunk: those keep their partial sums
// in registers over all its rows, so each decoded value is loaded once for
// all nq queries of the KV head, and an accumulator is read and written once
// per chunk rather than once per row. The dequantized cache is never
// materialized. The chunk buffers come from a pool: a stack array would be
// zeroed on every call, which costs more than the pool for the 16-row tiles
// kvcache hands over.
//
// The block formats decode in their natural order, except iq4_nl, whose
// levels are repacked two per table lookup (see iq4nlCodec). fp8 rows are
// turned into IEEE halves by SWAR bit tricks, eight codes per uint64, and
// widened with simd.F16ToF32; the cheap tricks produce the eight codes of a
// word in swarOrder (0, 2, 4, 6, 1, 3, 5, 7), so fp8 codecs work in that
// permuted basis. Both implement Rotator with Π the permutation: kvcache
// permutes each query and un-permutes each accumulator once per attention
// step, and their plain Scores and Accumulate do it per call.

// kernelFloats is the size of a decoded chunk: 8 KiB, well inside L1.
const kernelFloats = 2048

// kernelScratch is the working memory of one kernel call.
type kernelScratch struct {
	f  [kernelFloats]float32                 // decoded rows
	h  [kernelFloats / 4]uint64              // fp8 rows as halves
	w  [kernelWeights]float32                // scaled weights
	q8 [kernelFloats / ggmlBlock * 34]byte   // rows repacked as q8_0 blocks
	u  [kernelFloats]byte                    // unpacked byte codes
	sb [2 * kernelFloats / ggmlBlock]float32 // block scales and biases
	hb [2 * kernelFloats / ggmlBlock]uint16  // their fp16 bits
}

// kernelWeights bounds nq × rows per chunk for the fp8 weight scaling.
const kernelWeights = 512

var kernelPool = sync.Pool{New: func() any { return new(kernelScratch) }}

func getScratch() *kernelScratch  { return kernelPool.Get().(*kernelScratch) }
func putScratch(s *kernelScratch) { kernelPool.Put(s) }

// rows returns the buffer for decoded rows of dim values and how many rows it
// holds: the scratch buffer when a row fits, else a heap row (head sizes over
// kernelFloats, which no model has).
func (s *kernelScratch) rows(dim int) ([]float32, int) {
	if dim <= len(s.f) {
		return s.f[:], len(s.f) / dim
	}
	return make([]float32, dim), 1
}

// scoresF32 is simd.ScoresF32, also for overlapping destinations (ldd < n).
func scoresF32(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
	if nq <= 1 || ldd >= n {
		simd.ScoresF32(dst, ldd, q, nq, dim, rows, n)
		return
	}
	for i := 0; i < nq; i++ {
		simd.ScoresF32(dst[i*ldd:], ldd, q[i*dim:(i+1)*dim], 1, dim, rows, n)
	}
}

// accumulateF32 is simd.AccumulateF32, also for overlapping weight rows.
func accumulateF32(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
	if nq <= 1 || ldw >= n {
		simd.AccumulateF32(acc, w, ldw, nq, dim, rows, n)
		return
	}
	for i := 0; i < nq; i++ {
		simd.AccumulateF32(acc[i*dim:(i+1)*dim], w[i*ldw:], ldw, 1, dim, rows, n)
	}
}

// halves views u as IEEE half bits, four per word, lane 0 first. It needs a
// little-endian host; the fp8 codecs use their table path otherwise.
func halves(u []uint64) []uint16 {
	if len(u) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&u[0])), 4*len(u))
}

// permute8 sets dst[8g+p] = src[8g+swarOrder[p]] (len a multiple of 8).
func permute8(dst, src []float32) {
	dst = dst[:len(src)]
	for i := 0; i+8 <= len(src); i += 8 {
		s := (*[8]float32)(src[i : i+8])
		d := (*[8]float32)(dst[i : i+8])
		d[0], d[1], d[2], d[3] = s[0], s[2], s[4], s[6]
		d[4], d[5], d[6], d[7] = s[1], s[3], s[5], s[7]
	}
}

// unpermuteAdd8 adds the permuted src back into natural order:
// dst[8g+swarOrder[p]] += src[8g+p].
func unpermuteAdd8(dst, src []float32) {
	dst = dst[:len(src)]
	for i := 0; i+8 <= len(src); i += 8 {
		s := (*[8]float32)(src[i : i+8])
		d := (*[8]float32)(dst[i : i+8])
		d[0] += s[0]
		d[2] += s[1]
		d[4] += s[2]
		d[6] += s[3]
		d[1] += s[4]
		d[3] += s[5]
		d[5] += s[6]
		d[7] += s[7]
	}
}
