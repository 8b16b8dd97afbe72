package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX-512 set (-set avx512, written to kernels_avx512_amd64.s): the
// decode dot products on 512-bit registers (dotF32AVX512, which must match
// dotF32AVX2 bit for bit, is described at its generator). They need AVX-512 F, and BW for
// the 16-bit mask arithmetic (KMOVW needs only F; VPMOVZXWD on ZMM needs BW);
// dispatch_amd64.go checks F, BW and VL. Unlike the AVX2 kernels the F16,
// BF16 and Q8_0 ones take every element, the tail of fewer than 16 through a masked load (masked-off
// elements are neither read nor faulted on), so that the Go wrapper has
// nothing left to do.

func avx512() {
	for _, t := range []wtype{f16, bf16} {
		dot512(t, 8)
	}
	dotQ80AVX512(4)
	dotF32AVX512()
	multitok512()
	gemmPacked512()
	attention512()
	widen512(f16)
	widen512(bf16)
	decoders512()
	kquant512()
	qdots(true)
	stream512()
	q8legacy(true)
	q8legacyX4() // q8legacymulti.go
	q8gemm()     // q8gemm.go
	// The code kernels, blocked as attention512.
	u4mask := codeMask(4)
	for _, k := range []codeKind{codeU8, codeU4} {
		for _, b := range []struct{ qb, r, cv int }{{1, 8, 8}, {2, 5, 8}, {3, 4, 8}, {4, 3, 4}} {
			scoresCodes(k, b.qb, b.r, u4mask, zmm)
			accumulateCodes(k, b.qb, b.cv, u4mask, zmm)
		}
	}
	for _, vnni := range []bool{false, true} { // q8k.go
		dotQ4KQ8K512(false, vnni)
		dotQ4KQ8K512(true, vnni)
		dotQ6KQ8K512(vnni)
		dotQ4KQ8KX4(vnni) // q8kmulti.go
		dotQ6KQ8KX4(vnni)
	}
	q4kgemm() // q4kgemm.go
}

// The dot products prefetch every 64-byte line of the weights twice ahead
// of its loads: prefetchNear bytes ahead into L1 (PREFETCHT0) and
// prefetchFar bytes ahead into L2 (PREFETCHT1). On the 2-core Xeon (AVX-512
// FP16 class) they were tuned on, streaming 1 GiB of a memory-mapped F16
// GGUF file row by row (2048 columns) on one core, interleaved: no prefetch
// 10.1 GB/s, PREFETCHT0 alone 1024 to 8192 bytes ahead 11.0 to 11.4,
// PREFETCHT1 alone 4096 or 8192 ahead 12.6 to 13.2, both 13.0 to 13.6 for
// every pair of 512 to 2048 near and 4096 to 16384 far (this pair the best
// by a hair); a plain sum of the same bytes 12.5 to 12.8, the AVX2 F16
// kernel 8.9. Prefetches past the end of w are harmless: they never fault.
const (
	prefetchNear = 1024
	prefetchFar  = 8192
)

// prefetchLine prefetches the line at m ahead, as described at prefetchNear.
func prefetchLine(m Mem) {
	PREFETCHT0(m.Offset(prefetchNear))
	PREFETCHT1(m.Offset(prefetchFar))
}

// prefetchLines prefetches the first n lines of the block at w, each as
// prefetchLine does (the k-quant kernels' super-blocks).
func prefetchLines(w Register, n int) {
	for l := 0; l < n; l++ {
		prefetchLine(Mem{Base: w, Disp: 64 * l})
	}
}

// load512 converts the 16 elements at m into float32 lanes of dst; with a
// mask k it loads only the lanes set in k and zeroes the others.
func (t wtype) load512(m Mem, dst VecVirtual, k Op) {
	switch t {
	case f16:
		if k != nil {
			VCVTPH2PS_Z(m, k, dst)
		} else {
			VCVTPH2PS(m, dst)
		}
	case bf16:
		if k != nil {
			VPMOVZXWD_Z(m, k, dst)
		} else {
			VPMOVZXWD(m, dst)
		}
		VPSLLD(U8(16), dst, dst)
	default:
		panic("unknown wtype")
	}
}

func zeros512(n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for i := range v {
		v[i] = ZMM()
		VPXORD(v[i], v[i], v[i])
	}
	return v
}

// hsum512 leaves the sum of the 16 lanes of z in lane 0 of the returned
// XMM. It uses only instructions with EVEX forms, so any register works.
func hsum512(z VecVirtual) VecVirtual {
	y := YMM()
	VEXTRACTF64X4(U8(1), z, y)
	VADDPS(z.AsY(), y, y)
	x := XMM()
	VEXTRACTF32X4(U8(1), y, x)
	VADDPS(y.AsX(), x, x)
	h := XMM()
	VMOVHLPS(x, x, h)
	VADDPS(h, x, x)
	VMOVSHDUP(x, h)
	VADDSS(h, x, x)
	return x
}

// tailMask sets k to the low r bits (r < 16, in a register it clobbers).
func tailMask(r Register, k Op) {
	one := GP32()
	MOVL(U32(1), one)
	SHLXL(r.(GPVirtual).As32(), one, one)
	DECL(one)
	KMOVW(one, k)
}

// elementBounds512 returns n rounded down to a multiple of big, and to a
// multiple of 16, in new registers: the ends of elementLoops512's first
// two loops.
func elementBounds512(n Register, big int) (nBig, n16 Register) {
	nBig, n16 = GP64(), GP64()
	MOVQ(n, nBig)
	ANDQ(I32(-int32(big)), nBig)
	MOVQ(n, n16)
	ANDQ(I32(-16), n16)
	return nBig, n16
}

// elementLoops512 emits an AVX-512 kernel's element loops over the index i
// (a new register, from 0): name+loop, whose body(i, big/16) takes big
// elements (big/16 ZMMs of 16) while i < nBig; name_loop16, whose
// body(i, 1) takes 16 while i < n16; then name_tail, which leaves in n the
// 0 to 15 elements left and, where there are any, has tail(i, k) take them
// under the mask k. All leave for name_done, which the caller emits.
func elementLoops512(name, loop string, big int, nBig, n16, n Register, body func(i Register, vecs int), tail func(i Register, k Op)) {
	i := GP64()
	XORQ(i, i)

	Label(name + loop)
	CMPQ(i, nBig)
	JAE(LabelRef(name + "_loop16"))
	body(i, big/16)
	ADDQ(U32(uint32(big)), i)
	JMP(LabelRef(name + loop))

	Label(name + "_loop16")
	CMPQ(i, n16)
	JAE(LabelRef(name + "_tail"))
	body(i, 1)
	ADDQ(U32(16), i)
	JMP(LabelRef(name + "_loop16"))

	Label(name + "_tail")
	SUBQ(i, n)
	JZ(LabelRef(name + "_done"))
	k := K()
	tailMask(n, k)
	tail(i, k)
}

// dot512: Σ w[i]*x[i] over all len(x) elements, with unroll accumulators
// of 16 lanes in the main loop, prefetching the weights (prefetchLine).
func dot512(t wtype, unroll int) {
	name := "dot" + t.name + "AVX512"
	header(name, fmt.Sprintf("func(w []%s, x []float32) float32", t.goType),
		name+" returns Σ float32(w[i])*x[i] for i < len(x).",
		"len(w) must be at least len(x).")
	dot512Body(name, t, unroll, pfMode{near: prefetchNear, far: prefetchFar})
}

// dot512Body is dot512's code after its header, with the weight prefetch
// scheme p (stream.go's variants differ from dot512 only in p, so they
// give its bits).
func dot512Body(name string, t wtype, unroll int, p pfMode) {
	step := 16 * unroll
	w := Mem{Base: Load(Param("w").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	nStep, n16 := elementBounds512(n, step)
	acc := zeros512(unroll)
	elementLoops512(name, "_loop", step, nStep, n16, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			if off := 16 * k * int(t.size); vecs > 1 && off%64 == 0 {
				p.line(w.Idx(i, t.size).Offset(off))
			}
			v := ZMM()
			t.load512(w.Idx(i, t.size).Offset(16*k*int(t.size)), v, nil)
			VFMADD231PS(x.Idx(i, 4).Offset(64*k), v, acc[k])
		}
	}, func(i Register, k Op) {
		v := ZMM()
		t.load512(w.Idx(i, t.size), v, k)
		xv := ZMM()
		VMOVUPS_Z(x.Idx(i, 4), k, xv)
		VFMADD231PS(xv, v, acc[unroll-1])
	})

	Label(name + "_done")
	s := hsum512(addTree(acc))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// q80Block512 returns Σ_k codes_k*x_k over the Q8_0 block at blk as 16
// partial lanes, x addressing its 32 floats.
func q80Block512(blk, x Mem) VecVirtual {
	c0, c1 := ZMM(), ZMM()
	VPMOVSXBD(blk.Offset(2), c0)
	VPMOVSXBD(blk.Offset(18), c1)
	VCVTDQ2PS(c0, c0)
	VCVTDQ2PS(c1, c1)
	p := ZMM()
	VMULPS(x, c0, p)
	VFMADD231PS(x.Offset(64), c1, p)
	return p
}

// q80Scale512 broadcasts the binary16 scale at m to all lanes of a new ZMM.
func q80Scale512(m Mem) VecVirtual {
	h := YMM()
	VPBROADCASTW(m, h) // all 16 words: VCVTPH2PS widens a YMM to a ZMM
	d := ZMM()
	VCVTPH2PS(h, d)
	return d
}

// dotQ80AVX512: Σ over len(x)/32 blocks of d_b * Σ code*x, unroll blocks
// at a time into as many accumulators, prefetching as dot512 does.
func dotQ80AVX512(unroll int) {
	name := "dotQ80AVX512"
	header(name, "func(w []byte, x []float32) float32",
		name+" returns Σ_b d_b*Σ_i code_b,i*x[32b+i] over the len(x)/32 Q8_0",
		"blocks at w (34 bytes each: binary16 d, then 32 int8 codes).",
		"len(w) must be at least len(x)/32*34.")
	dotQ80AVX512Body(name, unroll, pfMode{near: prefetchNear, far: prefetchFar})
}

// dotQ80AVX512Body is dotQ80AVX512's code after its header, with the
// weight prefetch scheme p (as dot512Body).
func dotQ80AVX512Body(name string, unroll int, p pfMode) {
	w := Load(Param("w").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	nb := Load(Param("x").Len(), GP64())
	SHRQ(U8(5), nb)
	acc := zeros512(unroll)

	Label(name + "_loop")
	CMPQ(nb, U32(uint32(unroll)))
	JB(LabelRef(name + "_loop1"))
	for off := 0; off < 34*unroll; off += 64 {
		p.line(Mem{Base: w, Disp: off})
	}
	for k := 0; k < unroll; k++ {
		blk := Mem{Base: w, Disp: 34 * k}
		q := q80Block512(blk, Mem{Base: x, Disp: 128 * k})
		VFMADD231PS(q80Scale512(blk), q, acc[k])
	}
	ADDQ(U32(uint32(34*unroll)), w)
	ADDQ(U32(uint32(128*unroll)), x)
	SUBQ(U32(uint32(unroll)), nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_loop1")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	blk := Mem{Base: w}
	q := q80Block512(blk, Mem{Base: x})
	VFMADD231PS(q80Scale512(blk), q, acc[0])
	ADDQ(U32(34), w)
	ADDQ(U32(128), x)
	DECQ(nb)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_done")
	s := hsum512(addTree(acc))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// dotF32AVX512 is dotF32AVX2 on 512-bit registers with the same arithmetic:
// its two accumulators hold the AVX2 kernel's four side by side (lanes
// 0-7 of the first are its acc[0], lanes 8-15 its acc[1], and so on), every
// lane takes the same fused multiply-adds in the same order, and the
// accumulators are split back into four YMM for the 8-element loop and for
// the AVX2 kernel's reduction (addTree, then hsum). So the results are
// bit-identical: internal/train's trajectories, recorded with the AVX2
// kernels, stay the same. What it adds is the weight prefetch and fewer
// instructions per element.
func dotF32AVX512() {
	name := "dotF32AVX512"
	header(name, "func(w []float32, x []float32) float32",
		name+" returns Σ w[i]*x[i] for i < len(x)&^7, bit for bit as dotF32AVX2.",
		"len(w) must be at least len(x)&^7.")
	w := Mem{Base: Load(Param("w").Base(), GP64())}
	x := Mem{Base: Load(Param("x").Base(), GP64())}
	n := Load(Param("x").Len(), GP64())
	n32 := GP64()
	MOVQ(n, n32)
	ANDQ(I32(-32), n32)
	ANDQ(I32(-8), n)
	acc := zeros512(2)
	i := GP64()
	XORQ(i, i)

	Label(name + "_loop32")
	CMPQ(i, n32)
	JAE(LabelRef(name + "_split"))
	prefetchLine(w.Idx(i, 4))
	prefetchLine(w.Idx(i, 4).Offset(64))
	for k := 0; k < 2; k++ {
		v := ZMM()
		VMOVUPS(w.Idx(i, 4).Offset(64*k), v)
		VFMADD231PS(x.Idx(i, 4).Offset(64*k), v, acc[k])
	}
	ADDQ(U32(32), i)
	JMP(LabelRef(name + "_loop32"))

	// The AVX2 kernel's four accumulators; the upper halves first, since
	// a VEX write to the low half of a ZMM clears its upper half.
	Label(name + "_split")
	y := []VecVirtual{acc[0].AsY().(VecVirtual), YMM(), acc[1].AsY().(VecVirtual), YMM()}
	VEXTRACTF64X4(U8(1), acc[0], y[1])
	VEXTRACTF64X4(U8(1), acc[1], y[3])

	Label(name + "_loop8")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	v := YMM()
	VMOVUPS(w.Idx(i, 4), v)
	VFMADD231PS(x.Idx(i, 4), v, y[0])
	ADDQ(U32(8), i)
	JMP(LabelRef(name + "_loop8"))

	Label(name + "_done")
	s := hsum(addTree(y))
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// widen512 writes widen<T>AVX512: dst[i] = float32(src[i]) for every
// i < len(dst), 64 values an iteration, the tail of fewer than 16 through a
// masked load and store. The conversion is exact, so the values are those
// of widen<T>AVX2 and the generic twins.
func widen512(t wtype) {
	name := "widen" + t.name + "AVX512"
	header(name, fmt.Sprintf("func(dst []float32, src []%s)", t.goType),
		name+" sets dst[i] = float32(src[i]) for i < len(dst).",
		"len(src) must be at least len(dst).")
	d := Mem{Base: Load(Param("dst").Base(), GP64())}
	s := Mem{Base: Load(Param("src").Base(), GP64())}
	n := Load(Param("dst").Len(), GP64())
	n64, n16 := elementBounds512(n, 64)
	elementLoops512(name, "_loop64", 64, n64, n16, n, func(i Register, vecs int) {
		for k := 0; k < vecs; k++ {
			v := ZMM()
			t.load512(s.Idx(i, t.size).Offset(16*k*int(t.size)), v, nil)
			VMOVUPS(v, d.Idx(i, 4).Offset(64*k))
		}
	}, func(i Register, k Op) {
		v := ZMM()
		t.load512(s.Idx(i, t.size), v, k)
		VMOVUPS(v, k, d.Idx(i, 4))
	})

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
