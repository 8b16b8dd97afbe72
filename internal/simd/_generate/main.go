// Command _generate writes internal/simd's AVX2/FMA/F16C kernels,
// kernels_amd64.s, and their Go declarations, kernels_amd64.go, with avo;
// with -set avx512, the AVX-512 kernels (avx512.go) to
// kernels_avx512_amd64.s and kernels_avx512_amd64.go.
//
// Run it through go generate in internal/simd (see dispatch_amd64.go):
//
//	go run -C _generate . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg simd
//	go run -C _generate . -set avx512 -out ../kernels_avx512_amd64.s -stubs ../kernels_avx512_amd64.go -pkg simd
//
// Conventions shared by every kernel: lengths and strides are in elements;
// float kernels handle whole groups of 8 elements (Q8_0 kernels whole blocks)
// and leave any shorter tail to the Go caller; every kernel ends with
// VZEROUPPER. The avx2 set uses only AVX, AVX2, FMA and F16C instructions.
package main

import (
	"flag"
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// wtype describes how a weight element type is loaded: 8 elements from
// memory into one YMM register of float32.
type wtype struct {
	name   string // suffix in function names
	goType string // Go element type
	size   uint8  // bytes per element
}

var (
	f32  = wtype{"F32", "float32", 4}
	f16  = wtype{"F16", "uint16", 2}
	bf16 = wtype{"BF16", "uint16", 2}
)

// load converts the 8 elements at m into float32 lanes of dst.
func (t wtype) load(m Mem, dst VecVirtual) {
	switch t {
	case f32:
		VMOVUPS(m, dst)
	case f16:
		VCVTPH2PS(m, dst)
	case bf16:
		VPMOVZXWD(m, dst)
		VPSLLD(U8(16), dst, dst)
	default:
		panic("unknown wtype")
	}
}

// set selects the kernel set to write: avx2 (kernels_amd64.s) or avx512
// (kernels_avx512_amd64.s, see avx512.go).
var set = flag.String("set", "avx2", "kernel set to generate: avx2 or avx512")

func main() {
	flag.Parse()
	ConstraintExpr("amd64,gc,!purego")
	switch *set {
	case "avx2":
		avx2()
	case "avx512":
		avx512()
	default:
		panic("unknown -set " + *set)
	}
	Generate()
}

// avx2 writes the AVX2/FMA/F16C set.
func avx2() {
	for _, t := range []wtype{f32, f16, bf16} {
		dot(t)
		axpy(t)
	}
	scale()
	mul(false)
	mul(true)
	sum()
	dotQ80()
	widen(f16)
	widen(bf16)
	narrowF16()
	narrowBF16()
	for _, t := range []wtype{f32, f16, bf16} {
		gemm(t, 4, 3, false)
		gemm(t, 4, 3, true)
	}
	for _, t := range []wtype{f16, bf16} { // matMul's last 2 or 3 token rows
		for nt := 2; nt <= 3; nt++ {
			gemm(t, nt, 3, false)
			gemm(t, nt, 3, true)
		}
	}
	gemmQ80(4, 3, false)
	gemmQ80(4, 3, true)

	shifts := map[int]Mem{4: codeShifts(4), 3: codeShifts(3), 2: codeShifts(2)}
	for _, k := range []codeKind{codeU8, codeI8, codeU4, codeU2} {
		unpack(k, false, shifts)
	}
	for _, k := range []codeKind{codeU8, codeU4, codeU2} {
		unpack(k, true, shifts)
	}
	u2codes := u2Codes()
	for _, k := range []codeKind{codeU8, codeU4, codeU2} {
		unpackGroups(k, shifts, u2codes)
	}
	for _, k := range []lutKind{lut4, lut3, lut2} {
		lutToF32(k, shifts[k.bits])
	}
	q80ToF32()
	quantizeQ80AVX2() // q8quant.go
	q8gemmAVX2()      // q8gemm.go
	kq8avx2()         // kq8avx2.go
	kq8avx2Q6()       // kq8avx2.go
	kq8avx2Codes()    // kq8avx2.go
	q4ToF32(false)
	q4ToF32(true)
	decoders()
	// Register blocking (see scores and accumulate): queries per kernel,
	// then rows per block (scores) or 8-column vectors per chunk
	// (accumulate).
	for _, b := range []struct{ qb, r, cv int }{{1, 8, 8}, {2, 4, 4}, {3, 3, 3}, {4, 3, 2}} {
		scores(b.qb, b.r, ymm)
		accumulate(b.qb, b.cv, ymm)
	}
	u4mask := codeMask(4)
	for _, k := range []codeKind{codeU8, codeU4} {
		for _, b := range []struct{ qb, r, cv int }{{1, 8, 8}, {2, 4, 4}, {3, 3, 3}, {4, 3, 2}} {
			scoresCodes(k, b.qb, b.r, u4mask, ymm)
			accumulateCodes(k, b.qb, b.cv, u4mask, ymm)
		}
	}
	maxF32()
	expShiftSum()
	expShiftTaylor()
	transpose8()
	transpose8Of(f16Elems)
	transpose8Of(bf16Elems)
	gemmPacked()
	ropeNeoX()
	ropePairs()
	dotQ4K(false, false)
	dotQ4K(true, false)
	dotQ4K(false, true)
	dotQ4K(true, true)
	dotQ6K(false)
	dotQ6K(true)
	dotQ4KSums(false)
	dotQ4KSums(true)
	groupSums32()
	lutBlocks()
	q23K(false)
	q23K(true)
	qdots(false)
	dotQ4KQ8K(false) // q8k.go
	dotQ4KQ8K(true)
	dotQ6KQ8K()
	q8kRange()
	q8kCodes()
	multitokAVX2()
	q8legacy(false)
	q8legacyX4AVX2() // q8legacymulti.go
}

func header(name, sig string, doc ...string) {
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc...)
}

func zeros(n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for i := range v {
		v[i] = YMM()
		VXORPS(v[i], v[i], v[i])
	}
	return v
}

// zeroGrid returns rows sets of cols zeroed accumulators, zeros making
// each set (zeros, zeros512 or a wtype's zeros).
func zeroGrid(rows, cols int, zeros func(int) []VecVirtual) [][]VecVirtual {
	acc := make([][]VecVirtual, rows)
	for i := range acc {
		acc[i] = zeros(cols)
	}
	return acc
}

// hsum leaves the sum of the 8 lanes of y in lane 0 of the returned XMM.
func hsum(y VecVirtual) VecVirtual {
	hi := XMM()
	VEXTRACTF128(U8(1), y, hi)
	lo := y.AsX()
	VADDPS(hi, lo, lo)
	VHADDPS(lo, lo, lo)
	VHADDPS(lo, lo, lo)
	return lo.(VecVirtual)
}

// addTree sums v pairwise into v[0].
func addTree(v []VecVirtual) VecVirtual {
	for len(v) > 1 {
		h := (len(v) + 1) / 2
		for i := h; i < len(v); i++ {
			VADDPS(v[i], v[i-h], v[i-h])
		}
		v = v[:h]
	}
	return v[0]
}

// reduceRows returns an XMM whose lane j holds the lane sum of a[j], for
// len(a) of 1 to 4 (lanes past len(a) hold junk).
func reduceRows(a []VecVirtual) VecVirtual {
	switch len(a) {
	case 1:
		return hsum(a[0])
	case 2:
		VHADDPS(a[1], a[0], a[0]) // [a0 01, a0 23, a1 01, a1 23 | 45,67 ...]
	case 3:
		VHADDPS(a[1], a[0], a[0])
		VHADDPS(a[2], a[2], a[2])
		VHADDPS(a[2], a[0], a[0]) // [a0, a1, a2, a2] per 128-bit half
	case 4:
		VHADDPS(a[1], a[0], a[0])
		VHADDPS(a[3], a[2], a[2])
		VHADDPS(a[2], a[0], a[0])
	default:
		panic("reduceRows")
	}
	hi := XMM()
	VEXTRACTF128(U8(1), a[0], hi)
	lo := a[0].AsX()
	VADDPS(hi, lo, lo)
	if len(a) == 2 {
		VHADDPS(lo, lo, lo)
	}
	return lo.(VecVirtual)
}

// addRows adds the n floats at m to lanes 0..n-1 of x.
func addRows(x VecVirtual, m Mem, n int) {
	switch n {
	case 1:
		VADDSS(m, x, x)
		return
	case 4:
		VADDPS(m, x, x)
		return
	}
	old := XMM()
	VMOVQ(m, old)
	if n == 3 {
		VINSERTPS(U8(2<<4), m.Offset(8), old, old)
	}
	VADDPS(old, x, x)
}

// storeRows stores lanes 0..n-1 of x to m.
func storeRows(x VecVirtual, m Mem, n int) {
	switch n {
	case 1:
		VMOVSS(x, m)
	case 2:
		VMOVQ(x, m)
	case 3:
		VMOVQ(x, m)
		VEXTRACTPS(U8(2), x, m.Offset(8))
	case 4:
		VMOVUPS(x, m)
	default:
		panic("storeRows")
	}
}

// rowPtrs returns pointers to n rows stride bytes apart: base, then each
// row's own register, LEAQ'd from the row before.
func rowPtrs(base, stride Register, n int) []Register {
	rows := []Register{base}
	for i := 1; i < n; i++ {
		r := GP64()
		LEAQ(Mem{Base: rows[i-1], Index: stride, Scale: 1}, r)
		rows = append(rows, r)
	}
	return rows
}

// rowMems is rowPtrs as memory operands.
func rowMems(base, stride Register, n int) []Mem {
	ms := make([]Mem, n)
	for i, r := range rowPtrs(base, stride, n) {
		ms[i] = Mem{Base: r}
	}
	return ms
}

// eachRow emits row(i) for the n rows of an output, i = 0..n-1, moving
// dst on by ldd bytes between rows.
func eachRow(dst, ldd Register, n int, row func(i int)) {
	for i := 0; i < n; i++ {
		if i > 0 {
			ADDQ(ldd, dst)
		}
		row(i)
	}
}

// elementBounds returns n rounded down to a multiple of big in a new
// register, and rounds n down to a multiple of 8 in place: the ends of
// elementLoops' two loops.
func elementBounds(n Register, big int) Register {
	nBig := GP64()
	MOVQ(n, nBig)
	ANDQ(I32(-int32(big)), nBig)
	ANDQ(I32(-8), n)
	return nBig
}

// elementLoops emits an AVX2 kernel's two loops over the element index i
// (a new register, from 0): name_loop<big>, whose body(i, big/8) takes big
// elements (big/8 YMMs of 8) while i < nBig, then name_loop8, whose
// body(i, 1) takes 8 while i < n. Both leave for name_done, which the
// caller emits.
func elementLoops(name string, big int, nBig, n Register, body func(i Register, vecs int)) {
	i := GP64()
	XORQ(i, i)
	loop := fmt.Sprintf("%s_loop%d", name, big)

	Label(loop)
	CMPQ(i, nBig)
	JAE(LabelRef(name + "_loop8"))
	body(i, big/8)
	ADDQ(U32(uint32(big)), i)
	JMP(LabelRef(loop))

	Label(name + "_loop8")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	body(i, 1)
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop8"))
}

// dot: Σ w[i]*x[i] over len(x)&^7 elements.
func dot(t wtype) {
	name := "dot" + t.name + "AVX2"
	header(name, fmt.Sprintf("func(w []%s, x []float32) float32", t.goType),
		name+" returns Σ float32(w[i])*x[i] for i < len(x)&^7.",
		"len(w) must be at least len(x)&^7.")
	dotAVX2Body(name, t, pfMode{})
}

// dotAVX2Body is dot's code after its header, with the weight prefetch
// scheme p (none for dot; stream.go's variants differ only in p, so they
// give its bits).
func dotAVX2Body(name string, t wtype, p pfMode) {
	w := Mem{Base: Load(Param("w").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	n32 := elementBounds(n, 32)
	acc := zeros(4)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		if vecs > 1 {
			p.line(w.Idx(i, t.size))
		}
		dotStep(t, w, []Mem{x}, i, [][]VecVirtual{acc}, vecs)
	})

	Label(name + "_done")
	s := hsum(addTree(acc))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// dotStep is a step of dot's loops at element i for token rows xs (one for
// dot itself, several for dots and the accumulating kernels): for each of
// vecs vectors of 8 elements, the weights are loaded and converted once and
// acc[r][k] += w's and xs[r]'s k-th 8 elements (a fused multiply-add a
// row). Each row thus takes dot's fused multiply-adds in dot's order, which
// is what gives the multi-token and accumulating kernels dot's bits.
func dotStep(t wtype, w Mem, xs []Mem, i Register, acc [][]VecVirtual, vecs int) {
	for k := range vecs {
		v := YMM()
		t.load(w.Idx(i, t.size).Offset(8*k*int(t.size)), v)
		for r := range acc {
			VFMADD231PS(xs[r].Idx(i, 4).Offset(32*k), v, acc[r][k])
		}
	}
}

// axpy: y[i] += alpha*x[i] over len(y)&^7 elements.
func axpy(t wtype) {
	name := "axpy" + t.name + "AVX2"
	header(name, fmt.Sprintf("func(y []float32, alpha float32, x []%s)", t.goType),
		name+" sets y[i] += alpha*float32(x[i]) for i < len(y)&^7.",
		"len(x) must be at least len(y)&^7.")
	y := Mem{Base: Load(Param("y").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("y").Len(), GP64())
	ab, err := Param("alpha").Resolve()
	if err != nil {
		panic(err)
	}
	alpha := YMM()
	VBROADCASTSS(ab.Addr, alpha)
	n32 := elementBounds(n, 32)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		vs := make([]VecVirtual, vecs)
		for k := range vs {
			vs[k] = YMM()
			t.load(x.Idx(i, t.size).Offset(8*k*int(t.size)), vs[k])
		}
		for k, v := range vs {
			VFMADD213PS(y.Idx(i, 4).Offset(32*k), alpha, v) // v = alpha*v + y
			VMOVUPS(v, y.Idx(i, 4).Offset(32*k))
		}
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

func scale() {
	name := "scaleF32AVX2"
	header(name, "func(x []float32, alpha float32)",
		name+" sets x[i] *= alpha for i < len(x)&^7.")
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	ab, err := Param("alpha").Resolve()
	if err != nil {
		panic(err)
	}
	alpha := YMM()
	VBROADCASTSS(ab.Addr, alpha)
	n32 := elementBounds(n, 32)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			v := YMM()
			VMULPS(x.Idx(i, 4).Offset(32*k), alpha, v)
			VMOVUPS(v, x.Idx(i, 4).Offset(32*k))
		}
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// mul: dst[i] = x[i]*y[i], or with add acc[i] += x[i]*y[i], over len(dst)&^7
// elements. The product is rounded before the sum (VMULPS, then VADDPS; no
// fused multiply-add), as the Go twin computes it, so the two agree bit for
// bit. Each vector is loaded before its result is stored, so dst may be x
// or y.
func mul(add bool) {
	name, d, sig, doc := "mulF32AVX2", "dst", "func(dst, x, y []float32)", " sets dst[i] = x[i]*y[i]"
	if add {
		name, d, sig, doc = "mulAddF32AVX2", "acc", "func(acc, x, y []float32)", " sets acc[i] += x[i]*y[i], rounding the product, then the sum,"
	}
	header(name, sig,
		name+doc,
		fmt.Sprintf("for i < len(%s)&^7. len(x) and len(y) must be at least len(%s)&^7.", d, d))
	dst := Mem{Base: Load(Param(d).Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	y := Mem{Base: Load(Param("y").Base(), GP64())}
	n := Load(Param(d).Len(), GP64())
	n32 := elementBounds(n, 32)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			v := YMM()
			VMOVUPS(x.Idx(i, 4).Offset(32*k), v)
			VMULPS(y.Idx(i, 4).Offset(32*k), v, v)
			if add {
				VADDPS(dst.Idx(i, 4).Offset(32*k), v, v)
			}
			VMOVUPS(v, dst.Idx(i, 4).Offset(32*k))
		}
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// sum is the streaming-read kernel behind MeasureBandwidth: eight independent
// add chains over 64 floats (256 bytes) per iteration.
func sum() {
	name := "sumF32AVX2"
	header(name, "func(x []float32) float32",
		name+" returns Σ x[i] for i < len(x)&^7.")
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	n64 := elementBounds(n, 64)
	acc := zeros(8)
	elementLoops(name, 64, n64, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			VADDPS(x.Idx(i, 4).Offset(32*k), acc[k], acc[k])
		}
	})

	Label(name + "_done")
	s := hsum(addTree(acc))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// q80Scale broadcasts the binary16 scale at m to all lanes of a new YMM.
func q80Scale(m Mem) VecVirtual {
	d := YMM()
	VPBROADCASTW(m, d.AsX())
	VCVTPH2PS(d.AsX(), d)
	return d
}

// q80Codes loads the 8 int8 codes at m as float32 lanes.
func q80Codes(m Mem) VecVirtual {
	c := YMM()
	VPMOVSXBD(m, c)
	VCVTDQ2PS(c, c)
	return c
}

// q80Block returns Σ_k codes_k*x_k over one block as 8 partial lanes; blk
// addresses the block's first byte, xs holds or addresses its 32 floats.
func q80Block(blk Mem, xs []Op) VecVirtual {
	p := YMM()
	c := q80Codes(blk.Offset(2))
	VMULPS(xs[0], c, p)
	for k := 1; k < 4; k++ {
		c = q80Codes(blk.Offset(2 + 8*k))
		VFMADD231PS(xs[k], c, p)
	}
	return p
}

// dotQ80: Σ over len(x)/32 blocks of d_b * Σ code*x.
func dotQ80() {
	name := "dotQ80AVX2"
	header(name, "func(w []byte, x []float32) float32",
		name+" returns Σ_b d_b*Σ_i code_b,i*x[32b+i] over the len(x)/32 Q8_0",
		"blocks at w (34 bytes each: binary16 d, then 32 int8 codes).",
		"len(w) must be at least len(x)/32*34.")
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(5), nb)
	acc := zeros(2)

	Label(name + "_loop2")
	CMPQ(nb, U32(2))
	JB(LabelRef(name + "_loop1"))
	// Unlike the F16, BF16 and F32 kernels, this one gains from software
	// prefetch on the AVX2-only machine it was measured on (2-core AMD
	// EPYC, Zen 3; decode matrix-vector product from DRAM, interleaved
	// rounds, load 2-3): 1.30× (1 worker) and 1.31× (2 workers) with
	// prefetchLine's distances, 1.2-1.3× with others, where the same
	// prefetches cost the F16, BF16 and F32 kernels 5-20%.
	prefetchLines(w, 2)
	for k := 0; k < 2; k++ {
		blk := Mem{Base: w, Disp: 34 * k}
		xm := Mem{Base: x, Disp: 128 * k}
		p := q80Block(blk, []Op{xm, xm.Offset(32), xm.Offset(64), xm.Offset(96)})
		VFMADD231PS(q80Scale(blk), p, acc[k])
	}
	ADDQ(U32(68), w)
	ADDQ(U32(256), x)
	SUBQ(U32(2), nb)
	JMP(LabelRef(name + "_loop2"))

	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	blk := Mem{Base: w}
	xm := Mem{Base: x}
	p := q80Block(blk, []Op{xm, xm.Offset(32), xm.Offset(64), xm.Offset(96)})
	VFMADD231PS(q80Scale(blk), p, acc[0])

	Label(name + "_done")
	s := hsum(addTree(acc))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// widen: dst[i] = float32(src[i]) over len(dst)&^7 elements.
func widen(t wtype) {
	name := "widen" + t.name + "AVX2"
	header(name, fmt.Sprintf("func(dst []float32, src []%s)", t.goType),
		name+" sets dst[i] = float32(src[i]) for i < len(dst)&^7.",
		"len(src) must be at least len(dst)&^7.")
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	s := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	n32 := elementBounds(n, 32)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			v := YMM()
			t.load(s.Idx(i, t.size).Offset(8*k*int(t.size)), v)
			VMOVUPS(v, d.Idx(i, 4).Offset(32*k))
		}
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// narrowF16 uses VCVTPS2PH with immediate rounding control 0: round to
// nearest even, independent of MXCSR.
func narrowF16() {
	name := "narrowF16AVX2"
	header(name, "func(dst []uint16, src []float32)",
		name+" sets dst[i] to the binary16 bits of src[i], rounded to nearest even,",
		"for i < len(dst)&^7. len(src) must be at least len(dst)&^7.")
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	s := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	n32 := elementBounds(n, 32)
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			v := YMM()
			VMOVUPS(s.Idx(i, 4).Offset(32*k), v)
			VCVTPS2PH(U8(0), v, d.Idx(i, 2).Offset(16*k))
		}
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// broadcastConst returns a YMM with c in every 32-bit lane.
func broadcastConst(c uint32) VecVirtual {
	r := GP32()
	MOVL(U32(c), r)
	v := YMM()
	VMOVD(r, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// narrowBF16 rounds with integer arithmetic, as F32ToBF16Scalar does:
// bits + 0x7fff + lsb, then the top half; NaNs instead get their top half
// with the quiet bit 0x0040 set.
func narrowBF16() {
	name := "narrowBF16AVX2"
	header(name, "func(dst []uint16, src []float32)",
		name+" sets dst[i] to the bfloat16 bits of src[i], rounded to nearest even",
		"(NaNs made quiet), for i < len(dst)&^7. len(src) must be at least len(dst)&^7.")
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	s := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	ANDQ(I32(-8), n)
	absMask := broadcastConst(0x7fff_ffff)
	inf := broadcastConst(0x7f80_0000)
	one := broadcastConst(1)
	bias := broadcastConst(0x7fff)
	quiet := broadcastConst(0x0040)
	i := GP64()
	XORQ(i, i)

	Label(name + "_loop8")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	v := YMM()
	VMOVDQU(s.Idx(i, 4), v)
	nan := YMM()
	VPAND(absMask, v, nan)
	VPCMPGTD(inf, nan, nan) // |v| > inf as integers: NaN
	r := YMM()
	VPSRLD(U8(16), v, r)
	q := YMM()
	VPOR(quiet, r, q)  // NaN result
	VPAND(one, r, r)   // lsb of the kept half
	VPADDD(bias, r, r) // 0x7fff + lsb
	VPADDD(v, r, r)    // rounded
	VPSRLD(U8(16), r, r)
	VPBLENDVB(nan, q, r, r)
	VPACKUSDW(r, r, r)     // words 0-3 in qword 0, 4-7 in qword 2
	VPERMQ(U8(0x08), r, r) // qwords 0,2 -> 0,1
	VMOVDQU(r.AsX(), d.Idx(i, 2))
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop8"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// gemm: nt token rows by nr weight rows per call, each weight vector loaded
// and converted once per column group and reused for every token row.
// With nt=4, nr=3 it uses all 16 YMM registers: 12 accumulators, 3 weights
// and one token vector. Every cache line of the weight rows it reads, it
// prefetches the same line of the nr rows after them into L2 (PREFETCHT1):
// the next call's rows where matMul walks weight rows in groups of nr. With
// a few token rows the kernel's FMAs take about as long as streaming the
// weights from DRAM, and without the prefetch the two did not overlap: on
// the Zen 4, 4 token rows × 2048×2048 F16 weights from DRAM took 0.70 ms
// (0.34 ms from L3, 0.37 ms for one row's dot product) and 0.47 ms with it
// (BenchmarkMatMulEach's batch/one 1.9 → 1.3). The bits are unchanged.
func gemm(t wtype, nt, nr int, accumulate bool) {
	name, op := fmt.Sprintf("gemm%dx%d%sAVX2", nt, nr, t.name), "="
	if accumulate {
		name, op = fmt.Sprintf("gemm%dx%d%sAccAVX2", nt, nr, t.name), "+="
	}
	header(name, fmt.Sprintf("func(dst *float32, ldd int, x *float32, ldx int, w *%s, ldw int, n int)", t.goType),
		fmt.Sprintf("%s sets dst[i*ldd+j] %s Σ_{c<n} x[i*ldx+c]*float32(w[j*ldw+c])", name, op),
		fmt.Sprintf("for i < %d, j < %d. n must be a multiple of 8.", nt, nr))
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	xs := rowMems(xp, ldx, nt)
	wp := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	if t.size == 4 {
		SHLQ(U8(2), ldw)
	} else {
		SHLQ(U8(1), ldw)
	}
	ws := rowMems(wp, ldw, nr)
	// pf walks the next nr weight rows (those of the next call over the
	// same columns) one cache line per unrolled step, into L2.
	pf := GP64()
	LEAQ(Mem{Base: ws[nr-1].Base, Index: ldw, Scale: 1}, pf)
	n := Load(Param("n"), GP64())
	acc := zeroGrid(nt, nr, zeros)
	c := GP64()
	XORQ(c, c)
	body := func() {
		wv := make([]VecVirtual, nr)
		for j := range wv {
			wv[j] = YMM()
			t.load(ws[j].Idx(c, t.size), wv[j])
		}
		for i := 0; i < nt; i++ {
			xv := YMM()
			VMOVUPS(xs[i].Idx(c, 4), xv)
			for j := 0; j < nr; j++ {
				VFMADD231PS(wv[j], xv, acc[i][j])
			}
		}
		ADDQ(U32(8), c)
	}
	unroll := 64 / (8 * int(t.size)) // steps per cache line of a weight row
	end := GP64()
	Label(name + "_line")
	MOVQ(c, end)
	ADDQ(U32(uint32(8*unroll)), end)
	CMPQ(end, n)
	JA(LabelRef(name + "_loop"))
	PREFETCHT1(Mem{Base: pf})
	for j := 1; j < nr; j++ { // nr <= 3: scales 1 and 2
		PREFETCHT1(Mem{Base: pf, Index: ldw, Scale: uint8(j)})
	}
	ADDQ(U32(64), pf)
	for u := 0; u < unroll; u++ {
		body()
	}
	JMP(LabelRef(name + "_line"))

	Label(name + "_loop")
	CMPQ(c, n)
	JAE(LabelRef(name + "_done"))
	body()
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	gemmStore(nt, nr, acc, accumulate)
	VZEROUPPER()
	RET()
}

// gemmStore reduces acc[i][j] and stores it to dst[i*ldd+j], or adds it
// there if accumulate is set.
func gemmStore(nt, nr int, acc [][]VecVirtual, accumulate bool) {
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	eachRow(dst, ldd, nt, func(i int) {
		r := reduceRows(acc[i])
		if accumulate {
			addRows(r, Mem{Base: dst}, nr)
		}
		storeRows(r, Mem{Base: dst}, nr)
	})
}

// gemmQ80: nt token rows by nr Q8_0 weight rows. Per block each row's codes
// are converted and scaled by d once and reused for every token row. With
// nr*nt+2*nr+1 > 16 the scales live in a stack slot instead of registers.
func gemmQ80(nt, nr int, accumulate bool) {
	name, op := fmt.Sprintf("gemm%dx%dQ80AVX2", nt, nr), "="
	if accumulate {
		name, op = fmt.Sprintf("gemm%dx%dQ80AccAVX2", nt, nr), "+="
	}
	header(name, "func(dst *float32, ldd int, x *float32, ldx int, w *byte, ldw int, nb int)",
		fmt.Sprintf("%s sets dst[i*ldd+j] %s Σ_{b<nb} d_jb*Σ_k code_jb,k*x[i*ldx+32b+k]", name, op),
		fmt.Sprintf("for i < %d, j < %d, where row j's Q8_0 blocks start at byte j*ldw of w.", nt, nr))
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	xs := rowPtrs(xp, ldx, nt)
	wp := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	ws := rowPtrs(wp, ldw, nr)
	nb := Load(Param("nb"), GP64())
	spill := nt*nr+2*nr+1 > 16
	var local Mem
	if spill {
		local = AllocLocal(32 * nr)
	}
	acc := zeroGrid(nt, nr, zeros)
	woff := GP64() // byte offset of the block within each weight row
	XORQ(woff, woff)
	xoff := GP64() // byte offset of the block within each token row
	XORQ(xoff, xoff)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	ds := make([]Op, nr)
	for j := range ds {
		d := q80Scale(Mem{Base: ws[j], Index: woff, Scale: 1})
		if spill {
			m := local.Offset(32 * j)
			VMOVUPS(d, m)
			ds[j] = m
		} else {
			ds[j] = d
		}
	}
	for k := 0; k < 4; k++ {
		wv := make([]VecVirtual, nr)
		for j := range wv {
			wv[j] = q80Codes(Mem{Base: ws[j], Index: woff, Scale: 1, Disp: 2 + 8*k})
			VMULPS(ds[j], wv[j], wv[j])
		}
		for i := 0; i < nt; i++ {
			xv := YMM()
			VMOVUPS(Mem{Base: xs[i], Index: xoff, Scale: 1, Disp: 32 * k}, xv)
			for j := 0; j < nr; j++ {
				VFMADD231PS(wv[j], xv, acc[i][j])
			}
		}
	}
	ADDQ(U32(34), woff)
	ADDQ(U32(128), xoff)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	gemmStore(nt, nr, acc, accumulate)
	VZEROUPPER()
	RET()
}
