package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The attention kernels of attention.go on 512-bit registers, for head
// sizes that are a multiple of 16 (64, 80, 96, 128, 256: the dispatcher
// keeps the AVX2 kernels for the others). They have the same signatures
// and the same meaning; accumulate takes every fused multiply-add in the
// AVX2 kernel's order (each output column is its own lane), so its results
// are the AVX2 kernel's bits, while scores sums 16 columns per lane group
// instead of 8 and reduces in another order, so its scores differ from the
// AVX2 kernel's in the last bits.

// reduceRows512 returns an XMM whose lane j holds the lane sum of the ZMM
// a[j], for len(a) of 1 to 4 (lanes past len(a) hold junk). It sums pairs
// of rows at full width first (so four rows cost four shuffles, three adds
// and one fold of 16 lanes to 4) and uses only instructions with EVEX
// forms.
func reduceRows512(a []VecVirtual) VecVirtual {
	// pair(x, y) leaves, in every 128-bit lane, [x0+x2, y0+y2, x1+x3, y1+y3]
	// of that lane.
	pair := func(x, y VecVirtual) VecVirtual {
		lo, hi := ZMM(), ZMM()
		VUNPCKLPS(y, x, lo)
		VUNPCKHPS(y, x, hi)
		VADDPS(hi, lo, lo)
		return lo
	}
	var s VecVirtual
	if len(a) == 1 {
		s = a[0] // lane sums of 4 in each 128-bit lane: two shuffles
		t := ZMM()
		VSHUFPS(U8(0x4E), s, s, t) // [2, 3, 0, 1]
		VADDPS(t, s, t)
		u := ZMM()
		VSHUFPS(U8(0xB1), t, t, u) // [1, 0, 3, 2]
		VADDPS(u, t, u)
		s = u
	} else {
		u := pair(a[0], a[1])
		v := u
		switch len(a) {
		case 3:
			v = pair(a[2], a[2])
		case 4:
			v = pair(a[2], a[3])
		}
		// Per 128-bit lane: [u0+u2, u1+u3, v0+v2, v1+v3] = rows 0..3.
		s = ZMM()
		t := ZMM()
		VSHUFPS(U8(0x44), v, u, s) // [u0, u1, v0, v1]
		VSHUFPS(U8(0xEE), v, u, t) // [u2, u3, v2, v3]
		VADDPS(t, s, s)
	}
	// Fold the four 128-bit lanes. The temporaries are ZMM virtuals used
	// through their YMM and XMM views, so that they may take any of the 32
	// registers: a YMM or XMM virtual is given one of the first 16, which
	// the live accumulators may all hold.
	y := ZMM()
	VEXTRACTF64X4(U8(1), s, y.AsY())
	VADDPS(s.AsY(), y.AsY(), y.AsY())
	x := ZMM()
	VEXTRACTF32X4(U8(1), y.AsY(), x.AsX())
	VADDPS(y.AsX(), x.AsX(), x.AsX())
	return x.AsX().(VecVirtual)
}

// attention512 writes the AVX-512 scores and accumulate kernels, blocked
// as the comment at each says.
func attention512() {
	for _, b := range []struct{ qb, r, cv int }{{1, 8, 8}, {2, 5, 8}, {3, 4, 8}, {4, 3, 4}} {
		scores(b.qb, b.r, zmm)
		accumulate(b.qb, b.cv, zmm)
	}
}
