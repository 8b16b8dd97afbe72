//go:build amd64 && gc && !purego

package simd

import "sync"

// The int8 tile GEMM behind MatMulQ80Q80 (kernels in _generate/q8gemm.go):
// the weight rows are packed tileChunkBytes of panels at a time (16 rows
// each with AVX-512 VNNI, 8 on AVX2, so that a chunk stays in L2), and
// every group of token rows (up to 4, on AVX2 2) meets every panel of the
// chunk. Rows past the last whole panel take DotQ80Q80Rows per token row;
// all give DotQ80Q80's bits.

// tileChunkBytes is about the bytes of panels the tile GEMMs pack at a
// time (tilePanels), so that a chunk stays in L2.
const tileChunkBytes = 1 << 19

// q8gKernels are one kernel set's panel packer and tiles.
type q8gKernels struct {
	rows, block int // rows of a panel, bytes of one block of one
	pack        func(dst []byte, w []byte, stride int, nb int)
	tiles       []func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int) // by token rows, 1..
	minTokens   int
}

// q8gVNNI and q8gAVX2 are the avx512 set's tiles with VNNI and the avx2
// set's (which the avx512 set without VNNI takes too).
var (
	q8gVNNI = q8gKernels{16, 576, q8gemmPackVNNI, []func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q8gemmTile1VNNI, q8gemmTile2VNNI, q8gemmTile3VNNI, q8gemmTile4VNNI,
	}, q8gMinTokens}
	q8gAVX2 = q8gKernels{8, 288, q8gemmPackAVX2, []func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q8gemmTile1AVX2, q8gemmTile2AVX2,
	}, q8gMinTokensAVX2}
)

type q8gScratch struct {
	panels []byte
	ac     []int32
	rows   []byte // a panel's rows widened to Q8_0 (q8gPanels' widen)
}

var q8gPool = sync.Pool{New: func() any { return new(q8gScratch) }}

// matMulWidenedQ80 runs MatMulQ80Q80 (t qdQ80) and its widening kin over
// rows of type t: whole panels through the tile GEMM (q4_0, q5_0 and
// iq4_nl with each panel's rows widened to Q8_0, widenQ80, before it packs
// them), the rows past the last whole panel, and fewer tokens, through the
// type's four-row dots.
func matMulWidenedQ80(t qdotType, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	if !useAsm {
		matMulWidenedGeneric(t, dst, ldd, q, nt, nb, w, r0, r1)
		return
	}
	k := &q8gAVX2
	if useAVX512 && useLegacyVNNI {
		k = &q8gVNNI
	}
	re := r0 + (r1-r0)/k.rows*k.rows
	if nt < k.minTokens || nb == 0 {
		re = r0
	}
	wb, qb := nb*qdotBlockBytes[t], nb*Q80BlockBytes
	if re > r0 {
		q8gPanels(k, dst, ldd, q, nt, nb, w, wb, widenQ80(t), r0, re)
	}
	for tk := 0; re < r1 && tk < nt; tk++ {
		dotQ80Rows(t, dst[tk*ldd+re:tk*ldd+r1], w[re*wb:r1*wb], q[tk*qb:(tk+1)*qb], nb)
	}
}

// q8gMinTokens is the fewest token rows that take the VNNI tile GEMM:
// packing the panels costs about what two token rows' dots do. Against
// DotQ80Q80Rows per token row (BenchmarkMatMulQ80Q80Few, Zen 4, weights
// from DRAM) it ran at 0.91× for 2 token rows, 1.23× for 3, 1.46× for 4,
// 2.2× for 8, 3.1× for 16.
const q8gMinTokens = 3

// q8gMinTokensAVX2 is q8gMinTokens for the AVX2 tiles: under ForceAVX2 on
// the Zen 4 they ran at 0.89× of DotQ80Q80Rows per token row for 3 token
// rows, 1.07× for 4, 1.29× for 8, 1.59× for 16.
const q8gMinTokensAVX2 = 4

// q8gPanels runs k's tile GEMM over rows [r0, r1), whole panels: weight
// rows of wb bytes, Q8_0 blocks, or with widen the blocks it widens to
// Q8_0 (widenQ80), a panel's rows at a time, before they are packed.
func q8gPanels(k *q8gKernels, dst []float32, ldd int, q []byte, nt, nb int, w []byte, wb int, widen func(dst, src []byte), r0, r1 int) {
	s := q8gPool.Get().(*q8gScratch)
	defer q8gPool.Put(s)
	rb := nb * Q80BlockBytes
	if n := nt * nb * 2; cap(s.ac) < n {
		s.ac = make([]int32, n)
	}
	ac := s.ac[:nt*nb*2]
	q8gemmActsAVX2(ac, q, nt*nb)
	pack := func(p, w []byte) { k.pack(p, w, rb, nb) }
	if widen != nil {
		if n := k.rows * rb; cap(s.rows) < n {
			s.rows = make([]byte, n)
		}
		rows := s.rows[:k.rows*rb]
		pack = func(p, w []byte) {
			for i := 0; i < k.rows; i++ {
				widen(rows[i*rb:(i+1)*rb], w[i*wb:(i+1)*wb])
			}
			k.pack(p, rows, rb, nb)
		}
	}
	maxT := len(k.tiles) - 1
	tilePanels(&s.panels, dst, ldd, nt, w, wb, r0, r1, k.rows, nb*k.block, maxT, pack,
		func(d []float32, t, n int, p []byte) { k.tiles[n](d, ldd, p, q[t*rb:], rb, ac[t*nb*2:], nb) })
}

// tilePanels is the tile GEMMs' loop over weight rows [r0, r1), whole
// panels of rows weight rows (rb bytes each, from w): the panels (pb bytes
// each; pack(p, w) packs the panel of the rows from w into p) are packed
// about tileChunkBytes at a time into *panels, so that a chunk stays in
// L2, and every group of up to maxT token rows meets every panel of the
// chunk: tile(d, t, n, p) multiplies token rows t..t+n-1 by panel p into
// d, token row t's dst from the panel's first row.
func tilePanels(panels *[]byte, dst []float32, ldd, nt int, w []byte, rb, r0, r1, rows, pb, maxT int,
	pack func(p, w []byte), tile func(d []float32, t, n int, p []byte)) {
	per := max(1, tileChunkBytes/pb)
	if n := min(per, (r1-r0)/rows) * pb; cap(*panels) < n {
		*panels = make([]byte, n)
	}
	for rc := r0; rc < r1; rc += per * rows {
		np := min(per, (r1-rc)/rows)
		ps := (*panels)[:np*pb]
		for i := 0; i < np; i++ {
			pack(ps[i*pb:(i+1)*pb], w[(rc+i*rows)*rb:])
		}
		for t := 0; t < nt; t += maxT {
			n := min(maxT, nt-t)
			for i := 0; i < np; i++ {
				tile(dst[t*ldd+rc+i*rows:], t, n, ps[i*pb:(i+1)*pb])
			}
		}
	}
}
