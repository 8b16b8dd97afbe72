package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The four-row k-quant dot products with Q8_K activations
// (simd.DotQ4KQ8KRows): four q4_K weight rows, stride bytes apart, dotted
// with one Q8_K activation row. Per super-block each row forms the same
// exact integer sums S and M as dotQ4KQ8K512 (integer sums are exact in
// any order) and each row's float32 sum takes the same two rounded steps,
// s += (d·dq)·S and s −= (dmin·dq)·M, one row per lane of an XMM: so
// every row's result is the one-row kernels' (and the twin's) bits. The
// four rows share each activation load and the Q8_K block's sums; the
// scales and mins of all four rows are unpacked at once in vector
// registers (one 128-bit lane a row), and the sums of the four rows are
// reduced together.

// q8kDwordTable returns a 64-byte table of 16 dwords v(i), made once per
// name.
func q8kDwordTable(name string, v func(i int) uint32) Mem {
	if m, ok := q8kConsts[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	q8kConsts[name] = m
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(v(i)))
	}
	return m
}

// q8kLaneSums leaves in dword 4·r of z the sum of the 4 dwords of its
// 128-bit lane r, and returns an XMM of those 4 sums, lane r in dword r.
func q8kLaneSums(z VecVirtual, perm VecVirtual) Register {
	t := ZMM()
	VPSHUFD(U8(0x4e), z, t)
	VPADDD(t, z, z)
	VPSHUFD(U8(0xb1), z, t)
	VPADDD(t, z, z)
	r := ZMM()
	VPERMD(z, perm, r)
	return r.AsX()
}

// dotQ4KQ8KX4 writes dotQ4KQ8KX4AVX512 or, with vnni, dotQ4KQ8KX4VNNI.
func dotQ4KQ8KX4(vnni bool) {
	name := "dotQ4KQ8KX4AVX512"
	if vnni {
		name = "dotQ4KQ8KX4VNNI"
	}
	wr, _, q, nb := q8kRowsArgs(name, "q4_K")
	m := ZMM()
	VMOVDQU64(q8kSplat("q8knib", 0x0f), m)
	// idx[n] (n = 2p+i: groups g = 4p+i and g+2) for the row at words 0..15
	// of a ZMM of two rows' scales and mins, idx[4+n] for the row at 16..31.
	idx := make([]VecVirtual, 8)
	for n := range idx {
		idx[n] = ZMM()
		VMOVDQU64(q8kWordTable(fmt.Sprintf("q8kx4idx%d", n), 32, func(i int) int {
			return []int{0, 1, 4, 5}[n%4] + 2*(i/16) + 16*(n/4)
		}), idx[n])
	}
	perm := ZMM()
	VMOVDQU64(q8kDwordTable("q8kx4lanes", func(i int) uint32 { return uint32(4 * (i % 4)) }), perm)
	s := q8kRowsLoop(name, nb)
	q8kPrefetchRows(wr, nil, 3, true)
	// Lane r of raw: row r's d, dmin and 12 bytes of packed scales and mins.
	raw := ZMM()
	VMOVDQU64(Mem{Base: wr[0]}, raw.AsX())
	for r := 1; r < 4; r++ {
		VINSERTI32X4(U8(r), Mem{Base: wr[r]}, raw, raw)
	}
	// Per lane, dwords a, b, c = bytes 4..15 (as q8kUnpackScales):
	// scales 0..3 a&0x3f, 4..7 c&0x0f | (a>>2)&0x30, mins 0..3 b&0x3f,
	// 4..7 (c>>4)&0x0f | (b>>2)&0x30.
	x, y := ZMM(), ZMM()
	VPSHUFD(U8(0xed), raw, x) // a c b c
	VPSRLVD(q8kDwordTable("q8kx4shr", func(i int) uint32 { return 4 * uint32(i%4/3) }), x, x)
	VPANDD(q8kDwordTable("q8kx4mx", func(i int) uint32 { return []uint32{0x3f3f3f3f, 0x0f0f0f0f}[i%2] }), x, x)
	VPSHUFD(U8(0xa5), raw, y) // a a b b
	VPSRLD(U8(2), y, y)
	VPANDD(q8kDwordTable("q8kx4my", func(i int) uint32 { return 0x30303030 * uint32(i%2) }), y, y)
	VPORD(y, x, x)
	sm := []VecVirtual{ZMM(), ZMM()} // words: scales, mins of rows 0, 1 | 2, 3
	VPMOVZXBW(x.AsY(), sm[0])
	hi := YMM()
	VEXTRACTI64X4(U8(1), x, hi)
	VPMOVZXBW(hi, sm[1])
	// d·dq for the 4 rows, then dmin·dq.
	dd := ZMM()
	VPERMD(raw, perm, dd)
	VPSHUFB(q8kBytesConst("q8kx4dd", 16, func(i int) byte {
		return byte([]int{0, 4, 8, 12, 2, 6, 10, 14}[i/2] + i%2)
	}), dd.AsX(), dd.AsX())
	df := YMM()
	VCVTPH2PS(dd.AsX(), df)
	yd := YMM()
	VBROADCASTSS(Mem{Base: q}, yd)
	VMULPS(yd, df, df)
	// The Q8_K sums in pairs (bsum_2g + bsum_2g+1, which fit int16), in
	// every 128-bit lane; their products with the words of sm take the
	// mins' sums M from the upper lane of each row.
	bp := ZMM()
	VMOVDQU64(Mem{Base: q, Disp: q8kSums}, bp.AsY())
	VPMADDWD(q8kWordTable("q8kones", 16, func(int) int { return 1 }), bp.AsY(), bp.AsY())
	VPMOVDW(bp.AsY(), bp.AsX())
	VSHUFI64X2(U8(0), bp, bp, bp)
	mz := []VecVirtual{ZMM(), ZMM()}
	for h := range mz {
		VPMADDWD(bp, sm[h], mz[h])
	}
	mins := ZMM()
	VSHUFI64X2(U8(0xdd), mz[1], mz[0], mins) // lane r: row r's mins products
	// The codes: activation groups g (low half) and g+2 (high half), shared.
	act := make([]VecVirtual, 4)
	for n := range act {
		g := 4*(n/2) + n%2
		act[n] = ZMM()
		VMOVDQU64(Mem{Base: q, Disp: q8kQs + 32*g}, act[n].AsY())
		VINSERTI64X4(U8(1), Mem{Base: q, Disp: q8kQs + 32*(g+2)}, act[n], act[n])
	}
	acc := make([]VecVirtual, 4)
	for r := range acc {
		acc[r] = ZMM()
		VPXORD(acc[r], acc[r], acc[r])
		for p := 0; p < 2; p++ {
			v := ZMM()
			VMOVDQU64(Mem{Base: wr[r], Disp: 16 + 64*p}, v)
			for i := 0; i < 2; i++ {
				n := 2*p + i
				code := q8kNibbles(v, m, i == 1, true)
				pr, sc := ZMM(), ZMM()
				VPMADDUBSW(act[n], code, pr)
				VPERMW(sm[r/2], idx[n+4*(r%2)], sc)
				q8kScaleMAC(sc, pr, acc[r], vnni)
			}
		}
	}
	S := q8kReduceRows(acc, perm)
	M := q8kLaneSums(mins, perm)
	VCVTDQ2PS(S, S)
	VMULPS(df.AsX(), S, S)
	VADDPS(S, s, s)
	dm := XMM()
	VEXTRACTF32X4(U8(1), df, dm)
	VCVTDQ2PS(M, M)
	VMULPS(dm, M, M)
	VSUBPS(M, s, s)
	q8kRowsNext(name, wr, q, nb, 144, s)
}

// q8kRowsArgs writes the header of a four-row kernel over kind
// super-blocks and loads its arguments: the four row pointers (rowPtrs),
// their stride, the Q8_K row q and the super-block count nb.
func q8kRowsArgs(name, kind string) (wr []Register, stride, q, nb Register) {
	header(name, "func(w []byte, stride int, q []byte, nb int, dst *[4]float32)",
		name+" sets dst[r] to the dot product of the nb "+kind+" super-blocks at",
		"w[r·stride:] with the nb Q8_K blocks at q, r = 0..3, each as simd's",
		"twin computes it, bit for bit.")
	w0 := Load(Param("w").Base(), GP64())
	stride = Load(Param("stride"), GP64())
	q = Load(Param("q").Base(), GP64())
	nb = Load(Param("nb"), GP64())
	return rowPtrs(w0, stride, 4), stride, q, nb
}

// q8kRowsLoop starts a four-row kernel's loop over its nb super-blocks
// (countLoop) and returns the four rows' float32 sums s, zeroed before it.
func q8kRowsLoop(name string, nb Register) VecVirtual {
	s := XMM()
	VXORPS(s, s, s)

	countLoop(name, nb)
	return s
}

// q8kRowsNext ends the loop q8kRowsLoop started: each row of wr moves on
// by a super-block of blockBytes, q by a Q8_K block, nb counts down; after
// the loop the kernel stores the four sums of s to dst.
func q8kRowsNext(name string, wr []Register, q, nb Register, blockBytes int, s VecVirtual) {
	for _, w := range wr {
		ADDQ(U32(uint32(blockBytes)), w)
	}
	ADDQ(U32(q8kBytes), q)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	dst := Load(Param("dst"), GP64())
	VMOVUPS(s, Mem{Base: dst})
	VZEROUPPER()
	RET()
}

// q8kPrefetchRows prefetches the first lines of a super-block of each row
// at wr. With fixed, at the one-row kernels' distances (prefetchLine);
// else the same super-block of the next four rows (ahead bytes on) into L1
// and of the four after them into L2. For rows shorter than the fixed
// distances those land mostly on the rows a call is reading already: in
// BenchmarkKQ8KRows (Zen 4, DRAM, 8 super-blocks a row) the q6_K kernel
// with them ran at 0.82–0.85× the one-row kernel's speed (1.24× in cache),
// with the group distances at 1.19–1.23×; the q4_K kernel ran at 1.47–1.53×
// with the fixed distances and 1.38–1.44× with the group ones, so it keeps
// the fixed.
func q8kPrefetchRows(wr []Register, ahead Register, lines int, fixed bool) {
	for r := range wr {
		if fixed {
			prefetchLines(wr[r], lines)
			continue
		}
		for l := 0; l < lines; l++ {
			PREFETCHT0(Mem{Base: wr[r], Index: ahead, Scale: 1, Disp: 64 * l})
			PREFETCHT1(Mem{Base: wr[r], Index: ahead, Scale: 2, Disp: 64 * l})
		}
	}
}

// q8kReduceRows returns an XMM whose dword r is the sum of the 16 int32
// lanes of acc[r], r = 0..3.
func q8kReduceRows(acc []VecVirtual, perm VecVirtual) Register {
	pa, pb := ZMM(), ZMM()
	for h := 0; h < 2; h++ {
		a, b := ZMM(), ZMM()
		VSHUFI64X2(U8(0x44), acc[2*h+1], acc[2*h], a) // lanes 0, 1 of each
		VSHUFI64X2(U8(0xee), acc[2*h+1], acc[2*h], b) // lanes 2, 3
		VPADDD(b, a, []VecVirtual{pa, pb}[h])
	}
	sz, t := ZMM(), ZMM()
	VSHUFI64X2(U8(0x88), pb, pa, sz)
	VSHUFI64X2(U8(0xdd), pb, pa, t)
	VPADDD(t, sz, sz) // lane r: 4 dwords of row r's sum
	return q8kLaneSums(sz, perm)
}

// dotQ6KQ8KX4 writes dotQ6KQ8KX4AVX512 or, with vnni, dotQ6KQ8KX4VNNI:
// dotQ6KQ8K512's arithmetic on four q6_K rows, stride bytes apart, sharing
// the activation loads and the reduction; each row's offset term
// −32·Σ_g scale_g·bsum_g starts its accumulator (one VPMADDWD of the
// words 32·scale_g and −bsum_g, both within int16), and each row's
// float32 sum takes the one-row kernels' step s += (d·dq)·S in its lane.
func dotQ6KQ8KX4(vnni bool) {
	name := "dotQ6KQ8KX4AVX512"
	if vnni {
		name = "dotQ6KQ8KX4VNNI"
	}
	wr, stride, q, nb := q8kRowsArgs(name, "q6_K")
	ahead := GP64() // the next call's rows: 4·stride bytes on
	MOVQ(stride, ahead)
	SHLQ(U8(2), ahead)
	m, hm, shl, shr, idx := q8kQ6Consts512()
	perm := ZMM()
	VMOVDQU64(q8kDwordTable("q8kx4lanes", func(i int) uint32 { return uint32(4 * (i % 4)) }), perm)
	s := q8kRowsLoop(name, nb)
	q8kPrefetchRows(wr, ahead, 4, false)
	bs := YMM() // −bsum_g (fits int16)
	VPXORD(bs, bs, bs)
	VPSUBW(Mem{Base: q, Disp: q8kSums}, bs, bs)
	act := make([]VecVirtual, 4)
	for n := range act {
		act[n] = ZMM()
		VMOVDQU64(Mem{Base: q, Disp: q8kQs + 64*n}, act[n])
	}
	acc := make([]VecVirtual, 4)
	for r := range acc {
		sc16, sc32 := ZMM(), YMM()
		VPMOVSXBW(Mem{Base: wr[r], Disp: 192}, sc16.AsY())
		VPSLLW(U8(5), sc16.AsY(), sc32) // 32·scale_g fits int16
		acc[r] = ZMM()
		VPMADDWD(bs, sc32, acc[r].AsY()) // the upper half zeroed
		for h := 0; h < 2; h++ {
			qh, v := ZMM(), ZMM()
			VBROADCASTI64X4(Mem{Base: wr[r], Disp: 128 + 32*h}, qh)
			VMOVDQU64(Mem{Base: wr[r], Disp: 64 * h}, v)
			for i := 0; i < 2; i++ {
				code := q8kQ6Codes512(v, qh, i, m, hm, shl, shr)
				n := 2*h + i
				pr, sc := ZMM(), ZMM()
				VPMADDUBSW(act[n], code, pr)
				VPERMW(sc16, idx[n], sc)
				q8kScaleMAC(sc, pr, acc[r], vnni)
			}
		}
	}
	S := q8kReduceRows(acc, perm)
	d := XMM()
	VPXORD(d, d, d)
	for r := 0; r < 4; r++ {
		VPINSRW(U8(r), Mem{Base: wr[r], Disp: 208}, d, d)
	}
	VCVTPH2PS(d, d)
	yd := XMM()
	VBROADCASTSS(Mem{Base: q}, yd)
	VMULPS(yd, d, d)
	VCVTDQ2PS(S, S)
	VMULPS(d, S, S)
	VADDPS(S, s, s)
	q8kRowsNext(name, wr, q, nb, 210, s)
}
