//go:build amd64 && gc && !purego

package simd

import "sync"

// The int8 tile GEMM behind MatMulQ80Q80 (kernels in _generate/q8gemm.go):
// the weight rows are packed q8gChunkBytes of panels at a time (16 rows
// each with AVX-512 VNNI, 8 on AVX2, so that a chunk stays in L2), and
// every group of token rows (up to 4, on AVX2 2) meets every panel of the
// chunk. Rows past the last whole panel take DotQ80Q80Rows per token row;
// all give DotQ80Q80's bits.

const q8gChunkBytes = 1 << 19

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
}

var q8gPool = sync.Pool{New: func() any { return new(q8gScratch) }}

func matMulQ80Q80(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	if !useAsm {
		matMulQ80Q80Generic(dst, ldd, q, nt, nb, w, r0, r1)
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
	if re > r0 {
		q8gPanels(k, dst, ldd, q, nt, nb, w, r0, re)
	}
	if re < r1 {
		matMulQ80Q80Rows(dst, ldd, q, nt, nb, w, re, r1)
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

// q8gPanels runs k's tile GEMM over rows [r0, r1), whole panels.
func q8gPanels(k *q8gKernels, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	s := q8gPool.Get().(*q8gScratch)
	defer q8gPool.Put(s)
	rb := nb * Q80BlockBytes
	pb := nb * k.block // bytes of one panel
	per := max(1, q8gChunkBytes/pb)
	if n := min(per, (r1-r0)/k.rows) * pb; cap(s.panels) < n {
		s.panels = make([]byte, n)
	}
	if n := nt * nb * 2; cap(s.ac) < n {
		s.ac = make([]int32, n)
	}
	ac := s.ac[:nt*nb*2]
	q8gemmActsAVX2(ac, q, nt*nb)
	maxT := len(k.tiles) - 1
	for rc := r0; rc < r1; rc += per * k.rows {
		np := min(per, (r1-rc)/k.rows)
		panels := s.panels[:np*pb]
		for i := 0; i < np; i++ {
			k.pack(panels[i*pb:(i+1)*pb], w[(rc+i*k.rows)*rb:], rb, nb)
		}
		for t := 0; t < nt; t += maxT {
			tile := k.tiles[min(maxT, nt-t)]
			for i := 0; i < np; i++ {
				tile(dst[t*ldd+rc+i*k.rows:], ldd, panels[i*pb:(i+1)*pb], q[t*rb:], rb, ac[t*nb*2:], nb)
			}
		}
	}
}
