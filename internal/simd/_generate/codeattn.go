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

// codeRowLoader returns a function that loads the 8 codes at m as float32
// lanes of a new YMM. It keeps no constants in registers: the 4-bit shifts
// and mask are memory operands, as every YMM goes to the blocking.
func codeRowLoader(k codeKind, shifts map[int]Mem, mask Mem) func(m Mem) VecVirtual {
	return func(m Mem) VecVirtual {
		v := YMM()
		switch k.bits {
		case 8:
			VPMOVZXBD(m, v)
		case 4:
			VPBROADCASTD(m, v)
			VPSRLVD(shifts[4], v, v)
			VPAND(mask, v, v)
		default:
			panic("codeRowLoader")
		}
		VCVTDQ2PS(v, v)
		return v
	}
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

// scoresCodes writes scores<K>Q<qb>AVX2: dst[i*ldd+j] = Σ_{c < cols&^7}
// q[i*ldq+c]*code_j,c for i < qb, j < n, with row j's codes at byte
// j*ldc of codes. One counter indexes both the codes (in bytes) and the
// queries (scaled by qScale).
func scoresCodes(k codeKind, qb, r int, shifts map[int]Mem, mask Mem) {
	name := fmt.Sprintf("scores%sQ%dAVX2", upper(k.name), qb)
	header(name, "func(dst *float32, ldd int, q *float32, ldq int, codes *byte, ldc int, cols int, n int)",
		fmt.Sprintf("%s sets dst[i*ldd+j] = Σ_{c < cols&^7} q[i*ldq+c]*code(j, c)", name),
		fmt.Sprintf("for i < %d, j < n, where code(j, c) is the %d-bit code c of the row at", qb, k.bits),
		"byte j*ldc of codes (low bits first). cols must be at least 8.")
	load := codeRowLoader(k, shifts, mask)
	sc := qScale(k)
	cb := Load(Param("cols"), GP64())
	ANDQ(I32(-8), cb)
	qoff := GP64()
	MOVQ(cb, qoff)
	SHLQ(U8(2), qoff) // float bytes of cols&^7 columns
	if k.bits == 4 {
		SHRQ(U8(1), cb) // code bytes: two codes a byte
	}
	qs := make([]Register, qb)
	qs[0] = Load(Param("q"), GP64())
	ADDQ(qoff, qs[0])
	ldq := Load(Param("ldq"), GP64())
	SHLQ(U8(2), ldq)
	for i := 1; i < qb; i++ {
		qs[i] = GP64()
		LEAQ(Mem{Base: qs[i-1], Index: ldq, Scale: 1}, qs[i])
	}
	stride := Load(Param("ldc"), GP64())
	rp := Load(Param("codes"), GP64())
	ADDQ(cb, rp)
	dp := Load(Param("dst"), GP64())
	n := Load(Param("n"), GP64())

	block := func(w int, tag string) {
		rs := make([]Register, w)
		rs[0] = rp
		for j := 1; j < w; j++ {
			rs[j] = GP64()
			LEAQ(Mem{Base: rs[j-1], Index: stride, Scale: 1}, rs[j])
		}
		acc := make([][]VecVirtual, qb)
		for i := range acc {
			acc[i] = zeros(w)
		}
		c := GP64()
		MOVQ(cb, c)
		NEGQ(c)
		Label(name + "_dloop" + tag)
		if qb == 1 {
			// One query: each row vector is used once, right after its
			// conversion.
			qv := YMM()
			VMOVUPS(Mem{Base: qs[0], Index: c, Scale: sc}, qv)
			for j := 0; j < w; j++ {
				VFMADD231PS(load(Mem{Base: rs[j], Index: c, Scale: 1}), qv, acc[0][j])
			}
		} else {
			rv := make([]VecVirtual, w)
			for j := range rv {
				rv[j] = load(Mem{Base: rs[j], Index: c, Scale: 1})
			}
			for i := 0; i < qb; i++ {
				qv := YMM()
				VMOVUPS(Mem{Base: qs[i], Index: c, Scale: sc}, qv)
				for j := 0; j < w; j++ {
					VFMADD231PS(rv[j], qv, acc[i][j])
				}
			}
		}
		ADDQ(U8(k.groupBytes()), c)
		JNZ(LabelRef(name + "_dloop" + tag))

		storeScores(acc, dp, rp, stride, n)
	}

	blockLoop(name, n, r, block)
	VZEROUPPER()
	RET()
}

// accumulateCodes writes accumulate<K>Q<qb>AVX2: acc[i*lda+c] += bias[i] +
// Σ_{j<n} w[i*ldw+j]*code_j,c for i < qb, c < cols&^7. As in accumulate,
// columns go cv vectors at a time with the accumulators in registers over
// all n rows; bias is added once, when they are loaded.
func accumulateCodes(k codeKind, qb, cv int, shifts map[int]Mem, mask Mem) {
	name := fmt.Sprintf("accumulate%sQ%dAVX2", upper(k.name), qb)
	header(name, "func(acc *float32, lda int, bias *float32, w *float32, ldw int, codes *byte, ldc int, cols int, n int)",
		fmt.Sprintf("%s sets acc[i*lda+c] += bias[i] + Σ_{j<n} w[i*ldw+j]*code(j, c)", name),
		fmt.Sprintf("for i < %d, c < cols&^7, where code(j, c) is the %d-bit code c of the row", qb, k.bits),
		"at byte j*ldc of codes (low bits first).")
	load := codeRowLoader(k, shifts, mask)
	ws := make([]Register, qb)
	ws[0] = Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	SHLQ(U8(2), ldw)
	for i := 1; i < qb; i++ {
		ws[i] = GP64()
		LEAQ(Mem{Base: ws[i-1], Index: ldw, Scale: 1}, ws[i])
	}
	lda := Load(Param("lda"), GP64())
	SHLQ(U8(2), lda)
	vecs := Load(Param("cols"), GP64())
	SHRQ(U8(3), vecs) // 8-column vectors left
	ap := Load(Param("acc"), GP64())
	rc := Load(Param("codes"), GP64())
	ldc := Load(Param("ldc"), GP64())
	n := Load(Param("n"), GP64())

	chunk := func(v int, tag string) {
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
			b := YMM()
			VBROADCASTSS(Mem{Base: bp, Disp: 4 * i}, b)
			a[i] = make([]VecVirtual, v)
			m := arow(i)
			for c := range a[i] {
				a[i][c] = YMM()
				VADDPS(m.Offset(32*c), b, a[i][c])
			}
		}
		rp := GP64()
		MOVQ(rc, rp)
		j := GP64()
		XORQ(j, j)
		Label(name + "_jloop" + tag)
		CMPQ(j, n)
		JAE(LabelRef(name + "_store" + tag))
		if qb == 1 {
			b := YMM()
			VBROADCASTSS(Mem{Base: ws[0], Index: j, Scale: 4}, b)
			for c := 0; c < v; c++ {
				VFMADD231PS(load(Mem{Base: rp, Disp: k.groupBytes() * c}), b, a[0][c])
			}
		} else {
			rv := make([]VecVirtual, v)
			for c := range rv {
				rv[c] = load(Mem{Base: rp, Disp: k.groupBytes() * c})
			}
			for i := 0; i < qb; i++ {
				b := YMM()
				VBROADCASTSS(Mem{Base: ws[i], Index: j, Scale: 4}, b)
				for c := 0; c < v; c++ {
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
			for c := range a[i] {
				VMOVUPS(a[i][c], m.Offset(32*c))
			}
		}
		ADDQ(U32(32*v), ap)
		ADDQ(U32(k.groupBytes()*v), rc)
		SUBQ(U8(v), vecs)
	}

	blockLoop(name, vecs, cv, chunk)
	VZEROUPPER()
	RET()
}

// upper returns s with its first letter in upper case ("u8" → "U8").
func upper(s string) string { return string(s[0]-'a'+'A') + s[1:] }
