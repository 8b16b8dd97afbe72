package simd

import (
	"encoding/binary"
	"fmt"
)

// The packed dot products of the GGML block types other than Q8_0 and the
// q4_K to q6_K super-blocks (those are DotQ80, DotQ4K … DotQ6K): one
// weight row of packed blocks against float32 activations, each block's
// codes turned into small integers and multiplied with the activations in
// the kernel, the row never decoded to float32 in memory. The activations
// stay float32: llama.cpp quantizes them to Q8_0 or Q8_1 for these
// products, which rounds differently (docs/weight-formats.md). The result
// is Σ_b s_b·Σ_j v_bj·x[32b+j] (the block's scale times its integer
// values' dot), so it rounds differently from decoding each value
// (s_b·v_bj, rounded) first; the kernels keep several partial sums.

// checkBlocks panics unless xlen is whole blocks of 32 values and wlen
// holds them.
func checkBlocks(op string, wlen, xlen, blockBytes int) {
	if xlen%32 != 0 || wlen < xlen/32*blockBytes {
		panic(fmt.Sprintf("simd: %s: %d values is not whole blocks of 32, or %d bytes of weights are too few", op, xlen, wlen))
	}
}

// checkSums panics unless xs holds one sum per block of 32 values.
func checkSums(op string, xlen, xslen int) {
	if xslen != xlen/32 {
		panic(fmt.Sprintf("simd: %s: %d group sums for %d values (want one per 32)", op, xslen, xlen))
	}
}

// DotQ40 returns Σ_b d_b·Σ_j (code_bj−8)·x[32b+j] over the len(x)/32 Q4_0
// blocks at w (18 bytes each, see Q40ToF32): the dot product of the
// decoded row with x, up to rounding. It panics unless len(x) is a
// multiple of 32 and w holds len(x)/32 blocks.
func DotQ40(w []byte, x []float32) float32 {
	checkBlocks("DotQ40", len(w), len(x), q40BlockBytes)
	return dotQ40(w, x)
}

// DotQ41 returns Σ_b (d_b·Σ_j code_bj·x[32b+j] + m_b·xs[b]) over the
// len(x)/32 Q4_1 blocks at w (20 bytes each, see Q41ToF32), xs holding the
// activations' 32-value group sums (GroupSums32, computed once per
// activation row and shared by every weight row). It panics as DotQ40
// does, or unless len(xs) == len(x)/32.
func DotQ41(w []byte, x, xs []float32) float32 {
	checkBlocks("DotQ41", len(w), len(x), q41BlockBytes)
	checkSums("DotQ41", len(x), len(xs))
	return dotQ41(w, x, xs)
}

// DotQ50 is DotQ40 for Q5_0 blocks (22 bytes each, see Q50ToF32): values
// code_bj−16 with 5-bit codes.
func DotQ50(w []byte, x []float32) float32 {
	checkBlocks("DotQ50", len(w), len(x), q50BlockBytes)
	return dotQ50(w, x)
}

// DotQ51 is DotQ41 for Q5_1 blocks (24 bytes each, see Q51ToF32).
func DotQ51(w []byte, x, xs []float32) float32 {
	checkBlocks("DotQ51", len(w), len(x), q51BlockBytes)
	checkSums("DotQ51", len(x), len(xs))
	return dotQ51(w, x, xs)
}

// DotIQ4NL is DotQ40 for IQ4_NL blocks (18 bytes each, see IQ4NLToF32):
// values T[code_bj] from GGML's kvalues_iq4nl.
func DotIQ4NL(w []byte, x []float32) float32 {
	checkBlocks("DotIQ4NL", len(w), len(x), iq4nlBlockBytes)
	return dotIQ4NL(w, x)
}

// DotMXFP4 is DotQ40 for MXFP4 blocks (17 bytes each, see MXFP4ToF32): the
// doubled e2m1 values kvalues_mxfp4[code] times the halved E8M0 scale
// 2^(e−128) of each block.
func DotMXFP4(w []byte, x []float32) float32 {
	checkBlocks("DotMXFP4", len(w), len(x), mxfp4BlockBytes)
	return dotMXFP4(w, x)
}

// DotIQ4XS returns Σ over the len(x)/256 iq4_xs super-blocks at w (136
// bytes each, see IQ4XSToF32) of Σ_ib d·(scale_ib−32)·Σ_j T[code]·x over
// their 8 sub-blocks of 32 values. It panics unless len(x) is a multiple
// of 256 and w holds len(x)/256 super-blocks.
func DotIQ4XS(w []byte, x []float32) float32 {
	checkK("DotIQ4XS", len(w), len(x), iq4XSBlockBytes)
	return dotIQ4XS(w, x)
}

// DotQ2K returns the dot product of the len(x)/256 q2_K super-blocks at w
// (84 bytes each, see Q2KToF32) with x: up to 4 super-blocks at a time are
// decoded bit for bit as Q2KToF32 does into a buffer on the stack (4 KiB,
// in L1) and dotted with DotF32's kernels. q2_K and q3_K are rare in the
// files people run; this keeps their decode as fast as decoding the row
// once, without the row. It panics as DotQ4K does.
func DotQ2K(w []byte, x []float32) float32 {
	checkK("DotQ2K", len(w), len(x), q2KBlockBytes)
	return dotQ23K(w, x, false)
}

// DotQ3K is DotQ2K for q3_K super-blocks (110 bytes each, see Q3KToF32).
func DotQ3K(w []byte, x []float32) float32 {
	checkK("DotQ3K", len(w), len(x), q3KBlockBytes)
	return dotQ23K(w, x, true)
}

// dotQ23K decodes 4 q2_K (q3_K with three) super-blocks at a time
// (q23KBlocks: the AVX2 decoder, or its generic twin) and dots them
// (dotF32), so that under ForceGeneric it is its own Go twin. Every call
// is static, so that the buffer stays on the stack.
func dotQ23K(w []byte, x []float32, three bool) float32 {
	blockBytes := q2KBlockBytes
	if three {
		blockBytes = q3KBlockBytes
	}
	var buf [4 * kBlockSize]float32
	var s float32
	nb := len(x) / kBlockSize
	for b := 0; b < nb; b += 4 {
		n := min(4, nb-b)
		v := buf[:n*kBlockSize]
		q23KBlocks(v, w[b*blockBytes:(b+n)*blockBytes], three)
		s += dotF32(v, x[b*kBlockSize:(b+n)*kBlockSize])
	}
	return s
}

// q23KBlocksGeneric is the twin of q23KBlocks.
func q23KBlocksGeneric(dst []float32, w []byte, three bool) {
	if three {
		q3KToF32Generic(dst, w)
	} else {
		q2KToF32Generic(dst, w)
	}
}

// The Go twins: each block's 32 integer values (qdotValues), their dot
// with the activations summed in value order, times the block's scale,
// added to the sum; the Q4_1 and Q5_1 offsets times the group sums in a
// second sum, added at the end, as the kernels do.

// qdotType names the block types of the twins.
type qdotType int

const (
	qdQ40 qdotType = iota
	qdQ41
	qdQ50
	qdQ51
	qdIQ4NL
	qdMXFP4
	qdQ80 // Q8_0 weights: only the Q8_0-activation dots (q8legacy.go)
)

var qdotBlockBytes = [...]int{qdQ40: q40BlockBytes, qdQ41: q41BlockBytes, qdQ50: q50BlockBytes,
	qdQ51: q51BlockBytes, qdIQ4NL: iq4nlBlockBytes, qdMXFP4: mxfp4BlockBytes, qdQ80: Q80BlockBytes}

// qdotValues sets v to the 32 integer values of block blk of type t and
// returns its scale.
func qdotValues(t qdotType, blk []byte, v *[32]int8) float32 {
	var qs []byte
	var qh uint32
	var table *[16]int8
	var off int8
	switch t {
	case qdQ40:
		qs, off = blk[2:18], 8
	case qdQ41:
		qs = blk[4:20]
	case qdQ50:
		qh, qs, off = binary.LittleEndian.Uint32(blk[2:]), blk[6:22], 16
	case qdQ51:
		qh, qs = binary.LittleEndian.Uint32(blk[4:]), blk[8:24]
	case qdIQ4NL:
		qs, table = blk[2:18], &iq4Levels8
	case qdMXFP4:
		qs, table = blk[1:17], &mxfp4Levels
	case qdQ80:
		for j, c := range blk[2:34] {
			v[j] = int8(c)
		}
		return F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
	}
	for j, c := range qs {
		lo, hi := int8(c&15), int8(c>>4)
		if table != nil {
			lo, hi = table[lo], table[hi]
		}
		lo |= int8(qh >> j & 1 << 4)
		hi |= int8(qh >> (j + 16) & 1 << 4)
		v[j], v[j+16] = lo-off, hi-off
	}
	if t == qdMXFP4 {
		return e8m0Half(blk[0])
	}
	return F16ToF32Scalar(binary.LittleEndian.Uint16(blk))
}

// dotBlocksGeneric is the twin of the block dots of type t (xs: the group
// sums, for Q4_1 and Q5_1).
func dotBlocksGeneric(t qdotType, w []byte, x, xs []float32) float32 {
	var s, ms float32
	var v [32]int8
	bb := qdotBlockBytes[t]
	for b := 0; b < len(x)/32; b++ {
		blk := w[b*bb : (b+1)*bb]
		d := qdotValues(t, blk, &v)
		xb := x[32*b : 32*b+32]
		var p float32
		for j, xv := range xb {
			p += float32(v[j]) * xv
		}
		s += d * p
		if t == qdQ41 || t == qdQ51 {
			ms += F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:])) * xs[b]
		}
	}
	return s + ms
}

func dotQ40Generic(w []byte, x []float32) float32 { return dotBlocksGeneric(qdQ40, w, x, nil) }

func dotQ41Generic(w []byte, x, xs []float32) float32 { return dotBlocksGeneric(qdQ41, w, x, xs) }

func dotQ50Generic(w []byte, x []float32) float32 { return dotBlocksGeneric(qdQ50, w, x, nil) }

func dotQ51Generic(w []byte, x, xs []float32) float32 { return dotBlocksGeneric(qdQ51, w, x, xs) }

func dotIQ4NLGeneric(w []byte, x []float32) float32 { return dotBlocksGeneric(qdIQ4NL, w, x, nil) }

func dotMXFP4Generic(w []byte, x []float32) float32 { return dotBlocksGeneric(qdMXFP4, w, x, nil) }

// dotIQ4XSGeneric is the twin of DotIQ4XS: each sub-block's levels dotted
// with the activations in value order, times its scale d·(ls−32).
func dotIQ4XSGeneric(w []byte, x []float32) float32 {
	var s float32
	var sc [8]float32
	for b := 0; b < len(x)/kBlockSize; b++ {
		blk := w[b*iq4XSBlockBytes : (b+1)*iq4XSBlockBytes]
		iq4XSScales(&sc, blk)
		for ib, f := range sc {
			qs, xb := blk[8+16*ib:24+16*ib], x[kBlockSize*b+32*ib:]
			var p float32
			for j, c := range qs {
				p += float32(iq4Levels8[c&15]) * xb[j]
			}
			for j, c := range qs {
				p += float32(iq4Levels8[c>>4]) * xb[16+j]
			}
			s += f * p
		}
	}
	return s
}
