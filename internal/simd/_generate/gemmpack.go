package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmPacked writes the prefill micro-kernels over a packed weight panel:
// gemmP<M>x16AVX2 for M = 1..6 token rows, and their Acc twins that add to
// dst instead of overwriting it.
func gemmPacked() {
	for m := 1; m <= 6; m++ {
		gemmP(m, false)
		gemmP(m, true)
	}
}

// gemmP: dst[t*ldd+j] (+)= Σ_k x[t*ldx+k]·wp[16k+j] for t < m, j < 16,
// k < kn. wp is a panel of 16 weight rows packed column by column
// (packPanel16 in dispatch_amd64.go: wp[16k+j] is row j's column k), so
// every step loads the 16 rows' column k in two registers, broadcasts
// each token's x[t][k], and does 2m fused multiply-adds into 2m
// accumulators of 8 rows each (an outer product: no horizontal sums, and
// each output is Σ over k in order, one fused multiply-add a step). The
// k loop is unrolled 4 times; kn need not be a multiple of 4.
func gemmP(m int, acc bool) {
	name := fmt.Sprintf("gemmP%dx16AVX2", m)
	what := "sets"
	if acc {
		name = fmt.Sprintf("gemmP%dx16AccAVX2", m)
		what = "adds to"
	}
	header(name, "func(dst *float32, ldd int, x *float32, ldx int, wp *float32, kn int)",
		fmt.Sprintf("%s %s dst[t*ldd+j] Σ_k x[t*ldx+k]*wp[16*k+j] for t < %d, j < 16, k < kn.", name, what, m))
	dst := Load(Param("dst"), GP64())
	xb := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	wp := Load(Param("wp"), GP64())
	kn := Load(Param("kn"), GP64())
	xr := make([]GPVirtual, m)
	for t := range xr {
		xr[t] = GP64()
		if t == 0 {
			MOVQ(xb, xr[t])
		} else {
			LEAQ(Mem{Base: xr[t-1], Index: ldx, Scale: 1}, xr[t])
		}
	}
	if acc {
		// The tile of dst is read at the end: have it in L1 by then
		// (its rows are usually far apart, in L3, one or two lines each).
		ldd := Load(Param("ldd"), GP64())
		SHLQ(U8(2), ldd)
		d := GP64()
		MOVQ(dst, d)
		eachRow(d, ldd, m, func(int) {
			PREFETCHT0(Mem{Base: d})
			PREFETCHT0(Mem{Base: d, Disp: 63})
		})
	}
	c := zeros(2 * m)
	i := GP64() // byte offset into the x rows
	XORQ(i, i)
	n4 := GP64()
	MOVQ(kn, n4)
	ANDQ(I32(-4), n4)
	SHLQ(U8(2), n4)
	SHLQ(U8(2), kn)
	step := func(u int) {
		w0, w1 := YMM(), YMM()
		VMOVUPS(Mem{Base: wp, Disp: 64 * u}, w0)
		VMOVUPS(Mem{Base: wp, Disp: 64*u + 32}, w1)
		for t := 0; t < m; t++ {
			b := YMM()
			VBROADCASTSS(Mem{Base: xr[t], Index: i, Scale: 1, Disp: 4 * u}, b)
			VFMADD231PS(w0, b, c[2*t])
			VFMADD231PS(w1, b, c[2*t+1])
		}
	}
	Label(name + "_loop4")
	CMPQ(i, n4)
	JAE(LabelRef(name + "_loop1"))
	for u := 0; u < 4; u++ {
		step(u)
	}
	ADDQ(U32(256), wp)
	ADDQ(U32(16), i)
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_loop1")
	CMPQ(i, kn)
	JAE(LabelRef(name + "_store"))
	step(0)
	ADDQ(U32(64), wp)
	ADDQ(U32(4), i)
	JMP(LabelRef(name + "_loop1"))

	// All loads of dst before any store: the rows are often a multiple
	// of 4 KiB apart, and a load right after a store to the same address
	// modulo 4 KiB waits for the store (4K aliasing).
	Label(name + "_store")
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	if acc {
		d := GP64()
		MOVQ(dst, d)
		eachRow(d, ldd, m, func(t int) {
			for h := 0; h < 2; h++ {
				VADDPS(Mem{Base: d, Disp: 32 * h}, c[2*t+h], c[2*t+h])
			}
		})
	}
	eachRow(dst, ldd, m, func(t int) {
		for h := 0; h < 2; h++ {
			VMOVUPS(c[2*t+h], Mem{Base: dst, Disp: 32 * h})
		}
	})
	VZEROUPPER()
	RET()
}
