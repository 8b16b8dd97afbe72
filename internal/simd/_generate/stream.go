package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// pfMode is a weight-prefetch scheme for the decode dot products: near
// bytes ahead into L1 (PREFETCHT0) and far bytes ahead into L2
// (PREFETCHT1), either 0 for none. The avx512 set's kernels use
// {prefetchNear, prefetchFar}, tuned on an Intel Xeon.
type pfMode struct {
	suffix    string
	near, far int
}

func (p pfMode) line(m Mem) {
	if p.near > 0 {
		PREFETCHT0(m.Offset(p.near))
	}
	if p.far > 0 {
		PREFETCHT1(m.Offset(p.far))
	}
}

// The exploration variants (see BenchmarkMatVecVariants).
var pfModes = []pfMode{
	{"NP", 0, 0},
	{"T0", 1024, 0},
	{"T1", 0, 8192},
	{"T2K", 0, 2048},
}

// stream512 writes variants of the AVX-512 decode dot products that differ
// from dotF16AVX512, dotBF16AVX512 and dotQ80AVX512 only in their weight
// prefetch, so their results are the same bits.
func stream512() {
	cpuidKernel()
	dotRowsAVX2(f16, 4)
	dotRowsAVX2(bf16, 4)
	for _, p := range pfModes {
		for _, t := range []wtype{f16, bf16} {
			dot512PF(t, 8, p)
		}
		dotQ80AVX512PF(4, p)
		if p.near > 0 || p.far > 0 {
			dotAVX2PF(f16, p)
			dotAVX2PF(bf16, p)
		}
	}
	dotAccAVX2(f16)
	dotAccAVX2(bf16)
	for _, t := range []wtype{f16, bf16} {
		for nt := 2; nt <= 5; nt++ {
			dotsAccAVX2(t, nt)
		}
	}
	for _, t := range []wtype{f16, bf16} {
		for nt := 2; nt <= 5; nt++ {
			dotsAccZMM(t, nt)
		}
		for nt := 1; nt <= 5; nt++ {
			dotsAcc2ZMM(t, nt)
		}
		dotSeqAVX2(t)
		for s := 2; s <= 4; s++ {
			dotStreamsAVX2(t, s)
		}
	}
}

// dotsAccAVX2 writes dots<nt><T>AccAVX2, dot<T>AccAVX2 for nt token rows as
// dots (multitok.go) is dot for nt token rows: each weight vector loaded
// and converted once and fed to every token row's four accumulators, kept
// at acc[t*lda:][:32], with each row's fused multiply-adds in
// dot<T>AVX2's order, so that each token row continues the bits
// dot<T>AccAVX2 would give it alone. Up to 6 token rows (24 accumulators)
// take the YMM registers above 15, hence the avx512 set's EVEX forms.
func dotsAccAVX2(t wtype, nt int) {
	name := fmt.Sprintf("dots%d%sAccAVX2", nt, t.name)
	header(name, fmt.Sprintf("func(acc *float32, lda int, w *%s, x *float32, ldx, n int, pf *%s)", t.goType, t.goType),
		fmt.Sprintf("%s does dot%sAccAVX2(acc[t*lda:], w, x[t*ldx:], n, pf) for t < %d,", name, t.name, nt),
		"loading and converting each weight vector once.")
	accs, w, xs, n, pf := accsArgs(nt)
	accLoop(name, t, accs, w, xs, n, pf)
}

// accsArgs loads the arguments of the multi-row accumulating kernels
// (acc, lda, w, x, ldx, n, pf): each token row's accumulators and x row,
// the weights, the length and the prefetch address.
func accsArgs(nt int) ([]Mem, Mem, []Mem, Register, Mem) {
	accp := Load(Param("acc"), GP64())
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	w := Mem{Base: Load(Param("w"), GP64())}
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	xs := rowMems(xp, ldx, nt)
	n := Load(Param("n"), GP64())
	pf := Mem{Base: Load(Param("pf"), GP64())}
	return rowMems(accp, lda, nt), w, xs, n, pf
}

// accLoop is the body of the accumulating kernels after their arguments:
// it loads the four accumulators of each token row from accs[r], runs
// dot's main loop (dotStep) over n elements with a PREFETCHT1 of a line of
// pf a step, and stores the accumulators back.
func accLoop(name string, t wtype, accs []Mem, w Mem, xs []Mem, n Register, pf Mem) {
	acc := make([][]VecVirtual, len(accs))
	for r := range acc {
		acc[r] = make([]VecVirtual, 4)
		for k := range acc[r] {
			acc[r][k] = YMM()
			VMOVUPS(accs[r].Offset(32*k), acc[r][k])
		}
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	PREFETCHT1(pf.Idx(i, t.size))
	dotStep(t, w, xs, i, acc, 4)
	ADDQ(U32(32), i)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	for r := range acc {
		for k := range acc[r] {
			VMOVUPS(acc[r][k], accs[r].Offset(32*k))
		}
	}
	VZEROUPPER()
	RET()
}

// dotsAccZMM writes dots<nt><T>AccZMM: dots<nt><T>AccAVX2 with each token
// row's four accumulators of 8 lanes held as two ZMMs of 16, acc[0:16] and acc[16:32]: lane j of the first is
// accumulator j/8's lane j%8, fed the same weight and x elements, so every
// lane takes the same fused multiply-adds in the same order and the
// results are the AVX2 kernels' bits, in half the instructions (one
// conversion of 16 weights and one fused multiply-add of 16 lanes where
// those take two of 8). The Zen 5, whose 512-bit units are full width,
// takes these for 2 to 5 token rows (accPieces).
func dotsAccZMM(t wtype, nt int) {
	name := fmt.Sprintf("dots%d%sAccZMM", nt, t.name)
	twin := fmt.Sprintf("dots%d%sAccAVX2(acc, lda, w, x, ldx, n, pf)", nt, t.name)
	header(name, fmt.Sprintf("func(acc *float32, lda int, w *%s, x *float32, ldx, n int, pf *%s)", t.goType, t.goType),
		fmt.Sprintf("%s does %s,", name, twin),
		"the same bits, with the accumulators in ZMM registers.")
	accs, w, xs, n, pf := accsArgs(nt)

	acc := make([][2]VecVirtual, nt)
	for r := range acc {
		for k := range acc[r] {
			acc[r][k] = ZMM()
			VMOVUPS(accs[r].Offset(64*k), acc[r][k])
		}
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	PREFETCHT1(pf.Idx(i, t.size))
	for k := range 2 {
		v := ZMM()
		t.load512(w.Idx(i, t.size).Offset(16*k*int(t.size)), v, nil)
		for r := range acc {
			VFMADD231PS(xs[r].Idx(i, 4).Offset(64*k), v, acc[r][k])
		}
	}
	ADDQ(U32(32), i)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	for r := range acc {
		for k := range acc[r] {
			VMOVUPS(acc[r][k], accs[r].Offset(64*k))
		}
	}
	VZEROUPPER()
	RET()
}

// dotsAcc2ZMM writes dots<nt><T>Acc2ZMM: dots<nt><T>AccZMM over two
// weight rows at once (w and w[ldw:]), row j's accumulators of token row t
// at acc[j*32+t*lda:][:32]. Each token vector is loaded once for both
// rows, so a step takes 2 weight and nt token loads for 4*nt fused
// multiply-adds, where two calls of dotsAccZMM take 2 and 2*nt (matVecsRuns'
// later token rows, from L2: 1.02–1.14× as fast as a row a call, see
// there). Every (row, token row) pair takes the same fused multiply-adds in
// the same order as in dotsAccZMM, so the same bits. There is no prefetch:
// its rows are in L2.
func dotsAcc2ZMM(t wtype, nt int) {
	name := fmt.Sprintf("dots%d%sAcc2ZMM", nt, t.name)
	header(name, fmt.Sprintf("func(acc *float32, lda int, w *%s, ldw int, x *float32, ldx, n int)", t.goType),
		fmt.Sprintf("%s does dots%d%sAccZMM(acc[j*32:], lda, w[j*ldw:], x, ldx, n, _) for j < 2,", name, nt, t.name),
		"the same bits, loading each token vector once for both rows.")
	accp := Load(Param("acc"), GP64())
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	w0 := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	w1 := GP64()
	LEAQ(Mem{Base: w0, Index: ldw, Scale: t.size}, w1)
	ws := []Mem{{Base: w0}, {Base: w1}}
	xp := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	xs := rowMems(xp, ldx, nt)
	n := Load(Param("n"), GP64())
	accs := rowMems(accp, lda, nt)
	acc := make([][][2]VecVirtual, 2)
	for j := range acc {
		acc[j] = make([][2]VecVirtual, nt)
		for r := range nt {
			for k := range 2 {
				acc[j][r][k] = ZMM()
				VMOVUPS(accs[r].Offset(128*j+64*k), acc[j][r][k])
			}
		}
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	for k := range 2 {
		v := [2]VecVirtual{ZMM(), ZMM()}
		for j := range 2 {
			t.load512(ws[j].Idx(i, t.size).Offset(16*k*int(t.size)), v[j], nil)
		}
		for r := range nt {
			xv := ZMM()
			VMOVUPS(xs[r].Idx(i, 4).Offset(64*k), xv)
			for j := range 2 {
				VFMADD231PS(xv, v[j], acc[j][r][k])
			}
		}
	}
	ADDQ(U32(32), i)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	for j := range acc {
		for r := range nt {
			for k := range 2 {
				VMOVUPS(acc[j][r][k], accs[r].Offset(128*j+64*k))
			}
		}
	}
	VZEROUPPER()
	RET()
}

// dotSeqAVX2 writes dot<T>SeqAVX2: dot<T>AVX2 over a run of consecutive
// rows in one call (dst[r] = dot<T>AVX2(w[r*n:(r+1)*n], x[:n]) for r <
// rows, n a positive multiple of 32), each row with dot's main loop and
// reduction, so the same bits, without a call a row.
func dotSeqAVX2(t wtype) {
	name := "dot" + t.name + "SeqAVX2"
	header(name, fmt.Sprintf("func(dst *float32, w *%s, x *float32, n, rows int)", t.goType),
		fmt.Sprintf("%s sets dst[r] = dot%sAVX2(w[r*n:(r+1)*n], x[:n]) for r < rows,", name, t.name),
		"the same bits; n must be a positive multiple of 32.")
	dst := Load(Param("dst"), GP64())
	wp := Load(Param("w"), GP64())
	x := Mem{Base: Load(Param("x"), GP64())}
	n := Load(Param("n"), GP64())
	rows := Load(Param("rows"), GP64())
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	acc := zeros(4)
	i := GP64()
	XORQ(i, i)
	n64 := GP64()
	MOVQ(n, n64)
	ANDQ(I32(-64), n64)
	// Two of dot's steps an iteration (the same accumulators in the same
	// order), then the last 32 elements if n is an odd multiple of 32.
	Label(name + "_loop64")
	CMPQ(i, n64)
	JAE(LabelRef(name + "_loop32"))
	dotStep(t, Mem{Base: wp}, []Mem{x}, i, [][]VecVirtual{acc}, 4)
	dotStep(t, Mem{Base: wp, Disp: 32 * int(t.size)}, []Mem{{Base: x.Base, Disp: 128}}, i, [][]VecVirtual{acc}, 4)
	ADDQ(U32(64), i)
	JMP(LabelRef(name + "_loop64"))
	Label(name + "_loop32")
	CMPQ(i, n)
	JAE(LabelRef(name + "_sum"))
	dotStep(t, Mem{Base: wp}, []Mem{x}, i, [][]VecVirtual{acc}, 4)
	ADDQ(U32(32), i)
	Label(name + "_sum")
	s := hsum(addTree(acc))
	VMOVSS(s, Mem{Base: dst})
	ADDQ(U8(4), dst)
	LEAQ(Mem{Base: wp, Index: n, Scale: t.size}, wp)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// dotStreamsAVX2 writes dot<T>Seq<s>AVX2: dot<T>SeqAVX2 over s runs of
// rows at once, ld rows apart (dst[k*ld+r] = dot<T>AVX2(w[(k*ld+r)*n:][:n],
// x[:n]) for k < s, r < rows), each run's row with dot's four accumulators,
// fused multiply-adds in dot's order and reduction, so the same bits. Its
// point is the memory: s sequential streams of weights instead of one. On
// one core of the Zen 5 a single stream of F16 rows read at 0.85–0.89 of a
// plain sum of the same bytes and two streams 1.05–1.2× a single-stream
// sum (docs/performance.md, "Zen 5: two streams"): the hardware prefetchers
// run ahead on each stream, where one stream's demand loads queue behind
// dot's dependent fused multiply-adds. With s > 3 the 4*s accumulators
// take registers above 15, hence EVEX forms (the avx512 set).
func dotStreamsAVX2(t wtype, s int) {
	name := fmt.Sprintf("dot%sSeq%dAVX2", t.name, s)
	header(name, fmt.Sprintf("func(dst *float32, w *%s, x *float32, n, rows, ld int)", t.goType),
		fmt.Sprintf("%s sets dst[k*ld+r] = dot%sAVX2(w[(k*ld+r)*n:][:n], x[:n]) for k < %d,", name, t.name, s),
		"r < rows, the same bits; n must be a positive multiple of 32.")
	evex := s > 3
	dst := Load(Param("dst"), GP64())
	wp := Load(Param("w"), GP64())
	x := Mem{Base: Load(Param("x"), GP64())}
	n := Load(Param("n"), GP64())
	rows := Load(Param("rows"), GP64())
	ld := Load(Param("ld"), GP64())
	// Run k's weights at wp + k*ld*n*size, its outputs at dst + k*ld*4.
	wstride := GP64()
	MOVQ(ld, wstride)
	IMULQ(n, wstride)
	SHLQ(U8(t.size/2), wstride) // bytes: t.size is 2
	SHLQ(U8(2), ld)
	ws := []Register{wp}
	for k := 1; k < s; k++ {
		r := GP64()
		LEAQ(Mem{Base: ws[k-1], Index: wstride, Scale: 1}, r)
		ws = append(ws, r)
	}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	acc := make([][]VecVirtual, s)
	for k := range acc {
		if evex {
			acc[k] = make([]VecVirtual, 4)
			for j := range acc[k] {
				acc[k][j] = YMM()
				VPXORD(acc[k][j], acc[k][j], acc[k][j])
			}
		} else {
			acc[k] = zeros(4)
		}
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "_loop")
	for j := range 4 {
		xv := YMM()
		VMOVUPS(x.Idx(i, 4).Offset(32*j), xv)
		for k := range s {
			v := YMM()
			t.load(Mem{Base: ws[k], Index: i, Scale: t.size}.Offset(8*j*int(t.size)), v)
			VFMADD231PS(xv, v, acc[k][j])
		}
	}
	ADDQ(U32(32), i)
	CMPQ(i, n)
	JB(LabelRef(name + "_loop"))
	out := GP64()
	MOVQ(dst, out)
	for k := range s {
		if k > 0 {
			ADDQ(ld, out)
		}
		var v VecVirtual
		if evex {
			v = hsumEVEX(addTree(acc[k]))
		} else {
			v = hsum(addTree(acc[k]))
		}
		VMOVSS(v, Mem{Base: out})
		LEAQ(Mem{Base: ws[k], Index: n, Scale: t.size}, ws[k])
	}
	ADDQ(U8(4), dst)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// dotAccAVX2 writes dot<T>AccAVX2, a piece of dot<T>AVX2's main loop: it
// continues the kernel's four accumulators of 8 lanes, kept at acc between
// calls, over n elements (a multiple of 32), with the same fused
// multiply-adds in the same order, so that pieces taken in column order and
// reduced as dot reduces (accSum) give dot's bits. It prefetches the n*2
// bytes at pf into L2 (PREFETCHT1, a line per 32 elements): the Zen 4
// choice's blocked decode (matVecBlocked) passes the piece it takes two
// blocks later, which no hardware prefetcher predicts. Only the Zen 4
// choice calls it, hence the avx512 set.
func dotAccAVX2(t wtype) {
	name := "dot" + t.name + "AccAVX2"
	header(name, fmt.Sprintf("func(acc *float32, w *%s, x *float32, n int, pf *%s)", t.goType, t.goType),
		name+" adds Σ float32(w[i])*x[i] for i < n (a multiple of 32) to the",
		"accumulators acc[0:32] the way dot"+t.name+"AVX2's main loop does, and",
		"prefetches the n*2 bytes at pf into L2.")
	accp := Mem{Base: Load(Param("acc"), GP64())}
	w := Mem{Base: Load(Param("w"), GP64())}
	x := Mem{Base: Load(Param("x"), GP64())}
	n := Load(Param("n"), GP64())
	pf := Mem{Base: Load(Param("pf"), GP64())}
	accLoop(name, t, []Mem{accp}, w, []Mem{x}, n, pf)
}

// dot512PF is dot512 (the same loads, fused multiply-adds and reduction)
// with the prefetch scheme p.
func dot512PF(t wtype, unroll int, p pfMode) {
	name := "dot" + t.name + "AVX512" + p.suffix
	header(name, fmt.Sprintf("func(w []%s, x []float32) float32", t.goType),
		name+" returns Σ float32(w[i])*x[i] for i < len(x), bit for bit as",
		"dot"+t.name+"AVX512, with another weight prefetch.",
		"len(w) must be at least len(x).")
	dot512Body(name, t, unroll, p)
}

// dotQ80AVX512PF is dotQ80AVX512 with the prefetch scheme p.
func dotQ80AVX512PF(unroll int, p pfMode) {
	name := "dotQ80AVX512" + p.suffix
	header(name, "func(w []byte, x []float32) float32",
		name+" returns dotQ80AVX512's result, bit for bit, with another",
		"weight prefetch.")
	dotQ80AVX512Body(name, unroll, p)
}

// dotAVX2PF is the avx2 set's dot (4 accumulators of 8 lanes, the same
// bits) with the prefetch scheme p.
func dotAVX2PF(t wtype, p pfMode) {
	name := "dot" + t.name + "AVX2" + p.suffix
	header(name, fmt.Sprintf("func(w []%s, x []float32) float32", t.goType),
		name+" returns dot"+t.name+"AVX2's result, bit for bit, with a weight prefetch.",
		"len(w) must be at least len(x)&^7.")
	dotAVX2Body(name, t, p)
}

// cpuidKernel writes cpuid, which dispatch_amd64.go uses to tell the CPU's
// vendor and family (golang.org/x/sys/cpu reports features only).
func cpuidKernel() {
	TEXT("cpuid", NOSPLIT, "func(leaf, sub uint32) (eax, ebx, ecx, edx uint32)")
	Doc("cpuid returns the registers CPUID leaves for leaf and subleaf sub.")
	Load(Param("leaf"), EAX)
	Load(Param("sub"), ECX)
	CPUID()
	Store(EAX, Return("eax"))
	Store(EBX, Return("ebx"))
	Store(ECX, Return("ecx"))
	Store(EDX, Return("edx"))
	RET()
}

// dotRowsAVX2 writes dot<T>R<rows>AVX2: rows weight rows side by side
// against one x, each row with dot's arithmetic (4 accumulators of 8
// lanes, the same fused multiply-adds in the same order, addTree and a
// horizontal sum that adds as hsum does), so that row r's result has the
// bits of dot<T>AVX2 on that row. The accumulators need registers above 15,
// hence the avx512 set (EVEX forms on YMM); x's loads are shared by the
// rows.
func dotRowsAVX2(t wtype, rows int) {
	if t.size != 2 {
		panic("dotRowsAVX2: 16-bit weights only")
	}
	name := fmt.Sprintf("dot%sR%dAVX2", t.name, rows)
	header(name, fmt.Sprintf("func(dst *float32, w *%s, ldw int, x *float32, n int)", t.goType),
		fmt.Sprintf("%s sets dst[r] = dot%sAVX2(w[r*ldw:], x[:n]) for r < %d, bit for bit:", name, t.name, rows),
		"Σ float32(w[r*ldw+i])*x[i] for i < n&^7.")
	w0 := Load(Param("w"), GP64())
	x := Mem{Base: Load(Param("x"), GP64())}
	ldw := Load(Param("ldw"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(U8(1), ldw) // bytes per row of 16-bit weights
	bases := []Register{w0}
	for r := 1; r < rows; r++ {
		b := GP64()
		MOVQ(bases[r-1], b)
		ADDQ(ldw, b)
		bases = append(bases, b)
	}
	n32 := elementBounds(n, 32)
	acc := make([][]VecVirtual, rows)
	for r := range acc {
		acc[r] = make([]VecVirtual, 4)
		for k := range acc[r] {
			acc[r][k] = YMM()
			VPXORD(acc[r][k], acc[r][k], acc[r][k])
		}
	}
	elementLoops(name, 32, n32, n, func(i Register, vecs int) {
		xs := make([]VecVirtual, vecs)
		for k := range xs {
			xs[k] = YMM()
			VMOVUPS(x.Idx(i, 4).Offset(32*k), xs[k])
		}
		for r := range rows {
			for k := range vecs {
				v := YMM()
				t.load(Mem{Base: bases[r], Index: i, Scale: t.size}.Offset(8*k*int(t.size)), v)
				VFMADD231PS(xs[k], v, acc[r][k])
			}
		}
	})

	Label(name + "_done")
	dst := Mem{Base: Load(Param("dst"), GP64())}
	for r := range rows {
		s := hsumEVEX(addTree(acc[r]))
		VMOVSS(s, dst.Offset(4*r))
	}
	VZEROUPPER()
	RET()
}

// hsumEVEX returns hsum(y)'s sum in lane 0 of an XMM, with the same
// additions — l = y.lo+y.hi, then (l0+l1)+(l2+l3) — through instructions
// that have EVEX forms (hsum's VEXTRACTF128 and VHADDPS have none), so
// that y may be any of the 32 registers.
func hsumEVEX(y VecVirtual) VecVirtual {
	l := XMM()
	VEXTRACTF32X4(U8(1), y, l)
	VADDPS(y.AsX(), l, l) // lanes l0..l3
	h := XMM()
	VMOVSHDUP(l, h) // l1, l1, l3, l3
	VADDPS(h, l, l) // l0+l1, _, l2+l3, _
	VMOVHLPS(l, l, h)
	VADDSS(h, l, l)
	return l
}
