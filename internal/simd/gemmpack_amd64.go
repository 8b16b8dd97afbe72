//go:build amd64 && gc && !purego

package simd

import (
	"math"
	"sync"
)

// The packed prefill path of MatMulF16, MatMulBF16 and MatMulQ80: with at
// least MatMulPackTokensF16() (F16, BF16) or MatMulPackTokensQ80() token rows,
// the weights are taken 16 rows by packKC columns at a time, widened to
// float32 and transposed into a panel (wp[16k+j] = row j's column k), and
// every block of up to 6 token rows meets the panel in an outer-product
// micro-kernel (gemmP<M>x16AVX2): 12 accumulators of 8 rows, each fed by a
// broadcast of one token's x and a load of the panel, so no horizontal sums
// and no weight conversion in the inner loop; each weight is converted once per call instead of once per
// 4 tokens. Each output is then Σ over the columns in order, one fused
// multiply-add a column, in blocks of packKC columns added to dst: the
// result of a token row does not depend on the other token rows, nor on
// how the rows are split, as long as the splits are multiples of 16 rows.
//
// With AVX-512 the same panels meet blocks of up to 12 token rows, two
// panels (32 weight rows) at a time (gemmP<M>x32AVX512, the last odd panel
// gemmP<M>x16AVX512): every output takes the same fused multiply-adds in the
// same order as with the AVX2 kernels, so the results are the same bits.
// The Zen 4 choice takes them in blocks of 6 token rows (gemm512Tokens).
//
// F32 weights keep the 4×3 path: internal/train's recorded trajectories
// depend on its arithmetic.

// packKC is the columns of a panel: 16 rows × 256 × 4 bytes = 16 KiB, in L1
// beside the 6 token rows' 6 KiB.
const packKC = 256

// packed reports whether matMul takes the packed path for nt token rows.
func (k *mmKernels[W]) packed(nt int) bool {
	switch {
	case k.q80:
		return nt >= packTokens(true, false)
	case k.elemBytes == 2:
		return nt >= packTokens(false, k.bf16)
	}
	return false // F32
}

// matMulPacked computes rows [r0, r0+16⌊(r1-r0)/16⌋) of the product, all
// columns, and returns where it stopped; the caller computes the rest.
//
// Blocking: the rows go packChunk at a time; for each block of packKC
// columns, the chunk's panels are packed (packChunk × packKC float32s,
// 128 KiB, in L2), then every block of 6 token rows (6 KiB of x, in L1)
// meets each panel in turn.
func matMulPacked[W mmWeight](k *mmKernels[W], dst []float32, ldd int, x []float32, nt, cols int, w []W, r0, r1 int) int {
	var tmp [16 * packKC]float32
	buf := packBufs.Get().(*[packChunk * packKC]float32)
	defer packBufs.Put(buf)
	wp := buf[:]
	rowLen := k.rowLen(cols)
	n8 := cols &^ 7
	end := r0 + (r1-r0)/16*16
	for rc := r0; rc < end; rc += packChunk {
		re := min(rc+packChunk, end)
		for c0 := 0; c0 < n8; c0 += packKC {
			kn := min(packKC, n8-c0)
			for p := rc; p < re; p += 16 {
				k.packPanel(wp[(p-rc)*kn:], tmp[:], w, p, rowLen, c0, kn)
			}
			gemmPanels(dst, ldd, x, nt, cols, c0, wp, kn, re-rc, rc)
		}
		if n8 < cols {
			for t := 0; t < nt; t++ {
				xt := x[t*cols+n8 : (t+1)*cols]
				for j := rc; j < re; j++ {
					dst[t*ldd+j] += k.tail(w[j*rowLen+n8:(j+1)*rowLen], xt)
				}
			}
		}
	}
	return end
}

// The token rows from which the packing pays for itself, measured
// interleaved against the 4×3 path on one core (BenchmarkMatMulPacked,
// 2048×2048 to 8192×2048 weights). With the AVX2 micro-kernels, on a Zen 3
// EPYC: F16 packed over 4×3 0.6× at 32 token rows, 0.8× at 64, 0.9× at
// 128, 1.15× at 256 and 512; Q8_0, whose 4×3 kernel widens the codes for
// every 4 tokens, 0.9× at 32, 1.1–1.4× at 64, 1.65× at 512. With the
// AVX-512 ones (12 token rows × 32 weight rows), on a Xeon with AVX-512
// FP16 and on a Zen 5 EPYC: F16 0.63/0.70–0.81× at 8 tokens, 0.89/0.90–1.07×
// at 16, 1.21/1.02–1.04× at 32, 1.57× (Xeon) at 64; BF16 1.07/1.10–1.19× at
// 32; Q8_0 1.07/0.98–1.29× at 16, 1.66/1.35–1.49× at 32.
//
// On an AMD Zen 4 (the avx512-zen4 choice) the AVX-512 micro-kernels in
// blocks of 12 token rows ran 0.95–0.98× the AVX2 ones from 64 token rows
// (BenchmarkMatMulPacked, one core, idle: F16 at 512 tokens 97.9 against
// 102.6 GFLOP/s, Q8_0 99.0 against 103.5); in blocks of 6 they run
// 1.03–1.04× (gemm512Tokens). Its F16 4×3 path, about 100 GFLOP/s from 32 token rows
// on, matched or beat that packing up to 512 (103 against 95 GFLOP/s at 128
// tokens; in the 1B model's prefill of 128 tokens 1.05–1.14×); with the
// 6-row blocks and the panels filled straight from the weight rows
// (packPanel) the packing runs 0.99–1.04× the 4×3 path at 128 F16 token
// rows and 1.04–1.06× at 256, bfloat16 1.01–1.13× at 64 (its 4×3 path
// runs about 90 GFLOP/s), so the Zen 4 choice packs binary16 weights from
// packTokensF16Zen4 on and bfloat16 from packTokensBF16Zen4.
// That needs a token's bits not to depend on how many tokens share the
// call, which kvq eval's loglikelihoods rely on (a prompt's tokens get the
// same bits in a call of the context alone and one of context and
// continuation): below the threshold every token row of a call of two or
// more goes through the gemm kernels (matMul's evenGroups); only a call of
// one token row takes the dot product's bits. (A first try at 512, when the
// 4×3 gemm took whole groups of 4 and the dots the rest, failed that test.)
const (
	packTokensF16AVX2  = 256
	packTokensQ80AVX2  = 64
	packTokensAVX512   = 32
	packTokensF16Zen4  = 256
	packTokensBF16Zen4 = 64
	packTokensUnforced = -1
)

// packForce, unless packTokensUnforced, replaces the thresholds, so that
// BenchmarkMatMulPacked can force either path (0: packed, math.MaxInt: 4×3).
var packForce = packTokensUnforced

// packTokens returns the packed path's threshold for the kernels selected
// now (math.MaxInt with the pure-Go twins).
func packTokens(q80, bf16 bool) int {
	switch {
	case packForce != packTokensUnforced:
		return packForce
	case !useAsm:
		return math.MaxInt
	case half512Enabled() && bf16:
		return packTokensBF16Zen4
	case half512Enabled() && !q80:
		return packTokensF16Zen4
	case useAVX512:
		return packTokensAVX512
	case q80:
		return packTokensQ80AVX2
	}
	return packTokensF16AVX2
}

// gemmPanels multiplies the nr packed weight rows in wp (panels of 16
// rows × kn columns, from column c0; nr a multiple of 16) with the nt token
// rows of x, into dst's columns from p0, adding to them unless c0 is 0:
// with AVX-512 two panels (32 weight rows) at a time, in blocks of
// gemm512Tokens() token rows (gemmP<M>x32AVX512); otherwise one panel and
// up to 6 token rows (gemmP<M>x16AVX2). Either way the same bits.
func gemmPanels(dst []float32, ldd int, x []float32, nt, cols, c0 int, wp []float32, kn, nr, p0 int) {
	acc := c0 > 0
	mt := 6
	if useAVX512 {
		mt = gemm512Tokens()
	}
	for t := 0; t < nt; t += mt {
		m := min(mt, nt-t)
		if useAVX512 {
			for p := 0; p < nr; p += 32 {
				gemmP512(m, nr-p >= 32, acc, &dst[t*ldd+p0+p], ldd, &x[t*cols+c0], cols, &wp[p*kn], kn)
			}
		} else {
			for p := 0; p < nr; p += 16 {
				gemmP(m, acc, &dst[t*ldd+p0+p], ldd, &x[t*cols+c0], cols, &wp[p*kn], kn)
			}
		}
	}
}

// gemm512Tokens is the token rows of an AVX-512 micro-kernel's block: 12
// (24 accumulators, 14 loads to 24 fused multiply-adds a column), but 6 on
// the Zen 4 choice. A Zen 4 core takes each 512-bit operation in two
// passes through its 256-bit units; there the 6-row kernels (12
// accumulators) ran 1.03–1.04× the AVX2 6×16 ones and the 12-row kernels
// 0.95× (BenchmarkMatMulPacked, one core: F16 at 512 tokens 108.0–108.4
// against 104.2–104.4 GFLOP/s; in a loop over one panel in L1, 6 rows 116
// and 12 rows 106 GFLOP/s, the AVX2 kernel 110–112, of a peak of 117 at
// 3.66 GHz).
func gemm512Tokens() int {
	if half512Enabled() {
		return 6
	}
	return 12
}

// packChunk is the weight rows packed at a time (a multiple of 16).
const packChunk = MatMulPackChunkRows

// packBufs holds the packed panels of a chunk (128 KiB: too much for a
// goroutine stack).
var packBufs = sync.Pool{New: func() any { return new([packChunk * packKC]float32) }}

// packPanel fills wp with the panel of the 16 weight rows from row p,
// columns [c0, c0+kn) (wp[16k+j] = row p+j's column c0+k, in float32):
// binary16 and bfloat16 rows straight from w, widened as they are
// transposed (transpose8F16AVX2, transpose8BF16AVX2: one pass instead of a
// widening into tmp and a transpose of it; the 1B model's 512-token F16
// prefill 0.98–1.14×, median 1.025, BenchmarkMatMulPacked +1–4%); Q8_0
// rows widened into tmp (16 × kn float32s) first. The same float32 values
// either way: the widening is exact.
func (k *mmKernels[W]) packPanel(wp, tmp []float32, w []W, p, rowLen, c0, kn int) {
	if u, ok := any(w).([]uint16); ok {
		src := &u[p*rowLen+c0]
		if k.bf16 {
			transpose8BF16AVX2(&wp[0], 16, src, rowLen, 16, kn)
		} else {
			transpose8F16AVX2(&wp[0], 16, src, rowLen, 16, kn)
		}
		return
	}
	for j := 0; j < 16; j++ {
		row := w[(p+j)*rowLen:]
		k.widen(tmp[j*kn:(j+1)*kn], row[k.rowLen(c0):k.rowLen(c0+kn)])
	}
	transpose8F32AVX2(&wp[0], 16, &tmp[0], kn, 16, kn)
}

// widen sets dst to the float32 values of the weights w (len(dst) of them,
// a multiple of 8; of 32 for Q8_0).
func (k *mmKernels[W]) widen(dst []float32, w []W) {
	switch w := any(w).(type) {
	case []uint16:
		switch {
		case useAVX512 && k.bf16:
			widenBF16AVX512(dst, w)
		case useAVX512:
			widenF16AVX512(dst, w)
		case k.bf16:
			widenBF16AVX2(dst, w)
		default:
			widenF16AVX2(dst, w)
		}
	case []byte:
		q80ToF32(dst, w)
	default:
		panic("simd: unreachable")
	}
}

// gemmP runs the packed micro-kernel for m ≤ 6 token rows.
func gemmP(m int, acc bool, dst *float32, ldd int, x *float32, ldx int, wp *float32, kn int) {
	switch {
	case acc && m == 6:
		gemmP6x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	case m == 6:
		gemmP6x16AVX2(dst, ldd, x, ldx, wp, kn)
	case acc && m == 5:
		gemmP5x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	case m == 5:
		gemmP5x16AVX2(dst, ldd, x, ldx, wp, kn)
	case acc && m == 4:
		gemmP4x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	case m == 4:
		gemmP4x16AVX2(dst, ldd, x, ldx, wp, kn)
	case acc && m == 3:
		gemmP3x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	case m == 3:
		gemmP3x16AVX2(dst, ldd, x, ldx, wp, kn)
	case acc && m == 2:
		gemmP2x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	case m == 2:
		gemmP2x16AVX2(dst, ldd, x, ldx, wp, kn)
	case acc:
		gemmP1x16AccAVX2(dst, ldd, x, ldx, wp, kn)
	default:
		gemmP1x16AVX2(dst, ldd, x, ldx, wp, kn)
	}
}

// gemmP512 runs the AVX-512 micro-kernel for m ≤ 12 token rows over two
// panels (wide) or one. It is a switch, not a table of function values:
// pointers passed through a function value escape, and the callers' stack
// buffers would move to the heap.
func gemmP512(m int, wide, acc bool, dst *float32, ldd int, x *float32, ldx int, wp *float32, kn int) {
	switch m {
	case 12:
		switch {
		case wide && acc:
			gemmP12x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP12x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP12x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP12x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 11:
		switch {
		case wide && acc:
			gemmP11x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP11x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP11x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP11x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 10:
		switch {
		case wide && acc:
			gemmP10x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP10x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP10x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP10x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 9:
		switch {
		case wide && acc:
			gemmP9x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP9x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP9x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP9x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 8:
		switch {
		case wide && acc:
			gemmP8x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP8x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP8x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP8x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 7:
		switch {
		case wide && acc:
			gemmP7x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP7x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP7x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP7x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 6:
		switch {
		case wide && acc:
			gemmP6x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP6x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP6x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP6x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 5:
		switch {
		case wide && acc:
			gemmP5x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP5x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP5x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP5x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 4:
		switch {
		case wide && acc:
			gemmP4x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP4x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP4x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP4x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 3:
		switch {
		case wide && acc:
			gemmP3x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP3x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP3x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP3x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	case 2:
		switch {
		case wide && acc:
			gemmP2x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP2x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP2x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP2x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	default:
		switch {
		case wide && acc:
			gemmP1x32AccAVX512(dst, ldd, x, ldx, wp, kn)
		case wide:
			gemmP1x32AVX512(dst, ldd, x, ldx, wp, kn)
		case acc:
			gemmP1x16AccAVX512(dst, ldd, x, ldx, wp, kn)
		default:
			gemmP1x16AVX512(dst, ldd, x, ldx, wp, kn)
		}
	}
}
