//go:build amd64 && gc && !purego

package simd

import (
	"encoding/binary"
	"sync"
)

// The int8 tile GEMMs behind MatMulQ4KQ8K, MatMulQ5KQ8K and MatMulQ6KQ8K
// (kernels in _generate/q4kgemm.go): the weight rows are packed
// tileChunkBytes of panels at a time (16 rows each, so that a chunk stays
// in L2), and every group of up to four token rows meets every panel of
// the chunk; without VNNI the AVX2 tiles (below) take panels of 8 rows and
// pairs of token rows. Rows past the last whole panel take the one-row
// dots (DotQ4KQ8KRows, DotQ5KQ8K, DotQ6KQ8KRows) per token row; all give
// the one-row dot's bits.

// q4kgRows is the rows of a panel, q4kgPanelBlock, q5kgPanelBlock and
// q6kgPanelBlock the bytes of one super-block of one (the generator's
// constants).
const (
	q4kgRows       = 16
	q4kgPanelBlock = 2496
	q5kgPanelBlock = 4544
	q6kgPanelBlock = 4928
)

// q4kgMinTokens, q5kgMinTokens and q6kgMinTokens are the fewest token rows
// that take the tile GEMMs: packing the panels costs about what two (q6_K:
// four) token rows' dots do. Against DotQ4KQ8KRows per token row
// (BenchmarkMatMulQ4KQ8KFew, Zen 4, 8192×2048 weights from DRAM, load 2–3.5)
// q4_K's ran at 0.72–0.79× for 2 token rows, 0.99–1.01× for 3, 1.05–1.15×
// for 4, 1.6–1.7× for 8, 2.2–2.3× for 16; against DotQ6KQ8KRows q6_K's
// (whose packing forms the 6-bit codes) at 0.78× for 3, 0.80–0.86× for 4,
// 1.26× for 6, 1.32–1.47× for 8, 2.1× for 16; against DotQ5KQ8K per row
// (q5_K has no four-row dot) q5_K's at 0.88× for 2, 1.13× for 3, 1.37× for
// 4, 3.4× for 16.
const (
	q4kgMinTokens = 3
	q5kgMinTokens = 3
	q6kgMinTokens = 5
)

// q4kgTiles and q6kgTiles are the tile kernels by token rows, 1..4.
var (
	q4kgTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q4kgemmTile1VNNI, q4kgemmTile2VNNI, q4kgemmTile3VNNI, q4kgemmTile4VNNI,
	}
	q5kgTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q5kgemmTile1VNNI, q5kgemmTile2VNNI, q5kgemmTile3VNNI, q5kgemmTile4VNNI,
	}
	q6kgTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, nb int){
		nil, q6kgemmTile1VNNI, q6kgemmTile2VNNI, q6kgemmTile3VNNI, q6kgemmTile4VNNI,
	}
)

type q4kgScratch struct {
	panels []byte
	ac     []int32
}

var q4kgPool = sync.Pool{New: func() any { return new(q4kgScratch) }}

func matMulQ4KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	if !useAsm {
		matMulQ4KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
		return
	}
	re := q4kgEnd(nt, nb, r0, r1, q4kgMinTokens)
	if re > r0 {
		q4kgPanels(dst, ldd, q, nt, nb, w, r0, re, 4)
	} else if re = q4kaEnd(nt, nb, r0, r1, q4kaMinTokens); re > r0 {
		q4kaPanels(dst, ldd, q, nt, nb, w, r0, re, false)
	}
	if re < r1 {
		matMulQ4KQ8KRows(dst, ldd, q, nt, nb, w, re, r1)
	}
}

func matMulQ6KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	if !useAsm {
		matMulQ6KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
		return
	}
	re := q4kgEnd(nt, nb, r0, r1, q6kgMinTokens)
	if re > r0 {
		q4kgPanels(dst, ldd, q, nt, nb, w, r0, re, 6)
	} else if re = q4kaEnd(nt, nb, r0, r1, q6kaMinTokens); re > r0 {
		q6kaPanels(dst, ldd, q, nt, nb, w, r0, re)
	}
	if re < r1 {
		matMulQ6KQ8KRows(dst, ldd, q, nt, nb, w, re, r1)
	}
}

func matMulQ5KQ8K(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	if !useAsm {
		matMulQ5KQ8KGeneric(dst, ldd, q, nt, nb, w, r0, r1)
		return
	}
	re := q4kgEnd(nt, nb, r0, r1, q5kgMinTokens)
	if re > r0 {
		q4kgPanels(dst, ldd, q, nt, nb, w, r0, re, 5)
	} else if re = q4kaEnd(nt, nb, r0, r1, q5kaMinTokens); re > r0 {
		q4kaPanels(dst, ldd, q, nt, nb, w, r0, re, true)
	}
	if re < r1 {
		matMulQ5KQ8KRows(dst, ldd, q, nt, nb, w, re, r1)
	}
}

func matMulKQ8KPacked() bool { return useAVX512 && useVNNI }

// q4kgEnd returns the end of the rows from r0 on that take the tile GEMM:
// whole panels, where it runs and nt >= minTokens.
func q4kgEnd(nt, nb, r0, r1, minTokens int) int {
	if !matMulKQ8KPacked() || nt < minTokens || nb == 0 {
		return r0
	}
	return r0 + (r1-r0)/q4kgRows*q4kgRows
}

// q4kgPanels runs the tile GEMM over rows [r0, r1), whole panels, of
// q4_K, q5_K or q6_K weights (typ 4, 5, 6).
func q4kgPanels(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int, typ int) {
	s := q4kgPool.Get().(*q4kgScratch)
	defer q4kgPool.Put(s)
	rb, qb, pb := nb*q4KBlockBytes, nb*Q8KBlockBytes, nb*q4kgPanelBlock // pb: bytes of one panel
	pack, tiles := q4kgemmPackVNNI, &q4kgTiles
	switch typ {
	case 5:
		rb, pb, pack, tiles = nb*q5KBlockBytes, nb*q5kgPanelBlock, q5kgemmPackVNNI, &q5kgTiles
	case 6:
		rb, pb, pack = nb*q6KBlockBytes, nb*q6kgPanelBlock, q6kgemmPackVNNI
	}
	tile := func(d []float32, t, n int, p []byte) { q6kgTiles[n](d, ldd, p, q[t*qb:], qb, nb) }
	if typ != 6 {
		ac := s.acts(q, nt, nb)
		tile = func(d []float32, t, n int, p []byte) { tiles[n](d, ldd, p, q[t*qb:], qb, ac[t*nb*8:], nb) }
	}
	tilePanels(&s.panels, dst, ldd, nt, w, rb, r0, r1, q4kgRows, pb, 4,
		func(p, w []byte) { pack(p, w, rb, nb) }, tile)
}

// acts returns the activation terms of the nt token rows of q (nb Q8_K
// blocks each) in s's buffer (q4kgActs).
func (s *q4kgScratch) acts(q []byte, nt, nb int) []int32 {
	if n := nt * nb * 8; cap(s.ac) < n {
		s.ac = make([]int32, n)
	}
	ac := s.ac[:nt*nb*8]
	q4kgActs(ac, q, nt*nb)
	return ac
}

// q4kgActs sets ac, per Q8_K block of q (n of them), to 8 int32: the
// block's d as float32 bits, then the int16 pairs (bs_{2k}, bs_{2k+1}),
// k < 4, of bs_g = bsum_{2g} + bsum_{2g+1} (|bs_g| ≤ 2·16·128), then 0s.
func q4kgActs(ac []int32, q []byte, n int) {
	for i := 0; i < n; i++ {
		blk := q[i*Q8KBlockBytes : (i+1)*Q8KBlockBytes]
		a := ac[8*i : 8*i+8]
		a[0] = int32(binary.LittleEndian.Uint32(blk))
		var bs [8]int32
		for g := range bs {
			bs[g] = int32(int16(binary.LittleEndian.Uint16(blk[4+kBlockSize+4*g:]))) + int32(int16(binary.LittleEndian.Uint16(blk[4+kBlockSize+4*g+2:])))
		}
		for k := 0; k < 4; k++ {
			a[1+k] = int32(uint32(uint16(bs[2*k])) | uint32(uint16(bs[2*k+1]))<<16)
		}
		a[5], a[6], a[7] = 0, 0, 0
	}
}

// The avx2 set's tile GEMM for q4_K (kernels in _generate/kq8avx2.go; the
// avx512 set without VNNI takes it too): panels of 8 rows packed
// tileChunkBytes at a time by q4kgemmPackAVX2, every pair of token rows
// meeting every panel of the chunk (q4kgemmTile1AVX2, q4kgemmTile2AVX2).

// q4kaRows is the rows of an AVX2 panel, q4kaPanelBlock the bytes of one
// super-block of one, q4ka*At where its scale pairs, min pairs, d and dmin
// start (the generator's constants).
const (
	q4kaRows       = 8
	q4kaPanelBlock = 1440
	q4kaScalesAt   = 1024
	q4kaMinsAt     = 1280
	q4kaDAt        = 1408
	q4kaDminAt     = 1424
)

// q4kaMinTokens, q5kaMinTokens and q6kaMinTokens are the fewest token rows
// that take the AVX2 tile GEMMs: packing the panels costs what several
// token rows' one-row dots do. Under ForceAVX2 on the Zen 4 (4096×2048
// weights, load 1.1–1.5), against the one-row dots per token row, q4_K's
// ran at 0.75× for 4 token rows, 1.0× for 6, 1.2× for 8, 1.8× for 16;
// q5_K's at 0.81× for 4, 1.12× for 6, 1.36× for 8, 2.0× for 16; q6_K's at
// 0.80× for 6, 0.97× for 8, 1.12× for 10, 1.41× for 16.
const (
	q4kaMinTokens = 6
	q5kaMinTokens = 5
	q6kaMinTokens = 9
)

var (
	q4kaTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q4kgemmTile1AVX2, q4kgemmTile2AVX2,
	}
	q5kaTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, ac []int32, nb int){
		nil, q5kgemmTile1AVX2, q5kgemmTile2AVX2,
	}
)

// q5kaPanelBlock is the bytes of one super-block of an AVX2 q5_K panel,
// q5ka*At where its scale pairs, min pairs, d and dmin start (the
// generator's constants).
const (
	q5kaPanelBlock = 2720
	q5kaScalesAt   = 2304
	q5kaMinsAt     = 2560
	q5kaDAt        = 2688
	q5kaDminAt     = 2704
)

// q5kgemmPackAVX2 packs the nb q5_K super-blocks of the 8 rows at w,
// stride bytes apart, into the panel at dst (nb·q5kaPanelBlock bytes; see
// _generate/kq8avx2.go): each row's codes formed bytewise from qs and qh
// (q5kaCodesAVX2) into rows (kaRowBytes a row), transposed by
// q8gemmPackAVX2, then q4_K's scale and min pairs, d and dmin.
func q5kgemmPackAVX2(dst []byte, w []byte, stride, nb int) {
	var rows [q4kaRows * kaRowBytes]byte
	for b := 0; b < nb; b++ {
		out := dst[b*q5kaPanelBlock : (b+1)*q5kaPanelBlock]
		for r := 0; r < q4kaRows; r++ {
			row := rows[r*kaRowBytes : (r+1)*kaRowBytes]
			blk := w[r*stride+b*q5KBlockBytes : r*stride+(b+1)*q5KBlockBytes]
			q5kaCodesAVX2(row, blk)
			kaPutScaleMins(out, blk, r, q5kaScalesAt, q5kaMinsAt, q5kaDAt, q5kaDminAt)
		}
		q8gemmPackAVX2(out, rows[:], kaRowBytes, 8)
	}
}

// kaRowBytes is the bytes of one row's codes of a q5_K or q6_K
// super-block as q5kgemmPackAVX2 and q6kgemmPackAVX2 lay them out for
// q8gemmPackAVX2: 8 groups of 32 codes, 34 bytes apart, each after 2
// unused bytes (where a Q8_0 block has its scale); kaCodeAt(n) is where
// code n goes. q8gemmPackAVX2(out, rows, kaRowBytes, 8) writes the 8-row
// transpose of group i at out[288i:], 256 bytes of codes and 32 unused.
const kaRowBytes = 8 * 34

func kaCodeAt(n int) int { return 34*(n/32) + 2 + n%32 }

// q4kaEnd returns the end of the rows from r0 on that take the AVX2 tile
// GEMM: whole panels, where the VNNI one does not run and nt >=
// minTokens.
func q4kaEnd(nt, nb, r0, r1, minTokens int) int {
	if matMulKQ8KPacked() || nt < minTokens || nb == 0 {
		return r0
	}
	return r0 + (r1-r0)/q4kaRows*q4kaRows
}

// q4kgemmPackAVX2 packs the nb q4_K super-blocks of the 8 rows at w,
// stride bytes apart, into the panel at dst (nb·q4kaPanelBlock bytes; see
// _generate/kq8avx2.go): the code bytes transposed as 8×8 dwords by
// q8gemmPackAVX2 (a quarter of a super-block a call; the 32 bytes it
// writes past a quarter are overwritten after), then the scale and min
// pairs, d and dmin.
func q4kgemmPackAVX2(dst []byte, w []byte, stride, nb int) {
	for b := 0; b < nb; b++ {
		out := dst[b*q4kaPanelBlock : (b+1)*q4kaPanelBlock]
		for i := 0; i < 4; i++ {
			q8gemmPackAVX2(out[256*i:], w[b*q4KBlockBytes+16+32*i-2:], stride, 1)
		}
		for r := 0; r < q4kaRows; r++ {
			kaPutScaleMins(out, w[r*stride+b*q4KBlockBytes:], r, q4kaScalesAt, q4kaMinsAt, q4kaDAt, q4kaDminAt)
		}
	}
}

// kaPutScaleMins writes row r's part of the scales of a q4_K or q5_K
// super-block blk (the same 12 scale bytes after d and dmin) into the
// super-block out of an AVX2 panel, at its layout's offsets: the int16
// pairs (sc_g, sc_g) at scalesAt, (m_2k, m_2k+1) at minsAt, d at dAt and
// dmin at dminAt, lane r of each YMM.
func kaPutScaleMins(out, blk []byte, r, scalesAt, minsAt, dAt, dminAt int) {
	le := binary.LittleEndian
	sc, mn := q4KScaleMins(blk)
	for g := 0; g < 8; g++ {
		le.PutUint32(out[scalesAt+32*g+4*r:], uint32(sc[g])*0x10001)
	}
	for k := 0; k < 4; k++ {
		le.PutUint32(out[minsAt+32*k+4*r:], uint32(mn[2*k])|uint32(mn[2*k+1])<<16)
	}
	copy(out[dAt+2*r:dAt+2*r+2], blk[0:2])
	copy(out[dminAt+2*r:dminAt+2*r+2], blk[2:4])
}

// q4kaPanels runs the AVX2 tile GEMM over rows [r0, r1), whole panels, of
// q4_K weights (q5: q5_K).
func q4kaPanels(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int, q5 bool) {
	s := q4kgPool.Get().(*q4kgScratch)
	defer q4kgPool.Put(s)
	rb, qb, pb := nb*q4KBlockBytes, nb*Q8KBlockBytes, nb*q4kaPanelBlock
	pack, tiles := q4kgemmPackAVX2, &q4kaTiles
	if q5 {
		rb, pb, pack, tiles = nb*q5KBlockBytes, nb*q5kaPanelBlock, q5kgemmPackAVX2, &q5kaTiles
	}
	ac := s.acts(q, nt, nb)
	tilePanels(&s.panels, dst, ldd, nt, w, rb, r0, r1, q4kaRows, pb, 2,
		func(p, w []byte) { pack(p, w, rb, nb) },
		func(d []float32, t, n int, p []byte) { tiles[n](d, ldd, p, q[t*qb:], qb, ac[t*nb*8:], nb) })
}

// q6kaPanelBlock is the bytes of one super-block of an AVX2 q6_K panel,
// q6ka*At where its scale pairs (sc, sc), scale pairs (sc_2k, sc_2k+1) and
// d start (the generator's constants).
const (
	q6kaPanelBlock = 3088
	q6kaScalesAt   = 2304
	q6kaPairsAt    = 2816
	q6kaDAt        = 3072
)

var q6kaTiles = [...]func(dst []float32, ldd int, p []byte, q []byte, rowBytes int, nb int){
	nil, q6kgemmTile1AVX2, q6kgemmTile2AVX2,
}

// q6kgemmPackAVX2 packs the nb q6_K super-blocks of the 8 rows at w,
// stride bytes apart, into the panel at dst (nb·q6kaPanelBlock bytes; see
// _generate/kq8avx2.go): each row's codes formed bytewise from ql and qh
// (q6kaCodesAVX2) into rows (kaRowBytes a row), transposed by
// q8gemmPackAVX2, then the scale pairs and d.
func q6kgemmPackAVX2(dst []byte, w []byte, stride, nb int) {
	le := binary.LittleEndian
	var rows [q4kaRows * kaRowBytes]byte
	for b := 0; b < nb; b++ {
		out := dst[b*q6kaPanelBlock : (b+1)*q6kaPanelBlock]
		for r := 0; r < q4kaRows; r++ {
			row := rows[r*kaRowBytes : (r+1)*kaRowBytes]
			blk := w[r*stride+b*q6KBlockBytes : r*stride+(b+1)*q6KBlockBytes]
			q6kaCodesAVX2(row, blk)
			for g := 0; g < 16; g++ {
				sc := uint32(uint16(int16(int8(blk[192+g]))))
				le.PutUint32(out[q6kaScalesAt+32*g+4*r:], sc|sc<<16)
			}
			for k := 0; k < 8; k++ {
				a, c := uint32(uint16(int16(int8(blk[192+2*k])))), uint32(uint16(int16(int8(blk[193+2*k]))))
				le.PutUint32(out[q6kaPairsAt+32*k+4*r:], a|c<<16)
			}
			copy(out[q6kaDAt+2*r:q6kaDAt+2*r+2], blk[208:210])
		}
		q8gemmPackAVX2(out, rows[:], kaRowBytes, 8)
	}
}

// q6kaPanels runs the AVX2 tile GEMM over rows [r0, r1), whole panels, of
// q6_K weights.
func q6kaPanels(dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	s := q4kgPool.Get().(*q4kgScratch)
	defer q4kgPool.Put(s)
	rb, qb := nb*q6KBlockBytes, nb*Q8KBlockBytes
	tilePanels(&s.panels, dst, ldd, nt, w, rb, r0, r1, q4kaRows, nb*q6kaPanelBlock, 2,
		func(p, w []byte) { q6kgemmPackAVX2(p, w, rb, nb) },
		func(d []float32, t, n int, p []byte) { q6kaTiles[n](d, ldd, p, q[t*qb:], qb, nb) })
}

// q5kaCodesGeneric is q5kaCodesAVX2's twin: the 256 codes of the q5_K
// super-block blk as bytes at row[kaCodeAt(n)], eight at a time.
func q5kaCodesGeneric(row, blk []byte) {
	const lo4, lo1 = 0x0f0f0f0f0f0f0f0f, 0x0101010101010101
	le := binary.LittleEndian
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l += 8 {
			qv, hv := le.Uint64(blk[48+32*c+l:]), le.Uint64(blk[16+l:])
			for i, v := range [2]uint64{
				qv&lo4 | (hv>>uint(2*c)&lo1)<<4,
				qv>>4&lo4 | (hv>>uint(2*c+1)&lo1)<<4,
			} {
				le.PutUint64(row[kaCodeAt(64*c+32*i+l):], v)
			}
		}
	}
}

// q6kaCodesGeneric is q6kaCodesAVX2's twin for a q6_K super-block.
func q6kaCodesGeneric(row, blk []byte) {
	const lo4, lo2 = 0x0f0f0f0f0f0f0f0f, 0x0303030303030303
	le := binary.LittleEndian
	for h := 0; h < 2; h++ {
		for l := 0; l < 32; l += 8 {
			qa, qb := le.Uint64(blk[64*h+l:]), le.Uint64(blk[64*h+32+l:])
			qh := le.Uint64(blk[128+32*h+l:])
			c := [4]uint64{
				qa&lo4 | (qh&lo2)<<4,
				qb&lo4 | (qh>>2&lo2)<<4,
				qa>>4&lo4 | (qh>>4&lo2)<<4,
				qb>>4&lo4 | (qh>>6&lo2)<<4,
			}
			for k, v := range c {
				le.PutUint64(row[kaCodeAt(128*h+32*k+l):], v)
			}
		}
	}
}
