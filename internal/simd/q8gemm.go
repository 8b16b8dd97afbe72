package simd

import (
	"encoding/binary"
	"fmt"
	"math"
)

// MatMulQ80Q80 multiplies nt token rows of Q8_0 activations by the
// transpose of a Q8_0 weight matrix, for weight rows r0 to r1-1 only: q
// holds the token rows back to back, each cols/32 blocks (QuantizeQ80, so
// codes in −127..127), and w the weight rows of as many Q8_0 blocks. It
// sets
//
//	dst[t*ldd+r] = DotQ80Q80(w[r*rb:(r+1)*rb], q[t*rb:(t+1)*rb])   for t < nt, r0 <= r < r1
//
// (rb = cols/32*34) bit for bit, on every kernel set, however the tokens
// and rows are split between calls: prefill over quantized activations
// gives decode's bits. No other dst entry is written. On amd64 whole
// panels of weight rows go through an int8 tile GEMM (q8gemm_amd64.go;
// 16 rows and AVX-512 VNNI on the avx512 set where the CPU has it, else
// 8 rows and AVX2) from a few token rows on; other rows, and fewer tokens,
// take DotQ80Q80Rows per token row. It panics unless cols%32 == 0, and as
// MatMulQ80 does.
func MatMulQ80Q80(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	matMulWidened("MatMulQ80Q80", qdQ80, dst, ldd, q, nt, cols, w, r0, r1)
}

// q8gActs sets ac, per token row and block, to the pair the tile kernels
// take (the block's scale as float32 bits, −128·Σ codes): the twin of
// q8gemmActsAVX2.
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

// MatMulQ40Q80 is MatMulQ80Q80 for Q4_0 weight rows (cols/32 blocks of
// 18 bytes each): it sets
//
//	dst[t*ldd+r] = DotQ40Q80(w[r*rb:(r+1)*rb], q[t*qb:(t+1)*qb])   for t < nt, r0 <= r < r1
//
// (rb = cols/32*18, qb = cols/32*34) bit for bit, on every kernel set. A
// Q4_0 block is a Q8_0 block with the codes' nibbles less 8 and the same
// binary16 scale (WidenQ80), and DotQ40Q80 takes its blocks as DotQ80Q80
// does (the same int32 sum a block, times the same scales, summed in the
// same order), so whole panels of rows are widened to Q8_0 as the int8 tile
// GEMM packs them and go through MatMulQ80Q80's tiles; other rows, and
// fewer tokens, take DotQ40Q80Rows per token row.
func MatMulQ40Q80(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	matMulWidened("MatMulQ40Q80", qdQ40, dst, ldd, q, nt, cols, w, r0, r1)
}

// MatMulQ50Q80 is MatMulQ40Q80 for Q5_0 weight rows (22-byte blocks, codes
// less 16), with DotQ50Q80's bits.
func MatMulQ50Q80(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	matMulWidened("MatMulQ50Q80", qdQ50, dst, ldd, q, nt, cols, w, r0, r1)
}

// MatMulIQ4NLQ80 is MatMulQ40Q80 for IQ4_NL weight rows (18-byte blocks,
// codes the non-linear table's int8 levels), with DotIQ4NLQ80's bits.
func MatMulIQ4NLQ80(dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	matMulWidened("MatMulIQ4NLQ80", qdIQ4NL, dst, ldd, q, nt, cols, w, r0, r1)
}

// matMulWidened checks the shapes of MatMulQ80Q80 (t qdQ80) or one of its
// widening kin for weight type t (naming op) and runs matMulWidenedQ80.
func matMulWidened(op string, t qdotType, dst []float32, ldd int, q []byte, nt, cols int, w []byte, r0, r1 int) {
	checkQ80(op, cols)
	nb := cols / q80BlockSize
	checkMatMul(op, len(dst), ldd, len(q), nt, nb*Q80BlockBytes, len(w), nb*qdotBlockBytes[t], r0, r1)
	if nt == 0 || r0 == r1 {
		return
	}
	matMulWidenedQ80(t, dst, ldd, q, nt, nb, w, r0, r1)
}

// matMulWidenedGeneric is the twin of matMulWidenedQ80 (and so of
// MatMulQ80Q80 and its widening kin): one twin dot per pair.
func matMulWidenedGeneric(t qdotType, dst []float32, ldd int, q []byte, nt, nb int, w []byte, r0, r1 int) {
	rb, qb := nb*qdotBlockBytes[t], nb*Q80BlockBytes
	for tk := 0; tk < nt; tk++ {
		qt := q[tk*qb : (tk+1)*qb]
		for r := r0; r < r1; r++ {
			dst[tk*ldd+r] = dotQ8LegacyGeneric(t, w[r*rb:(r+1)*rb], qt, nb)
		}
	}
}

// WidenQ80 sets dst to the blocks of src, of a type that fits Q8_0 blocks
// ("q4_0", "q5_0" or "iq4_nl"), as Q8_0 blocks that dequantize to the same
// values: the same binary16 scale, and code j the block's integer value j
// (the nibble less 8; the nibble and its high bit less 16; the table's
// level), in ggml's order (the low nibbles of the 16 bytes first, then the
// high ones). It panics on another type, unless src is whole blocks and dst
// their size in Q8_0.
func WidenQ80(typ string, dst, src []byte) {
	t, ok := map[string]qdotType{"q4_0": qdQ40, "q5_0": qdQ50, "iq4_nl": qdIQ4NL}[typ]
	if !ok {
		panic(fmt.Sprintf("simd: WidenQ80: type %q does not fit Q8_0 blocks", typ))
	}
	bb := qdotBlockBytes[t]
	if nb := len(src) / bb; len(src)%bb != 0 || len(dst) != nb*Q80BlockBytes {
		panic(fmt.Sprintf("simd: WidenQ80: %d bytes is not whole %s blocks, or %d bytes is not %d Q8_0 blocks", len(src), typ, len(dst), nb))
	}
	widenQ80(t)(dst, src)
}

// widenQ80 returns type t's widening of whole blocks to Q8_0 blocks
// (WidenQ80), nil for Q8_0 itself; it panics on a type that does not fit.
func widenQ80(t qdotType) func(dst, src []byte) {
	switch t {
	case qdQ80:
		return nil
	case qdQ40:
		return q40ToQ80
	case qdQ50:
		return q50ToQ80
	case qdIQ4NL:
		return iq4nlToQ80
	}
	panic("simd: unreachable")
}

// The SWAR constants of q40ToQ80 and q50ToQ80: a byte n + bias (n ≤ 15, or
// ≤ 31 with top5) carries into no other byte, and its top bit flipped is
// n − 8 (n − 16) in two's complement.
const (
	swarNib   = 0x0f0f0f0f0f0f0f0f
	swarBias4 = 0x7878787878787878
	swarBias5 = 0x7070707070707070
	swarTop   = 0x8080808080808080
)

func q40ToQ80(dst, src []byte) {
	for b := 0; b < len(src)/q40BlockBytes; b++ {
		s, d := src[b*q40BlockBytes:(b+1)*q40BlockBytes], dst[b*Q80BlockBytes:(b+1)*Q80BlockBytes]
		d[0], d[1] = s[0], s[1]
		lo0, lo1 := binary.LittleEndian.Uint64(s[2:]), binary.LittleEndian.Uint64(s[10:])
		binary.LittleEndian.PutUint64(d[2:], (lo0&swarNib+swarBias4)^swarTop)
		binary.LittleEndian.PutUint64(d[10:], (lo1&swarNib+swarBias4)^swarTop)
		binary.LittleEndian.PutUint64(d[18:], (lo0>>4&swarNib+swarBias4)^swarTop)
		binary.LittleEndian.PutUint64(d[26:], (lo1>>4&swarNib+swarBias4)^swarTop)
	}
}

// q5Bits spreads a byte's bits over the bytes of a word, bit i as 0x10 in
// byte i: the fifth bits of eight codes of a q5_0 block.
var q5Bits = func() (t [256]uint64) {
	for v := range t {
		for i := 0; i < 8; i++ {
			t[v] |= uint64(v>>i&1) << (8*i + 4)
		}
	}
	return t
}()

func q50ToQ80(dst, src []byte) {
	for b := 0; b < len(src)/q50BlockBytes; b++ {
		s, d := src[b*q50BlockBytes:(b+1)*q50BlockBytes], dst[b*Q80BlockBytes:(b+1)*Q80BlockBytes]
		d[0], d[1] = s[0], s[1]
		qh := s[2:6]
		lo0, lo1 := binary.LittleEndian.Uint64(s[6:]), binary.LittleEndian.Uint64(s[14:])
		binary.LittleEndian.PutUint64(d[2:], (lo0&swarNib|q5Bits[qh[0]]+swarBias5)^swarTop)
		binary.LittleEndian.PutUint64(d[10:], (lo1&swarNib|q5Bits[qh[1]]+swarBias5)^swarTop)
		binary.LittleEndian.PutUint64(d[18:], (lo0>>4&swarNib|q5Bits[qh[2]]+swarBias5)^swarTop)
		binary.LittleEndian.PutUint64(d[26:], (lo1>>4&swarNib|q5Bits[qh[3]]+swarBias5)^swarTop)
	}
}

func iq4nlToQ80(dst, src []byte) {
	for b := 0; b < len(src)/iq4nlBlockBytes; b++ {
		s, d := src[b*iq4nlBlockBytes:(b+1)*iq4nlBlockBytes], dst[b*Q80BlockBytes:(b+1)*Q80BlockBytes]
		d[0], d[1] = s[0], s[1]
		for j, c := range s[2:iq4nlBlockBytes] {
			d[2+j], d[18+j] = byte(iq4Levels8[c&15]), byte(iq4Levels8[c>>4])
		}
	}
}
