package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Table lookups: packed 4-, 3- and 2-bit codes to float32 through a table
// of 16, 8 or 4 values (a codebook, such as TurboQuant's Lloyd–Max
// centroids). Each vector of 8 codes is spread over the dword lanes the
// way codeLoader does it (a broadcast of the group's bytes shifted right by
// bits*j in lane j), then looked up with VPERMPS, which reads the low 3 bits
// of each lane: the bits above the code are ignored (or, for 2-bit codes,
// made harmless by a table that holds its 4 values twice). A lookup moves
// the table's bits unchanged, so the assembly and Go paths agree bit for
// bit, NaN payloads included.

// lutKind describes one code width of the table lookups.
type lutKind struct {
	bits int
	// groupBytes is the number of source bytes holding 8 codes.
	groupBytes int
	// broadcast loads the codes of a group at m into every lane of v
	// (lut3 reads 4 bytes, one past the group).
	broadcast func(m Mem, v VecVirtual)
}

var (
	lut4 = lutKind{4, 4, func(m Mem, v VecVirtual) { VPBROADCASTD(m, v) }}
	lut3 = lutKind{3, 3, func(m Mem, v VecVirtual) { VPBROADCASTD(m, v) }}
	lut2 = lutKind{2, 2, func(m Mem, v VecVirtual) { VPBROADCASTW(m, v) }}
)

// lutToF32 writes lut<bits>ToF32AVX2. The 4- and 2-bit kernels convert
// len(dst)&^7 values and leave the tail to the Go caller; the 3-bit kernel
// converts all len(dst)/8 groups. Its 4-byte loads read one byte past a
// group, so the last group is assembled from a 2-byte and a 1-byte load
// instead: no kernel reads past len(src).
func lutToF32(k lutKind, shifts Mem) {
	name := fmt.Sprintf("lut%dToF32AVX2", k.bits)
	size := 1 << k.bits
	codeDoc := fmt.Sprintf("code_i = src[i/%d]>>(%d*(i%%%d))&%d", 8/k.bits, k.bits, 8/k.bits, size-1)
	srcLen := fmt.Sprintf("len(dst)&^7/%d", 8/k.bits)
	if k.bits == 3 {
		codeDoc = "code_i = (b0 | b1<<8 | b2<<16)>>(3*(i%8))&7 for the bytes b0, b1, b2 at src[i/8*3:]"
		srcLen = "len(dst)/8*3"
	}
	header(name, fmt.Sprintf("func(dst []float32, src []byte, table *[%d]float32)", size),
		name+" sets dst[i] = table[code_i] for i < len(dst)&^7, with",
		codeDoc+".",
		fmt.Sprintf("len(src) must be at least %s.", srcLen))
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHRQ(U8(3), n) // groups of 8
	tp := Load(Param("table"), GP64())
	sh := YMM()
	VMOVDQU(shifts, sh)

	// lookup converts the group whose codes are broadcast in v and stores
	// it at m.
	var lookup func(v VecVirtual, m Mem)
	switch k.bits {
	case 4:
		// VPERMPS looks the low 3 bits up in both halves of the table;
		// bit 3, shifted to the sign bit, picks one.
		lo, hi := YMM(), YMM()
		VMOVUPS(Mem{Base: tp}, lo)
		VMOVUPS(Mem{Base: tp, Disp: 32}, hi)
		lookup = func(v VecVirtual, m Mem) {
			sel, a, b := YMM(), YMM(), YMM()
			VPSLLD(U8(28), v, sel)
			VPERMPS(lo, v, a)
			VPERMPS(hi, v, b)
			VBLENDVPS(sel, b, a, a)
			VMOVUPS(a, m)
		}
	case 3:
		table := YMM()
		VMOVUPS(Mem{Base: tp}, table)
		lookup = func(v VecVirtual, m Mem) {
			VPERMPS(table, v, v)
			VMOVUPS(v, m)
		}
	case 2:
		// Lane j holds code j in bits 0-1 and the next code's low bit in
		// bit 2: the 4 values twice make bit 2 irrelevant.
		table := YMM()
		VBROADCASTF128(Mem{Base: tp}, table)
		lookup = func(v VecVirtual, m Mem) {
			VPERMPS(table, v, v)
			VMOVUPS(v, m)
		}
	}
	convert := func(groups int) {
		for g := 0; g < groups; g++ {
			v := YMM()
			k.broadcast(Mem{Base: src, Disp: g * k.groupBytes}, v)
			VPSRLVD(sh, v, v)
			lookup(v, Mem{Base: d, Disp: 32 * g})
		}
		ADDQ(U8(groups*k.groupBytes), src)
		ADDQ(U32(32*groups), d)
	}

	if k.bits == 3 {
		TESTQ(n, n)
		JZ(LabelRef(name + "_done"))
		DECQ(n) // every group but the last may read 4 bytes
	}
	Label(name + "_loop4")
	CMPQ(n, U8(4))
	JB(LabelRef(name + "_loop1"))
	convert(4)
	SUBQ(U8(4), n)
	JMP(LabelRef(name + "_loop4"))

	tail := name + "_done"
	if k.bits == 3 {
		tail = name + "_last"
	}
	Label(name + "_loop1")
	TESTQ(n, n)
	JZ(LabelRef(tail))
	convert(1)
	DECQ(n)
	JMP(LabelRef(name + "_loop1"))

	if k.bits == 3 {
		Label(name + "_last")
		w, b2 := GP32(), GP32()
		MOVWLZX(Mem{Base: src}, w)
		MOVBLZX(Mem{Base: src, Disp: 2}, b2)
		SHLL(U8(16), b2)
		ORL(b2, w)
		v := YMM()
		VMOVD(w, v.AsX())
		VPBROADCASTD(v.AsX(), v)
		VPSRLVD(sh, v, v)
		lookup(v, Mem{Base: d})
	}
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
