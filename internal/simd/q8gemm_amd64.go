//go:build amd64 && gc && !purego

package simd

import (
	"encoding/binary"
	"math"
	"sync"
)

// The int8 tile GEMM behind MatMulQ80Q80 (kernels in _generate/q8gemm.go):
// the weight rows are packed q8gChunkBytes of panels at a time (16 rows
// each, so that a chunk stays in L2), and every group of up to four token
// rows meets every panel of the chunk. Rows past the last whole panel take
// DotQ80Q80Rows per token row; all give DotQ80Q80's bits.

// q8gRows is the rows of a panel, q8gPanelBlock the bytes of one block of
// one (the generator's constants).
const (
	q8gRows       = 16
	q8gPanelBlock = 576
	q8gChunkBytes = 1 << 19
)

// q8gTiles are the tile kernels by token rows, 1..4.
var q8gTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
	nil, q8gemmTile1VNNI, q8gemmTile2VNNI, q8gemmTile3VNNI, q8gemmTile4VNNI,
}

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
	re := r0 + (r1-r0)/q8gRows*q8gRows
	if !useAVX512 || !useLegacyVNNI || nt < q8gMinTokens || nb == 0 {
		re = r0
	}
	if re > r0 {
		q8gPanels(dst, ldd, q, nt, nb, w, r0, re)
	}
	if re < r1 {
		matMulQ80Q80Rows(dst, ldd, q, nt, nb, w, re, r1)
	}
}

// q8gMinTokens is the fewest token rows that take the tile GEMM: packing
// the panels costs about what two token rows' dots do. Against
// DotQ80Q80Rows per token row (BenchmarkMatMulQ80Q80Few, Zen 4, weights
// from DRAM) it ran at 0.91× for 2 token rows, 1.23× for 3, 1.46× for 4,
// 2.2× for 8, 3.1× for 16.
const q8gMinTokens = 3

// q8gPanels runs the tile GEMM over rows [r0, r1), whole panels.
func q8gPanels(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	s := q8gPool.Get().(*q8gScratch)
	defer q8gPool.Put(s)
	rb := nb * Q80BlockBytes
	pb := nb * q8gPanelBlock // bytes of one panel
	per := max(1, q8gChunkBytes/pb)
	if n := min(per, (r1-r0)/q8gRows) * pb; cap(s.panels) < n {
		s.panels = make([]byte, n)
	}
	if n := nt * nb * 2; cap(s.ac) < n {
		s.ac = make([]int32, n)
	}
	ac := s.ac[:nt*nb*2]
	q8gActs(ac, q, nt, nb)
	for rc := r0; rc < r1; rc += per * q8gRows {
		np := min(per, (r1-rc)/q8gRows)
		panels := s.panels[:np*pb]
		for i := 0; i < np; i++ {
			q8gemmPackVNNI(panels[i*pb:(i+1)*pb], w[(rc+i*q8gRows)*rb:], rb, nb)
		}
		for t := 0; t < nt; t += 4 {
			n := min(4, nt-t)
			tile := q8gTiles[n]
			for i := 0; i < np; i++ {
				tile(dst[t*ldd+rc+i*q8gRows:], ldd, panels[i*pb:(i+1)*pb], q[t*rb:], rb, ac[t*nb*2:], nb)
			}
		}
	}
}

// q8gActs sets ac, per token row and block, to the pair (the block's scale
// as float32 bits, −128·Σ codes).
func q8gActs(ac []int32, q []byte, nt, nb int) {
	const lo = 0x00ff00ff00ff00ff
	for i := 0; i < nt*nb; i++ {
		blk := q[i*Q80BlockBytes : (i+1)*Q80BlockBytes]
		var u uint64 // Σ (code+128): the bytes XOR 0x80 as unsigned, 8 at a time
		for k := 2; k < Q80BlockBytes; k += 8 {
			x := binary.LittleEndian.Uint64(blk[k:]) ^ 0x8080808080808080
			x = x&lo + x>>8&lo                // four 16-bit sums of two
			u += x * 0x0001000100010001 >> 48 // their sum (≤ 2040)
		}
		ac[2*i] = int32(math.Float32bits(F16ToF32Scalar(binary.LittleEndian.Uint16(blk))))
		ac[2*i+1] = -128 * (int32(u) - 32*128)
	}
}
