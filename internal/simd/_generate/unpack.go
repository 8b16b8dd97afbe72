package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Unpacking kernels: packed integer codes to float32 through an affine map.
// The map is computed as a multiply, rounded, then an add, rounded (VMULPS,
// VADDPS; no fused multiply-add), exactly as the Go twins compute it, so the
// assembly and Go paths agree bit for bit.

// codeKind describes one packing of unsigned or signed integer codes.
type codeKind struct {
	name   string // function name prefix: "u8", "i8", "u4", "u2"
	bits   int    // bits per code: 8, 4 or 2
	signed bool   // int8 codes (bits == 8 only)
}

var (
	codeU8 = codeKind{"u8", 8, false}
	codeI8 = codeKind{"i8", 8, true}
	codeU4 = codeKind{"u4", 4, false}
	codeU2 = codeKind{"u2", 2, false}
)

// groupBytes is the number of source bytes holding a group of 8 codes.
func (k codeKind) groupBytes() int { return k.bits }

// codeShifts returns the static table of per-lane right shifts that moves
// code j of a group to the bottom of lane j (bits*j), for 4- and 2-bit
// codes.
func codeShifts(bits int) Mem {
	m := GLOBL(fmt.Sprintf("u%dshifts", bits), RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		DATA(4*j, U32(uint32(bits*j)))
	}
	return m
}

// codeLoader prepares the constants a codeKind needs and returns a function
// that loads the group of 8 codes at m into int32 lanes of a new YMM.
//
// 4- and 2-bit groups (4 and 2 bytes) are broadcast to every lane, shifted
// right by bits*j in lane j and masked: code j of the group sits at bits
// bits*j of the little-endian group, which is the order of the nibbles
// (low first) and of the 2-bit fields within each byte.
func codeLoader(k codeKind, shifts map[int]Mem) func(m Mem) VecVirtual {
	switch k.bits {
	case 8:
		return func(m Mem) VecVirtual {
			v := YMM()
			if k.signed {
				VPMOVSXBD(m, v)
			} else {
				VPMOVZXBD(m, v)
			}
			return v
		}
	case 4, 2:
		sh := YMM()
		VMOVDQU(shifts[k.bits], sh)
		mask := broadcastConst(1<<k.bits - 1)
		return func(m Mem) VecVirtual {
			v := YMM()
			if k.bits == 4 {
				VPBROADCASTD(m, v)
			} else {
				VPBROADCASTW(m, v)
			}
			VPSRLVD(sh, v, v)
			VPAND(mask, v, v)
			return v
		}
	}
	panic("codeLoader")
}

// broadcastParam loads the float32 parameter name into every lane of a YMM.
func broadcastParam(name string) VecVirtual { return broadcastParamTo(name, YMM()) }

// broadcastParamTo loads the float32 parameter name into every lane of v
// (a YMM or a ZMM) and returns v.
func broadcastParamTo(name string, v VecVirtual) VecVirtual {
	p, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	VBROADCASTSS(p.Addr, v)
	return v
}

// unpack writes the kernel <kind>ToF32[Vec]AVX2. With vec false it computes
// dst[i] = code_i*scale + bias (no bias for signed codes); with vec true
// dst[i] = code_i*s[i] + z[i].
func unpack(k codeKind, vec bool, shifts map[int]Mem) {
	if k.bits == 4 {
		unpackU4(vec)
		return
	}
	name := k.name + "ToF32AVX2"
	perByte := 8 / k.bits
	var sig, what string
	switch {
	case vec:
		name = k.name + "ToF32VecAVX2"
		sig = "func(dst []float32, src []byte, s, z []float32)"
		what = "code_i*s[i] + z[i]"
	case k.signed:
		sig = "func(dst []float32, src []byte, scale float32)"
		what = "code_i*scale"
	default:
		sig = "func(dst []float32, src []byte, scale, bias float32)"
		what = "code_i*scale + bias"
	}
	codeDoc := "code_i = src[i]"
	switch {
	case k.signed:
		codeDoc = "code_i = int8(src[i])"
	case k.bits < 8:
		codeDoc = fmt.Sprintf("code_i = src[i/%d]>>(%d*(i%%%d))&%d", perByte, k.bits, perByte, 1<<k.bits-1)
	}
	rounding := ", rounding the product, then the sum,"
	if k.signed {
		rounding = ""
	}
	doc := []string{
		fmt.Sprintf("%s sets dst[i] = %s%s", name, what, rounding),
		fmt.Sprintf("with %s, for i < len(dst)&^7.", codeDoc),
		fmt.Sprintf("len(src) must be at least len(dst)&^7/%d.", perByte),
	}
	if perByte == 1 {
		doc[2] = "len(src) must be at least len(dst)&^7."
	}
	if vec {
		doc = append(doc, "len(s) and len(z) must be at least len(dst)&^7.")
	}
	header(name, sig, doc...)
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHRQ(U8(3), n) // groups of 8
	var sp, zp Register
	var scale, bias VecVirtual
	if vec {
		sp = Load(Param("s").Base(), GP64())
		zp = Load(Param("z").Base(), GP64())
	} else {
		scale = broadcastParam("scale")
		if !k.signed {
			bias = broadcastParam("bias")
		}
	}
	load := codeLoader(k, shifts)
	a := affine{vec: vec, sp: sp, zp: zp, scale: scale, bias: bias}
	body := func(vecs int) { convertCodes(k, load, d, src, a, vecs) }
	advance := func(vecs int) { advanceCodes(k, d, src, a, vecs) }

	Label(name + "_loop4")
	CMPQ(n, U8(4))
	JB(LabelRef(name + "_loop1"))
	body(4)
	advance(4)
	SUBQ(U8(4), n)
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_loop1")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	body(1)
	advance(1)
	DECQ(n)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// affine is the map an unpacking kernel applies to its codes: the
// broadcast scale and bias (bias nil: none), or with vec set the per-lane
// scales and zeros at the pointers sp and zp.
type affine struct {
	vec         bool
	sp, zp      Register
	scale, bias VecVirtual
}

// convertCodes converts vecs vectors of 8 codes at src to float32 through
// a and stores them at d, each step for all the vectors before the next.
func convertCodes(k codeKind, load func(Mem) VecVirtual, d, src Register, a affine, vecs int) {
	v := make([]VecVirtual, vecs)
	for g := range v {
		v[g] = load(Mem{Base: src, Disp: g * k.groupBytes()})
	}
	for g := range v {
		VCVTDQ2PS(v[g], v[g])
	}
	for g := range v {
		if a.vec {
			VMULPS(Mem{Base: a.sp, Disp: 32 * g}, v[g], v[g])
		} else {
			VMULPS(a.scale, v[g], v[g])
		}
	}
	for g := range v {
		if a.vec {
			VADDPS(Mem{Base: a.zp, Disp: 32 * g}, v[g], v[g])
		} else if a.bias != nil {
			VADDPS(a.bias, v[g], v[g])
		}
	}
	for g := range v {
		VMOVUPS(v[g], Mem{Base: d, Disp: 32 * g})
	}
}

// advanceCodes moves d, src (and a's per-lane pointers) past vecs vectors
// of 8 codes.
func advanceCodes(k codeKind, d, src Register, a affine, vecs int) {
	ADDQ(U32(32*vecs), d)
	ADDQ(U32(vecs*k.groupBytes()), src)
	if a.vec {
		ADDQ(U32(32*vecs), a.sp)
		ADDQ(U32(32*vecs), a.zp)
	}
}

// unpackGroups writes the kernel <kind>ToF32GroupsAVX2: dst[i] =
// code_i*scale[i/group] + bias[i/group] for a group size that is a multiple
// of 8. It runs over the groups; groups of 32 and 64 codes (4 and 8
// vectors) take a loop with the group's conversion written out, other sizes
// convert 64, 32 and then 8 codes at a time. Each group's scale and bias are
// broadcast once; for 2-bit codes the group's four possible values are
// computed once instead (the same multiply, then add), and each code looks
// its value up with VPERMPS.
func unpackGroups(k codeKind, shifts map[int]Mem, u2codes Mem) {
	if k.bits == 4 {
		unpackU4Groups()
		return
	}
	name := k.name + "ToF32GroupsAVX2"
	perByte := 8 / k.bits
	codeDoc, srcLen := "code_i = src[i]", "len(scale)*group"
	if k.bits < 8 {
		codeDoc = fmt.Sprintf("code_i = src[i/%d]>>(%d*(i%%%d))&%d", perByte, k.bits, perByte, 1<<k.bits-1)
		srcLen += fmt.Sprintf("/%d", perByte)
	}
	header(name, "func(dst []float32, src []byte, group int, scale, bias []float32)",
		name+" sets dst[i] = code_i*scale[i/group] + bias[i/group],",
		"rounding the product, then the sum, with "+codeDoc+",",
		"for the len(scale) groups of group values. group must be a positive multiple",
		"of 8; len(dst) must be at least len(scale)*group, len(bias) at least",
		"len(scale) and len(src) at least "+srcLen+".")
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	vecs := Load(Param("group"), GP64())
	SHRQ(U8(3), vecs) // vectors of 8 codes per group
	ng := Load(Param("scale").Len(), GP64())
	sp := Load(Param("scale").Base(), GP64())
	bp := Load(Param("bias").Base(), GP64())

	var load func(Mem) VecVirtual
	var sh, codes VecVirtual
	lookup := k.bits == 2
	if lookup {
		// Lane j of a broadcast group of 8 codes, shifted right by 2j, holds
		// code j in bits 0-1; VPERMPS reads bits 0-2, so the table holds the
		// four values twice and bit 2 (the next code's) does not matter.
		sh = YMM()
		VMOVDQU(shifts[2], sh)
		codes = YMM()
		VMOVUPS(u2codes, codes)
	} else {
		load = codeLoader(k, shifts)
	}

	// startGroup prepares the map of the group at sp and bp; convert
	// converts n vectors of 8 codes through it and moves d and src past
	// them.
	var a affine
	var table VecVirtual
	startGroup := func() {
		if lookup {
			table = YMM()
			VBROADCASTSS(Mem{Base: sp}, table)
			VMULPS(codes, table, table)
			bias := YMM()
			VBROADCASTSS(Mem{Base: bp}, bias)
			VADDPS(bias, table, table)
			return
		}
		a = affine{scale: YMM(), bias: YMM()}
		VBROADCASTSS(Mem{Base: sp}, a.scale)
		VBROADCASTSS(Mem{Base: bp}, a.bias)
	}
	convert := func(n int) {
		if lookup {
			v := make([]VecVirtual, n)
			for g := range v {
				v[g] = YMM()
				VPBROADCASTW(Mem{Base: src, Disp: 2 * g}, v[g])
				VPSRLVD(sh, v[g], v[g])
				VPERMPS(table, v[g], v[g])
			}
			for g := range v {
				VMOVUPS(v[g], Mem{Base: d, Disp: 32 * g})
			}
		} else {
			convertCodes(k, load, d, src, a, n)
		}
		advanceCodes(k, d, src, affine{}, n)
	}
	nextGroup := func(loop string) { nextGroupLoop(sp, bp, ng, loop) }
	groupDispatch(name, ng, vecs, []int{4, 8})

	// Any multiple of 8: blocks of 8 vectors, then one of 4, then single
	// vectors.
	eights, four := GP64(), GP64()
	MOVQ(vecs, eights)
	SHRQ(U8(3), eights)
	MOVQ(vecs, four)
	ANDQ(U8(4), four)
	ANDQ(U8(3), vecs)
	Label(name + "_group")
	startGroup()
	n := GP64()
	MOVQ(eights, n)
	TESTQ(n, n)
	JZ(LabelRef(name + "_four"))
	Label(name + "_loop8")
	convert(8)
	DECQ(n)
	JNZ(LabelRef(name + "_loop8"))
	Label(name + "_four")
	TESTQ(four, four)
	JZ(LabelRef(name + "_ones"))
	convert(4)
	Label(name + "_ones")
	MOVQ(vecs, n)
	TESTQ(n, n)
	JZ(LabelRef(name + "_next"))
	Label(name + "_loop1")
	convert(1)
	DECQ(n)
	JNZ(LabelRef(name + "_loop1"))
	Label(name + "_next")
	nextGroup(name + "_group")
	JMP(LabelRef(name + "_done"))

	// Groups of 4 and 8 vectors, written out.
	for _, n := range []int{4, 8} {
		loop := fmt.Sprintf("%s_group%d", name, n)
		Label(loop)
		startGroup()
		convert(n)
		nextGroup(loop)
		if n == 4 {
			JMP(LabelRef(name + "_done"))
		}
	}

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// The 4-bit unpackers read whole blocks of 32 codes (16 bytes; byte k holds
// code k in its low nibble and code k+16 in its high nibble, as GGML's
// Q4_0): each half of 8 bytes is zero-extended to int32 lanes once, its low
// nibbles being codes 8h..8h+7 and its high nibbles codes 16+8h..16+8h+7.
// The caller converts a last, shorter block.

// u4Half returns the codes of block half h of the block at m as int32
// lanes: lo holds codes 8h..8h+7, hi codes 16+8h..16+8h+7.
func u4Half(m Mem, h int, mask VecVirtual) (lo, hi VecVirtual) {
	x := YMM()
	VPMOVZXBD(m.Offset(8*h), x)
	lo, hi = YMM(), YMM()
	VPAND(mask, x, lo)
	VPSRLD(U8(4), x, hi)
	return lo, hi
}

// convertU4Blocks converts blocks blocks of 32 codes at src through a and
// stores them at d; with a.vec the per-lane scales and zeros are read at
// the offsets of the values.
func convertU4Blocks(mask VecVirtual, d, src Register, a affine, blocks int) {
	for b := 0; b < blocks; b++ {
		v := make([]VecVirtual, 4) // codes 0-7, 8-15, 16-23, 24-31
		for h := 0; h < 2; h++ {
			v[h], v[2+h] = u4Half(Mem{Base: src, Disp: 16 * b}, h, mask)
		}
		for p, y := range v {
			off := 32 * (4*b + p)
			VCVTDQ2PS(y, y)
			if a.vec {
				VMULPS(Mem{Base: a.sp, Disp: off}, y, y)
				VADDPS(Mem{Base: a.zp, Disp: off}, y, y)
			} else {
				VMULPS(a.scale, y, y)
				VADDPS(a.bias, y, y)
			}
			VMOVUPS(y, Mem{Base: d, Disp: off})
		}
	}
	ADDQ(U32(128*blocks), d)
	ADDQ(U32(16*blocks), src)
	if a.vec {
		ADDQ(U32(128*blocks), a.sp)
		ADDQ(U32(128*blocks), a.zp)
	}
}

// unpackU4 writes u4ToF32AVX2 (vec false) or u4ToF32VecAVX2.
func unpackU4(vec bool) {
	name, sig, what := "u4ToF32AVX2", "func(dst []float32, src []byte, scale, bias float32)", "code_i*scale + bias"
	if vec {
		name, sig, what = "u4ToF32VecAVX2", "func(dst []float32, src []byte, s, z []float32)", "code_i*s[i] + z[i]"
	}
	doc := []string{
		fmt.Sprintf("%s sets dst[i] = %s, rounding the product, then the sum,", name, what),
		"for i < len(dst)&^31, code_i being 4-bit code i of the blocks of 32 at src",
		"(byte k of a block holds codes k and k+16, low nibble first).",
		"len(src) must be at least len(dst)&^31/2.",
	}
	if vec {
		doc = append(doc, "len(s) and len(z) must be at least len(dst)&^31.")
	}
	header(name, sig, doc...)
	d := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("dst").Len(), GP64())
	SHRQ(U8(5), n) // blocks of 32
	a := affine{vec: vec}
	if vec {
		a.sp = Load(Param("s").Base(), GP64())
		a.zp = Load(Param("z").Base(), GP64())
	} else {
		a.scale = broadcastParam("scale")
		a.bias = broadcastParam("bias")
	}
	mask := broadcastConst(15)

	Label(name + "_loop2")
	CMPQ(n, U8(2))
	JB(LabelRef(name + "_loop1"))
	convertU4Blocks(mask, d, src, a, 2)
	SUBQ(U8(2), n)
	JMP(LabelRef(name + "_loop2"))

	Label(name + "_loop1")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	convertU4Blocks(mask, d, src, a, 1)

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// u4GroupsStart starts u4ToF32Groups<AVX2|AVX512> (named name): its header,
// then dst's and src's bases, the blocks of 32 codes per group, the number
// of groups and the scale and bias bases.
func u4GroupsStart(name string) (d, src, blocks, ng, sp, bp Register) {
	header(name, "func(dst []float32, src []byte, group int, scale, bias []float32)",
		name+" sets dst[i] = code_i*scale[i/group] + bias[i/group],",
		"rounding the product, then the sum, code_i being 4-bit code i of the blocks",
		"of 32 at src (byte k of a block holds codes k and k+16, low nibble first),",
		"for the len(scale) groups of group values. group must be a positive multiple",
		"of 32; len(dst) must be at least len(scale)*group, len(bias) at least",
		"len(scale) and len(src) at least len(scale)*group/2.")
	d = Load(Param("dst").Base(), GP64())
	src = Load(Param("src").Base(), GP64())
	blocks = Load(Param("group"), GP64())
	SHRQ(U8(5), blocks) // blocks of 32 codes per group
	ng = Load(Param("scale").Len(), GP64())
	sp = Load(Param("scale").Base(), GP64())
	bp = Load(Param("bias").Base(), GP64())
	return d, src, blocks, ng, sp, bp
}

// unpackU4Groups writes u4ToF32GroupsAVX2 for groups of whole blocks:
// each group's scale and bias are broadcast once; groups of 32 and 64
// codes take a loop with the group's conversion written out.
func unpackU4Groups() {
	name := "u4ToF32GroupsAVX2"
	d, src, blocks, ng, sp, bp := u4GroupsStart(name)
	mask := broadcastConst(15)

	var a affine
	startGroup := func() {
		a = affine{scale: YMM(), bias: YMM()}
		VBROADCASTSS(Mem{Base: sp}, a.scale)
		VBROADCASTSS(Mem{Base: bp}, a.bias)
	}
	nextGroup := func(loop string) { nextGroupLoop(sp, bp, ng, loop) }
	groupDispatch(name, ng, blocks, []int{1, 2})

	// Any number of blocks, one at a time.
	Label(name + "_group")
	startGroup()
	n := GP64()
	MOVQ(blocks, n)
	Label(name + "_loop1")
	convertU4Blocks(mask, d, src, a, 1)
	DECQ(n)
	JNZ(LabelRef(name + "_loop1"))
	nextGroup(name + "_group")
	JMP(LabelRef(name + "_done"))

	// Groups of 1 and 2 blocks, written out.
	for _, n := range []int{1, 2} {
		loop := fmt.Sprintf("%s_group%d", name, n)
		Label(loop)
		startGroup()
		convertU4Blocks(mask, d, src, a, n)
		nextGroup(loop)
		if n == 1 {
			JMP(LabelRef(name + "_done"))
		}
	}

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// groupDispatch starts a grouped unpacker: it jumps to <name>_done when
// there are no groups (ng is 0) and to <name>_group<n> when the group size
// count (in vectors or blocks) is one of sizes, whose loops are written
// out; otherwise it falls through to the general loop.
func groupDispatch(name string, ng, count Register, sizes []int) {
	TESTQ(ng, ng)
	JZ(LabelRef(name + "_done"))
	for _, n := range sizes {
		CMPQ(count, U8(n))
		JE(LabelRef(fmt.Sprintf("%s_group%d", name, n)))
	}
}

// nextGroupLoop moves the scale and bias pointers sp and bp to the next
// group and loops to loop while groups are left (ng counts them down).
func nextGroupLoop(sp, bp, ng Register, loop string) {
	ADDQ(U8(4), sp)
	ADDQ(U8(4), bp)
	DECQ(ng)
	JNZ(LabelRef(loop))
}

// u2Codes returns the static table of the 2-bit codes 0 to 3, twice, as
// float32.
func u2Codes() Mem {
	m := GLOBL("u2codes", RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		DATA(4*j, U32(math.Float32bits(float32(j%4))))
	}
	return m
}

// q80ToF32: dst = d*code over whole Q8_0 blocks.
func q80ToF32() {
	name := "q80ToF32AVX2"
	d, src, nb := blockDecoder(name,
		name+" sets dst[32b+i] = d_b*code_b,i for the len(dst)/32 Q8_0 blocks at",
		"src (34 bytes each: binary16 d, then 32 int8 codes).",
		"len(src) must be at least len(dst)/32*34.")

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	blk := Mem{Base: src}
	scale := q80Scale(blk)
	for k := 0; k < 4; k++ {
		c := q80Codes(blk.Offset(2 + 8*k))
		VMULPS(scale, c, c)
		VMOVUPS(c, Mem{Base: d, Disp: 32 * k})
	}
	ADDQ(U8(34), src)
	ADDQ(U32(128), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// blockDecoder starts a GGML block decoder func(dst []float32, src
// []byte) named name: its header with doc, then dst's and src's bases and
// the number of whole blocks of 32 values in dst.
func blockDecoder(name string, doc ...string) (d, src, nb Register) {
	header(name, "func(dst []float32, src []byte)", doc...)
	d = Load(Param("dst").Base(), GP64())
	src = Load(Param("src").Base(), GP64())
	nb = Load(Param("dst").Len(), GP64())
	SHRQ(U8(5), nb)
	return d, src, nb
}

// q4Layout returns the name (with suffix, "AVX2" or "AVX512"), block size,
// offset of the code bytes and documentation of the Q4_0 (q41 false) or
// Q4_1 decoder.
func q4Layout(q41 bool, suffix string) (name string, blockBytes, codes int, doc []string) {
	if q41 {
		name = "q41ToF32" + suffix
		return name, 20, 4, []string{
			name + " sets dst[32b+j] = d_b*lo_j + m_b and dst[32b+16+j] = d_b*hi_j + m_b,",
			"j < 16, rounding the product, then the sum, for the len(dst)/32 Q4_1 blocks",
			"at src (20 bytes each: binary16 d and m, then 16 bytes whose low and high",
			"nibbles are lo_j and hi_j). len(src) must be at least len(dst)/32*20.",
		}
	}
	name = "q40ToF32" + suffix
	return name, 18, 2, []string{
		name + " sets dst[32b+j] = d_b*(lo_j-8) and dst[32b+16+j] = d_b*(hi_j-8), j < 16,",
		"for the len(dst)/32 Q4_0 blocks at src (18 bytes each: binary16 d, then 16",
		"bytes whose low and high nibbles are lo_j and hi_j).",
		"len(src) must be at least len(dst)/32*18.",
	}
}

// q4ToF32 writes the Q4_0 (minus false) or Q4_1 (minus true) block
// decoder. Each block's 16 code bytes are read as two groups of 8, each
// zero-extended once to int32 lanes: the low nibbles are values 8g..8g+7,
// the high nibbles values 16+8g..16+8g+7.
func q4ToF32(q41 bool) {
	name, blockBytes, codes, doc := q4Layout(q41, "AVX2")
	d, src, nb := blockDecoder(name, doc...)
	mask := broadcastConst(15)
	var eight VecVirtual
	if !q41 {
		eight = broadcastConst(8)
	}

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	blk := Mem{Base: src}
	scale := q80Scale(blk)
	var m VecVirtual
	if q41 {
		m = q80Scale(blk.Offset(2))
	}
	for g := 0; g < 2; g++ {
		x := YMM()
		VPMOVZXBD(blk.Offset(codes+8*g), x)
		lo, hi := YMM(), YMM()
		VPAND(mask, x, lo)
		VPSRLD(U8(4), x, hi)
		for h, v := range []VecVirtual{lo, hi} {
			if !q41 {
				VPSUBD(eight, v, v)
			}
			VCVTDQ2PS(v, v)
			VMULPS(scale, v, v)
			if q41 {
				VADDPS(m, v, v)
			}
			VMOVUPS(v, Mem{Base: d, Disp: 4 * (16*h + 8*g)})
		}
	}
	ADDQ(U8(blockBytes), src)
	ADDQ(U32(128), d)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
