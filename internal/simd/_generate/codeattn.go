package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Attention kernels over packed unsigned codes (8- or 4-bit), read straight
// from the tile: the codes of 8 columns are widened to int32 lanes and
// converted to float32 in registers, and never stored. They compute raw
// dot products and sums of codes; the caller applies the per-group scale
// and zero, once per (row, group, query), so the inner loops carry no
// affine work. The register blocking is that of scores and accumulate.
//
// Rows of codes have a stride of ldc bytes and cols columns are read from
// each (cols&^7 of them; the caller finishes the rest), so one call can
// cover one group of every row.
//
// The same generators write the AVX-512 kernels (width zmm): 16 lanes a
// vector, so an 8-bit step is 16 codes and a 4-bit block of 32 codes is two
// vectors (the low nibbles of its 16 bytes, then the high ones). Their
// accumulate takes each weight by an embedded broadcast in the fused
// multiply-add and loads one code vector at a time, as accumulate512 does;
// every accumulator sees the same multiply-adds in the same order as in the
// AVX2 kernel, so the two give the same bits (vecWidth is attention.go's).

// codeRowLoader returns a function that loads vector p of the step of
// codes at m as float32 lanes of a new vector of width w. An 8-bit step is
// one vector of codes; a 4-bit step is a block of 32 codes (16 bytes, byte
// k holding codes k and k+16). On YMM its vector p is codes 8p..8p+7: the
// low nibbles of bytes 8p..8p+7 for p < 2, the high nibbles of bytes
// 8(p−2).. for p ≥ 2; on ZMM vector 0 is the low nibbles of all 16 bytes,
// vector 1 the high ones. It keeps no constants in registers: the 4-bit
// mask is a memory operand (broadcast from its first lane on ZMM), as every
// vector register goes to the blocking.
func codeRowLoader(k codeKind, mask Mem, w vecWidth) func(m Mem, p int) VecVirtual {
	return func(m Mem, p int) VecVirtual {
		v := w.vec()
		switch {
		case k.bits == 8:
			VPMOVZXBD(m, v)
		case k.bits == 4 && w.lanes == 16:
			VPMOVZXBD(m, v)
			if p == 0 {
				VPANDD_BCST(mask, v, v)
			} else {
				VPSRLD(U8(4), v, v)
			}
		case k.bits == 4:
			VPMOVZXBD(m.Offset(8*(p&1)), v)
			if p < 2 {
				VPAND(mask, v, v)
			} else {
				VPSRLD(U8(4), v, v)
			}
		default:
			panic("codeRowLoader")
		}
		VCVTDQ2PS(v, v)
		return v
	}
}

// codeStep is the number of columns a code kernel's inner loop takes at a
// time: one vector of 8-bit codes, one block of 32 4-bit codes.
func codeStep(k codeKind, w vecWidth) int {
	if k.bits == 4 {
		return 32
	}
	return w.lanes
}

// codeMask returns the static vector of 8 lanes of 2^bits−1.
func codeMask(bits int) Mem {
	m := GLOBL(fmt.Sprintf("u%dmask", bits), RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		DATA(4*j, U32(uint32(1<<bits-1)))
	}
	return m
}

// qScale is the scale from a code byte offset to a float32 byte offset:
// 8 codes take k.bits bytes and 32 bytes of float32.
func qScale(k codeKind) uint8 { return uint8(32 / k.groupBytes()) }

// scoresCodes writes scores<K>Q<qb><AVX2|AVX512>: dst[i*ldd+j] = Σ_{c < cols&^(step−1)}
// q[i*ldq+c]*code_j,c for i < qb, j < n, with row j's codes at byte
// j*ldc of codes. One counter indexes both the codes (in bytes) and the
// queries (scaled by qScale).
func scoresCodes(k codeKind, qb, r int, mask Mem, w vecWidth) {
	name := fmt.Sprintf("scores%sQ%d%s", upper(k.name), qb, w.suffix)
	step := codeStep(k, w)
	layout := "byte j*ldc of codes"
	if k.bits == 4 {
		layout += " (blocks of 32: byte k of a block holds codes k and k+16, low nibble first)"
	}
	header(name, "func(dst *float32, ldd int, q *float32, ldq int, codes *byte, ldc int, cols int, n int)",
		fmt.Sprintf("%s sets dst[i*ldd+j] = Σ_{c < cols&^%d} q[i*ldq+c]*code(j, c)", name, step-1),
		fmt.Sprintf("for i < %d, j < n, where code(j, c) is the %d-bit code c of the row at", qb, k.bits),
		fmt.Sprintf("%s. cols must be at least %d.", layout, step))
	load := codeRowLoader(k, mask, w)
	sc := qScale(k)
	vecs := step / w.lanes         // vectors per step
	stepBytes := step * k.bits / 8 // code bytes per step
	cb := Load(Param("cols"), GP64())
	ANDQ(I32(-step), cb)
	qoff := GP64()
	MOVQ(cb, qoff)
	SHLQ(U8(2), qoff) // float bytes of the columns covered
	if k.bits == 4 {
		SHRQ(U8(1), cb) // code bytes: two codes a byte
	}
	q0 := Load(Param("q"), GP64())
	ADDQ(qoff, q0)
	ldq := Load(Param("ldq"), GP64())
	SHLQ(U8(2), ldq)
	qs := rowPtrs(q0, ldq, qb)
	stride := Load(Param("ldc"), GP64())
	rp := Load(Param("codes"), GP64())
	ADDQ(cb, rp)
	dp := Load(Param("dst"), GP64())
	n := Load(Param("n"), GP64())

	vb := w.bytes()
	block := func(w2 int, tag string) {
		rs := rowPtrs(rp, stride, w2)
		acc := zeroGrid(qb, w2, w.zeros)
		c := GP64()
		MOVQ(cb, c)
		NEGQ(c)
		Label(name + "_dloop" + tag)
		for p := 0; p < vecs; p++ {
			if qb == 1 {
				// One query: each row vector is used once, right after
				// its conversion.
				qv := w.vec()
				VMOVUPS(Mem{Base: qs[0], Index: c, Scale: sc, Disp: vb * p}, qv)
				for j := 0; j < w2; j++ {
					VFMADD231PS(load(Mem{Base: rs[j], Index: c, Scale: 1}, p), qv, acc[0][j])
				}
				continue
			}
			rv := make([]VecVirtual, w2)
			for j := range rv {
				rv[j] = load(Mem{Base: rs[j], Index: c, Scale: 1}, p)
			}
			for i := 0; i < qb; i++ {
				qv := w.vec()
				VMOVUPS(Mem{Base: qs[i], Index: c, Scale: sc, Disp: vb * p}, qv)
				for j := 0; j < w2; j++ {
					VFMADD231PS(rv[j], qv, acc[i][j])
				}
			}
		}
		ADDQ(U8(stepBytes), c)
		JNZ(LabelRef(name + "_dloop" + tag))

		storeScores(acc, dp, rp, stride, n, w.reduce)
	}

	blockLoop(name, n, r, block)
	VZEROUPPER()
	RET()
}

// accumulateCodes writes accumulate<K>Q<qb><AVX2|AVX512>: acc[i*lda+c] += bias[i] +
// Σ_{j<n} w[i*ldw+j]*code_j,c for i < qb, c < cols&^(step−1). As in
// accumulate, columns go up to cv vectors at a time with the accumulators
// in registers over all n rows; bias is added once, when they are loaded.
// 8-bit codes run over chunks of cv vectors; 4-bit codes over blocks of 32
// columns, each block's 4 vectors split into chunks of at most cv.
func accumulateCodes(k codeKind, qb, cv int, mask Mem, w vecWidth) {
	name := fmt.Sprintf("accumulate%sQ%d%s", upper(k.name), qb, w.suffix)
	step := codeStep(k, w)
	layout := "at byte j*ldc of codes"
	if k.bits == 4 {
		layout += " (blocks of 32: byte k of a block holds codes k and k+16, low nibble first)"
	}
	header(name, "func(acc *float32, lda int, bias *float32, w *float32, ldw int, codes *byte, ldc int, cols int, n int)",
		fmt.Sprintf("%s sets acc[i*lda+c] += bias[i] + Σ_{j<n} w[i*ldw+j]*code(j, c)", name),
		fmt.Sprintf("for i < %d, c < cols&^%d, where code(j, c) is the %d-bit code c of the row", qb, step-1, k.bits),
		layout+".")
	load := codeRowLoader(k, mask, w)
	vb, vecs := w.bytes(), step/w.lanes
	w0 := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	SHLQ(U8(2), ldw)
	ws := rowPtrs(w0, ldw, qb)
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	count := Load(Param("cols"), GP64())
	if k.bits == 4 {
		SHRQ(U8(5), count) // 32-column blocks left
	} else if w.lanes == 16 {
		SHRQ(U8(4), count) // 16-column vectors left
	} else {
		SHRQ(U8(3), count) // 8-column vectors left
	}
	ap := Load(Param("acc"), GP64())
	rc := Load(Param("codes"), GP64())
	ldc := Load(Param("ldc"), GP64())
	n := Load(Param("n"), GP64())

	// chunk runs the columns of vectors ps of the step at ap and rc over
	// all n rows.
	chunk := func(ps []int, tag string) {
		arow := func(i int) Mem {
			switch i {
			case 0:
				return Mem{Base: ap}
			case 1, 2:
				return Mem{Base: ap, Index: lda, Scale: uint8(i)}
			}
			t := GP64()
			LEAQ(Mem{Base: ap, Index: lda, Scale: 2}, t)
			ADDQ(lda, t)
			return Mem{Base: t}
		}
		bp := Load(Param("bias"), GP64())
		a := make([][]VecVirtual, qb)
		for i := range a {
			b := w.vec()
			VBROADCASTSS(Mem{Base: bp, Disp: 4 * i}, b)
			a[i] = make([]VecVirtual, len(ps))
			m := arow(i)
			for c, p := range ps {
				a[i][c] = w.vec()
				VADDPS(m.Offset(vb*p), b, a[i][c])
			}
		}
		rp := GP64()
		MOVQ(rc, rp)
		code := func(p int) VecVirtual {
			if k.bits == 4 {
				return load(Mem{Base: rp}, p)
			}
			return load(Mem{Base: rp, Disp: w.lanes * p}, 0)
		}
		j := GP64()
		XORQ(j, j)
		Label(name + "_jloop" + tag)
		CMPQ(j, n)
		JAE(LabelRef(name + "_store" + tag))
		if w.lanes == 16 {
			for c, p := range ps {
				r := code(p)
				for i := 0; i < qb; i++ {
					VFMADD231PS_BCST(Mem{Base: ws[i], Index: j, Scale: 4}, r, a[i][c])
				}
			}
		} else if qb == 1 {
			b := YMM()
			VBROADCASTSS(Mem{Base: ws[0], Index: j, Scale: 4}, b)
			for c, p := range ps {
				VFMADD231PS(code(p), b, a[0][c])
			}
		} else {
			rv := make([]VecVirtual, len(ps))
			for c, p := range ps {
				rv[c] = code(p)
			}
			for i := 0; i < qb; i++ {
				b := YMM()
				VBROADCASTSS(Mem{Base: ws[i], Index: j, Scale: 4}, b)
				for c := range ps {
					VFMADD231PS(rv[c], b, a[i][c])
				}
			}
		}
		ADDQ(ldc, rp)
		INCQ(j)
		JMP(LabelRef(name + "_jloop" + tag))

		Label(name + "_store" + tag)
		for i := range a {
			m := arow(i)
			for c, p := range ps {
				VMOVUPS(a[i][c], m.Offset(vb*p))
			}
		}
	}

	if k.bits == 8 {
		blockLoop(name, count, cv, func(v int, tag string) {
			ps := make([]int, v)
			for p := range ps {
				ps[p] = p
			}
			chunk(ps, tag)
			ADDQ(U32(vb*v), ap)
			ADDQ(U32(w.lanes*v), rc)
			SUBQ(U8(v), count)
		})
	} else {
		Label(name + "_loop")
		TESTQ(count, count)
		JZ(LabelRef(name + "_done"))
		for p0 := 0; p0 < vecs; p0 += cv {
			var ps []int
			for p := p0; p < min(vecs, p0+cv); p++ {
				ps = append(ps, p)
			}
			chunk(ps, fmt.Sprintf("_p%d", p0))
		}
		ADDQ(U32(128), ap)
		ADDQ(U32(16), rc)
		DECQ(count)
		JMP(LabelRef(name + "_loop"))
		Label(name + "_done")
	}
	VZEROUPPER()
	RET()
}

// upper returns s with its first letter in upper case ("u8" → "U8").
func upper(s string) string { return string(s[0]-'a'+'A') + s[1:] }
