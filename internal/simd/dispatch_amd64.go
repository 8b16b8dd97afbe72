//go:build amd64 && gc && !purego

package simd

import (
	"math"

	"golang.org/x/sys/cpu"
)

//go:generate go run -C _generate . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg simd
//go:generate go run -C _generate . -set avx512 -out ../kernels_avx512_amd64.s -stubs ../kernels_avx512_amd64.go -pkg simd

// hasAVX2 records, once at package initialisation, whether this CPU runs the
// assembly kernels (they need AVX2, FMA and F16C), and hasAVX512 whether it
// also runs the AVX-512 ones (AVX-512 F, BW and VL, and BMI2 for SHLX).
// useAsm and useAVX512 are the current selection: the detected features
// unless ForceGeneric or ForceAVX2 switched them off. useAVX512 implies
// useAsm.
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasBMI2
	useAsm    = hasAVX2
	useAVX512 = hasAVX512
)

// isZen4 records whether this CPU takes the Zen 4 decode choice, and
// useZen4 whether it is selected (forceZen4 switches it for tests): an AMD
// Zen 4 (family 19h with AVX-512; Zen 3, the same family, has none) or Zen
// 5 (family 1Ah). Under it the avx512 set decodes with the avx2 set's F16
// and BF16 dot products (4 accumulators of 8 lanes; on long rows in
// blocks, with x's block in L1, see zen4Blocked and blocked_amd64.go):
// streaming weights from DRAM the avx512 ones, tuned on an Intel Xeon, ran
// at 0.55 to 0.85 of them on the Zen 4, and not for want of prefetch
// (docs/performance.md, "Zen 4 decode"); on the Zen 5 the model's F16
// decode ran 1.08× as fast with this choice as with the avx512 one on one
// thread and 1.05–1.06× on two, and with four runs of rows read side by
// side (zen5Streams, whatever the row length) 1.48–1.55× and 1.34–1.46×
// ("Zen 5: four streams"). The Q8_0
// kernel stays the avx512 one: on the Zen 4 without its prefetch it
// streamed faster alone but decoded slower in the model.
//
// isHalf512 records whether this CPU takes each 512-bit operation in two
// passes through 256-bit units (the Zen 4), and useHalf512 whether its
// prefill choice is selected: the AVX-512 micro-kernels 6 token rows at a
// time instead of 12 (gemm512Tokens) and packing from more token rows
// (packTokens). The Zen 5 has full-width units and keeps the avx512
// prefill. Kernels reports the Zen 4's choice as "avx512-zen4" and the Zen
// 5's (the Zen 4 decode, the avx512 prefill) as "avx512-zen5".
var (
	isZen4     = hasAVX512 && (cpuFamily == 0x19 || cpuFamily == 0x1a)
	useZen4    = isZen4
	isHalf512  = hasAVX512 && cpuFamily == 0x19
	useHalf512 = isHalf512
)

// zen4PrefetchCols is the row length from which the Zen 4 choice takes
// the avx2 F16 and BF16 dot products with a prefetch of the weights 8 KiB
// ahead into L2 (dotF16AVX2T1, the same bits): on rows of 4096 and 8192
// columns streamed from DRAM they ran 0.98 to 3.3 times as fast as
// without it, on rows of 2048 about 5% slower. A decode product over such
// rows (a multiple of 32 columns) goes through matVecBlocked instead.
const zen4PrefetchCols = 4096

// cpuFamily is amdFamily's answer for this CPU.
var cpuFamily = amdFamily()

// amdFamily returns the CPU family of an AMD processor (base family plus
// extended family), or 0 for another vendor.
func amdFamily() uint32 {
	_, b, c, d := cpuid(0, 0)
	if b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163 { // "AuthenticAMD"
		return 0
	}
	a, _, _, _ := cpuid(1, 0)
	family := a >> 8 & 0xf
	if family == 0xf {
		family += a >> 20 & 0xff
	}
	return family
}

// The AVX2 assembly handles whole groups of 8 elements; these wrappers
// finish the tail of 0 to 7 elements with the generic twin. The AVX-512
// dot products over F16, BF16 and Q8_0 weights take every element, the
// tail through masked loads; the F32 one works as the AVX2 kernel does,
// bit for bit, tail included.

func dotF32(a, b []float32) float32 {
	if !useAsm {
		return dotF32Generic(a, b)
	}
	var s float32
	if useAVX512 {
		s = dotF32AVX512(a, b) // the same bits as dotF32AVX2
	} else {
		s = dotF32AVX2(a, b)
	}
	if n := len(a) &^ 7; n < len(a) {
		s += dotF32Generic(a[n:], b[n:])
	}
	return s
}

func axpyF32(y []float32, alpha float32, x []float32) {
	if !useAsm {
		axpyF32Generic(y, alpha, x)
		return
	}
	axpyF32AVX2(y, alpha, x)
	if n := len(y) &^ 7; n < len(y) {
		axpyF32Generic(y[n:], alpha, x[n:])
	}
}

func scaleF32(x []float32, alpha float32) {
	if !useAsm {
		scaleF32Generic(x, alpha)
		return
	}
	scaleF32AVX2(x, alpha)
	if n := len(x) &^ 7; n < len(x) {
		scaleF32Generic(x[n:], alpha)
	}
}

func mulF32(dst, x, y []float32) {
	if !useAsm {
		mulF32Generic(dst, x, y)
		return
	}
	mulF32AVX2(dst, x, y)
	if n := len(dst) &^ 7; n < len(dst) {
		mulF32Generic(dst[n:], x[n:], y[n:])
	}
}

func mulAddF32(acc, x, y []float32) {
	if !useAsm {
		mulAddF32Generic(acc, x, y)
		return
	}
	mulAddF32AVX2(acc, x, y)
	if n := len(acc) &^ 7; n < len(acc) {
		mulAddF32Generic(acc[n:], x[n:], y[n:])
	}
}

func rotateNeoX(v, c, s []float32) {
	if !useAsm {
		rotateNeoXGeneric(v, c, s)
		return
	}
	ropeNeoXAVX2(v, c, s)
	rotateNeoXFrom(v, c, s, len(c)&^7)
}

func rotatePairs(v, c, s []float32) {
	if !useAsm {
		rotatePairsGeneric(v, c, s)
		return
	}
	ropePairsAVX2(v, c, s)
	if n := len(c) &^ 3; n < len(c) {
		rotatePairsGeneric(v[2*n:], c[n:], s[n:])
	}
}

func sumF32(x []float32) float32 {
	if !useAsm {
		return sumF32Generic(x)
	}
	s := sumF32AVX2(x)
	if n := len(x) &^ 7; n < len(x) {
		s += sumF32Generic(x[n:])
	}
	return s
}

func dotF16(w []uint16, x []float32) float32 {
	switch dotKernelF16() { // shared with matMulEachF16 (multitok_amd64.go)
	case dotAVX512:
		return dotF16AVX512(w, x)
	case dotGo:
		return dotF16Generic(w, x)
	}
	var s float32
	if zen4Prefetch(len(x)) {
		s = dotF16AVX2T1(w, x) // dotF16AVX2's bits
	} else {
		s = dotF16AVX2(w, x)
	}
	if n := len(x) &^ 7; n < len(x) {
		s += dotF16Generic(w[n:], x[n:])
	}
	return s
}

func dotBF16(w []uint16, x []float32) float32 {
	switch dotKernelBF16() { // shared with matMulEachBF16 (multitok_amd64.go)
	case dotAVX512:
		return dotBF16AVX512(w, x)
	case dotGo:
		return dotBF16Generic(w, x)
	}
	var s float32
	if zen4Prefetch(len(x)) {
		s = dotBF16AVX2T1(w, x) // dotBF16AVX2's bits
	} else {
		s = dotBF16AVX2(w, x)
	}
	if n := len(x) &^ 7; n < len(x) {
		s += dotBF16Generic(w[n:], x[n:])
	}
	return s
}

func axpyF16(y []float32, alpha float32, x []uint16) {
	if !useAsm {
		axpyF16Generic(y, alpha, x)
		return
	}
	axpyF16AVX2(y, alpha, x)
	if n := len(y) &^ 7; n < len(y) {
		axpyF16Generic(y[n:], alpha, x[n:])
	}
}

func axpyBF16(y []float32, alpha float32, x []uint16) {
	if !useAsm {
		axpyBF16Generic(y, alpha, x)
		return
	}
	axpyBF16AVX2(y, alpha, x)
	if n := len(y) &^ 7; n < len(y) {
		axpyBF16Generic(y[n:], alpha, x[n:])
	}
}

func dotQ80(w []byte, x []float32) float32 {
	switch dotKernelQ80() { // shared with matMulEachQ80 (multitok_amd64.go)
	case dotAVX512:
		return dotQ80AVX512(w, x)
	case dotGo:
		return dotQ80Generic(w, x)
	}
	return dotQ80AVX2(w, x)
}

func f16ToF32(dst []float32, src []uint16) {
	if !useAsm {
		f16ToF32Generic(dst, src)
		return
	}
	if useAVX512 {
		widenF16AVX512(dst, src)
		return
	}
	widenF16AVX2(dst, src)
	if n := len(dst) &^ 7; n < len(dst) {
		f16ToF32Generic(dst[n:], src[n:])
	}
}

func bf16ToF32(dst []float32, src []uint16) {
	if !useAsm {
		bf16ToF32Generic(dst, src)
		return
	}
	if useAVX512 {
		widenBF16AVX512(dst, src)
		return
	}
	widenBF16AVX2(dst, src)
	if n := len(dst) &^ 7; n < len(dst) {
		bf16ToF32Generic(dst[n:], src[n:])
	}
}

func f32ToF16(dst []uint16, src []float32) {
	if !useAsm {
		f32ToF16Generic(dst, src)
		return
	}
	narrowF16AVX2(dst, src)
	if n := len(dst) &^ 7; n < len(dst) {
		f32ToF16Generic(dst[n:], src[n:])
	}
}

func f32ToBF16(dst []uint16, src []float32) {
	if !useAsm {
		f32ToBF16Generic(dst, src)
		return
	}
	narrowBF16AVX2(dst, src)
	if n := len(dst) &^ 7; n < len(dst) {
		f32ToBF16Generic(dst[n:], src[n:])
	}
}

// The unpacking kernels convert whole groups of 8 codes (whole blocks for
// the GGML formats, which the exported functions require); the generic twin
// finishes the tail.

func u8ToF32(dst []float32, src []byte, scale, bias float32) {
	if !useAsm {
		u8ToF32Generic(dst, src, scale, bias)
		return
	}
	u8ToF32AVX2(dst, src, scale, bias)
	if n := len(dst) &^ 7; n < len(dst) {
		u8ToF32Generic(dst[n:], src[n:], scale, bias)
	}
}

func i8ToF32(dst []float32, src []byte, scale float32) {
	if !useAsm {
		i8ToF32Generic(dst, src, scale)
		return
	}
	i8ToF32AVX2(dst, src, scale)
	if n := len(dst) &^ 7; n < len(dst) {
		i8ToF32Generic(dst[n:], src[n:], scale)
	}
}

func u4ToF32(dst []float32, src []byte, scale, bias float32) {
	if !useAsm {
		u4ToF32Generic(dst, src, scale, bias)
		return
	}
	u4ToF32AVX2(dst, src, scale, bias)
	if n := len(dst) &^ 31; n < len(dst) {
		u4ToF32Generic(dst[n:], src[n/2:], scale, bias) // the last, short block
	}
}

func u2ToF32(dst []float32, src []byte, scale, bias float32) {
	if !useAsm {
		u2ToF32Generic(dst, src, scale, bias)
		return
	}
	if useAVX512 && len(dst)%4 == 0 {
		u2ToF32AVX512(dst, src[:len(dst)/4], scale, bias)
		return
	}
	u2ToF32AVX2(dst, src, scale, bias)
	if n := len(dst) &^ 7; n < len(dst) {
		u2ToF32Generic(dst[n:], src[n/4:], scale, bias)
	}
}

func u8ToF32Vec(dst []float32, src []byte, s, z []float32) {
	if !useAsm {
		u8ToF32VecGeneric(dst, src, s, z)
		return
	}
	u8ToF32VecAVX2(dst, src, s, z)
	if n := len(dst) &^ 7; n < len(dst) {
		u8ToF32VecGeneric(dst[n:], src[n:], s[n:], z[n:])
	}
}

func u4ToF32Vec(dst []float32, src []byte, s, z []float32) {
	if !useAsm {
		u4ToF32VecGeneric(dst, src, s, z)
		return
	}
	u4ToF32VecAVX2(dst, src, s, z)
	if n := len(dst) &^ 31; n < len(dst) {
		u4ToF32VecGeneric(dst[n:], src[n/2:], s[n:], z[n:]) // the last, short block
	}
}

func u2ToF32Vec(dst []float32, src []byte, s, z []float32) {
	if !useAsm {
		u2ToF32VecGeneric(dst, src, s, z)
		return
	}
	u2ToF32VecAVX2(dst, src, s, z)
	if n := len(dst) &^ 7; n < len(dst) {
		u2ToF32VecGeneric(dst[n:], src[n/4:], s[n:], z[n:])
	}
}

// The grouped unpackers run the assembly over all groups at once when a
// group is whole vectors of 8 codes (whole blocks of 32 for 4-bit codes).
// Other group sizes above 8 that start every group on a byte boundary take
// the ungrouped dispatcher group by group (assembly, then a generic tail);
// the rest, and 4-bit groups that are not whole blocks, take the generic
// twin.

func u8ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	switch {
	case !useAsm:
		u8ToF32GroupsGeneric(dst, src, group, scale, bias)
	case group%8 == 0:
		u8ToF32GroupsAVX2(dst, src, group, scale, bias)
	case group > 8:
		bias = bias[:len(scale)]
		for g, s := range scale {
			i := g * group
			u8ToF32(dst[i:i+group], src[i:i+group], s, bias[g])
		}
	default:
		u8ToF32GroupsGeneric(dst, src, group, scale, bias)
	}
}

func u4ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	switch {
	case !useAsm:
		u4ToF32GroupsGeneric(dst, src, group, scale, bias)
	case group%32 == 0 && useAVX512:
		u4ToF32GroupsAVX512(dst, src, group, scale, bias)
	case group%32 == 0:
		u4ToF32GroupsAVX2(dst, src, group, scale, bias)
	default:
		u4ToF32GroupsGeneric(dst, src, group, scale, bias)
	}
}

func u2ToF32Groups(dst []float32, src []byte, group int, scale, bias []float32) {
	switch {
	case !useAsm:
		u2ToF32GroupsGeneric(dst, src, group, scale, bias)
	case group%16 == 0 && useAVX512:
		u2ToF32GroupsAVX512(dst, src, group, scale, bias)
	case group%8 == 0:
		u2ToF32GroupsAVX2(dst, src, group, scale, bias)
	case group > 8 && group%4 == 0:
		bias = bias[:len(scale)]
		for g, s := range scale {
			i := g * group
			u2ToF32(dst[i:i+group], src[i/4:(i+group)/4], s, bias[g])
		}
	default:
		u2ToF32GroupsGeneric(dst, src, group, scale, bias)
	}
}

// The table lookups convert whole groups of 8 codes; the generic twin
// finishes a 4-bit tail of 2 to 6 values or a 2-bit tail of 4. The 3-bit
// kernel takes every group (lengths are whole groups), the last one without
// reading past src.

func lut4ToF32(dst []float32, src []byte, table *[16]float32) {
	if !useAsm {
		lut4ToF32Generic(dst, src, table)
		return
	}
	lut4ToF32AVX2(dst, src, table)
	if n := len(dst) &^ 7; n < len(dst) {
		lut4ToF32Generic(dst[n:], src[n/2:], table)
	}
}

func lut3ToF32(dst []float32, src []byte, table *[8]float32) {
	if !useAsm {
		lut3ToF32Generic(dst, src, table)
		return
	}
	lut3ToF32AVX2(dst, src, table)
}

func lut2ToF32(dst []float32, src []byte, table *[4]float32) {
	if !useAsm {
		lut2ToF32Generic(dst, src, table)
		return
	}
	lut2ToF32AVX2(dst, src, table)
	if n := len(dst) &^ 7; n < len(dst) {
		lut2ToF32Generic(dst[n:], src[n/4:], table)
	}
}

func q80ToF32(dst []float32, src []byte) {
	if !useAsm {
		q80ToF32Generic(dst, src)
		return
	}
	if useAVX512 {
		q80ToF32AVX512(dst, src)
		return
	}
	q80ToF32AVX2(dst, src)
}

func q40ToF32(dst []float32, src []byte) {
	if !useAsm {
		q40ToF32Generic(dst, src)
		return
	}
	if useAVX512 {
		q40ToF32AVX512(dst, src)
		return
	}
	q40ToF32AVX2(dst, src)
}

func q41ToF32(dst []float32, src []byte) {
	if !useAsm {
		q41ToF32Generic(dst, src)
		return
	}
	if useAVX512 {
		q41ToF32AVX512(dst, src)
		return
	}
	q41ToF32AVX2(dst, src)
}

func q50ToF32(dst []float32, src []byte) {
	if !useAsm {
		q50ToF32Generic(dst, src)
		return
	}
	q50ToF32AVX2(dst, src)
}

func q51ToF32(dst []float32, src []byte) {
	if !useAsm {
		q51ToF32Generic(dst, src)
		return
	}
	q51ToF32AVX2(dst, src)
}

func iq4nlToF32(dst []float32, src []byte) {
	if !useAsm {
		iq4nlToF32Generic(dst, src)
		return
	}
	iq4nlToF32AVX2(dst, src)
}

// The 8-bit float dispatchers convert the AVX2 kernels' tail of 0 to 7
// values first (the AVX-512 kernels take every value), so
// that nothing is live across the assembly call: the tail-last form of the
// other dispatchers spills every argument around the call, which measured
// about 1 ns a call on Zen 4, 10% of a row of 128 values.

func e5m2ToF32(dst []float32, src []byte, scale float32) {
	if !useAsm {
		e5m2ToF32Generic(dst, src, scale)
		return
	}
	if useAVX512 {
		e5m2ToF32AVX512(dst, src, scale)
		return
	}
	if n := len(dst) &^ 7; n < len(dst) {
		e5m2ToF32Generic(dst[n:], src[n:], scale)
	}
	e5m2ToF32AVX2(dst, src, scale)
}

// e4m3ToF32's kernel multiplies value/256 (a binary16) by 256*scale, which
// rounds like value*scale as long as 256*scale is exact. It is not when it
// overflows (|scale| > MaxFloat32/256, about 2^120, far beyond any real
// scale); such calls take the generic twin.
func e4m3ToF32(dst []float32, src []byte, scale float32) {
	scale256 := scale * 256
	if !useAsm || math.IsInf(float64(scale256), 0) && !math.IsInf(float64(scale), 0) {
		e4m3ToF32Generic(dst, src, scale)
		return
	}
	if useAVX512 {
		e4m3ToF32AVX512(dst, src, scale256)
		return
	}
	if n := len(dst) &^ 7; n < len(dst) {
		e4m3ToF32Generic(dst[n:], src[n:], scale)
	}
	e4m3ToF32AVX2(dst, src, scale256)
}

// The attention kernels take a fixed number of query rows (1 to 4) and all
// n rows over the dim&^7 leading columns; see _generate/attention.go for
// their register blocking. They are called directly, in a switch: a call
// through a function value would make every slice argument escape, and
// callers pass stack buffers.

// queryBlock returns how many of the nq-i remaining query rows the next
// kernel call takes: 4 while at least 4 remain, then the rest.
func queryBlock(nq, i int) int { return min(nq-i, 4) }

// scoresBlock and accumulateBlock run the kernel for qb ≤ 4 queries: the
// AVX-512 one where the head size is a multiple of 16 (accumulate's gives
// the AVX2 kernel's bits, scores' differs in the last bits), else AVX2.
func scoresBlock(qb int, dst *float32, ldd int, q, rows *float32, dim, n int) {
	if useAVX512 && dim%16 == 0 {
		switch qb {
		case 1:
			scoresQ1AVX512(dst, ldd, q, rows, dim, n)
		case 2:
			scoresQ2AVX512(dst, ldd, q, rows, dim, n)
		case 3:
			scoresQ3AVX512(dst, ldd, q, rows, dim, n)
		default:
			scoresQ4AVX512(dst, ldd, q, rows, dim, n)
		}
		return
	}
	switch qb {
	case 1:
		scoresQ1AVX2(dst, ldd, q, rows, dim, n)
	case 2:
		scoresQ2AVX2(dst, ldd, q, rows, dim, n)
	case 3:
		scoresQ3AVX2(dst, ldd, q, rows, dim, n)
	default:
		scoresQ4AVX2(dst, ldd, q, rows, dim, n)
	}
}

func accumulateBlock(qb int, acc, w *float32, ldw, dim int, rows *float32, n int) {
	if useAVX512 && dim%16 == 0 {
		switch qb {
		case 1:
			accumulateQ1AVX512(acc, w, ldw, dim, rows, n)
		case 2:
			accumulateQ2AVX512(acc, w, ldw, dim, rows, n)
		case 3:
			accumulateQ3AVX512(acc, w, ldw, dim, rows, n)
		default:
			accumulateQ4AVX512(acc, w, ldw, dim, rows, n)
		}
		return
	}
	switch qb {
	case 1:
		accumulateQ1AVX2(acc, w, ldw, dim, rows, n)
	case 2:
		accumulateQ2AVX2(acc, w, ldw, dim, rows, n)
	case 3:
		accumulateQ3AVX2(acc, w, ldw, dim, rows, n)
	default:
		accumulateQ4AVX2(acc, w, ldw, dim, rows, n)
	}
}

// scoresF32 runs with nq > 0 and n > 0 (the exported function returns
// early otherwise).
func scoresF32(dst []float32, ldd int, q []float32, nq, dim int, rows []float32, n int) {
	if !useAsm || dim < 8 {
		scoresF32Generic(dst, ldd, q, nq, dim, rows, n)
		return
	}
	for i := 0; i < nq; {
		qb := queryBlock(nq, i)
		scoresBlock(qb, &dst[i*ldd], ldd, &q[i*dim], &rows[0], dim, n)
		i += qb
	}
	if d8 := dim &^ 7; d8 < dim {
		for i := 0; i < nq; i++ {
			qi := q[i*dim+d8 : (i+1)*dim]
			for j := 0; j < n; j++ {
				dst[i*ldd+j] += dotF32Generic(qi, rows[j*dim+d8:(j+1)*dim])
			}
		}
	}
}

// accumulateF32 runs with nq > 0 and n > 0.
func accumulateF32(acc []float32, w []float32, ldw, nq, dim int, rows []float32, n int) {
	if !useAsm || dim < 8 {
		accumulateF32Generic(acc, w, ldw, nq, dim, rows, n)
		return
	}
	for i := 0; i < nq; {
		qb := queryBlock(nq, i)
		accumulateBlock(qb, &acc[i*dim], &w[i*ldw], ldw, dim, &rows[0], n)
		i += qb
	}
	if d8 := dim &^ 7; d8 < dim {
		for i := 0; i < nq; i++ {
			ai := acc[i*dim+d8 : (i+1)*dim]
			for j := 0; j < n; j++ {
				axpyF32Generic(ai, w[i*ldw+j], rows[j*dim+d8:(j+1)*dim])
			}
		}
	}
}

// mmWeight lists the weight element types of the matrix products: float32,
// binary16 or bfloat16 bits, and Q8_0 bytes.
type mmWeight interface{ float32 | uint16 | byte }

// mmKernels describes one weight type's matrix-product micro-kernels. The
// kernels are chosen by switches on the weight type (and bf16), never
// through function values: a call through a function value makes every
// slice and pointer argument escape, and callers pass stack buffers.
type mmKernels[W mmWeight] struct {
	// gemmT × gemmR is the block gemm computes: gemmT token rows against
	// gemmR weight rows.
	gemmT, gemmR int
	// bf16 selects the bfloat16 kernels for uint16 weights (binary16
	// otherwise).
	bf16 bool
	// q80 marks Q8_0 weights: kernel lengths count 32-column blocks and a
	// block of 32 columns takes 34 bytes.
	q80 bool
	// elemBytes is the size of W, for cache blocking.
	elemBytes int
}

// gemm computes a gemmT × gemmR block over kernel length kn (see kn):
// gemmT token rows at x (stride ldx) against gemmR weight rows at w (stride
// ldw), stored to dst (stride ldd), or added to it if acc is set.
func (k *mmKernels[W]) gemm(acc bool, dst *float32, ldd int, x *float32, ldx int, w *W, ldw, kn int) {
	switch w := any(w).(type) {
	case *float32:
		if acc {
			gemm4x3F32AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
		} else {
			gemm4x3F32AVX2(dst, ldd, x, ldx, w, ldw, kn)
		}
	case *uint16:
		k.gemm16(4, acc, dst, ldd, x, ldx, w, ldw, kn)
	case *byte:
		if acc {
			gemm4x3Q80AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
		} else {
			gemm4x3Q80AVX2(dst, ldd, x, ldx, w, ldw, kn)
		}
	}
}

// gemm16 is gemm for binary16 or bfloat16 weights with nt token rows, 2
// to 4 (small: matMul's last token rows; each token row's accumulators,
// order and reduction are the 4-row kernel's, so its bits are too).
func (k *mmKernels[W]) gemm16(nt int, acc bool, dst *float32, ldd int, x *float32, ldx int, w *uint16, ldw, kn int) {
	switch {
	case nt == 4 && k.bf16 && acc:
		gemm4x3BF16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 4 && k.bf16:
		gemm4x3BF16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 4 && acc:
		gemm4x3F16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 4:
		gemm4x3F16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 3 && k.bf16 && acc:
		gemm3x3BF16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 3 && k.bf16:
		gemm3x3BF16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 3 && acc:
		gemm3x3F16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 3:
		gemm3x3F16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 2 && k.bf16 && acc:
		gemm2x3BF16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 2 && k.bf16:
		gemm2x3BF16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	case nt == 2 && acc:
		gemm2x3F16AccAVX2(dst, ldd, x, ldx, w, ldw, kn)
	default:
		gemm2x3F16AVX2(dst, ldd, x, ldx, w, ldw, kn)
	}
}

// evenGroups reports whether all nt token rows of a product go through
// gemm16, in groups of 2 to 4 as even as eachGroup makes them (binary16 or
// bfloat16 weights, nt >= 2), rather than whole groups of gemmT through
// gemm and the rest through the dot product. Every token row then gets
// the same bits whatever nt (above 1) and its place in the call.
func (k *mmKernels[W]) evenGroups(nt int) bool {
	return k.elemBytes == 2 && !k.q80 && nt >= 2
}

// dot is the full single-row dot product (assembly plus tail), used for
// decode and for rows and token rows left over by gemm.
func (k *mmKernels[W]) dot(w []W, x []float32) float32 {
	switch w := any(w).(type) {
	case []float32:
		return dotF32(w, x)
	case []uint16:
		if k.bf16 {
			return dotBF16(w, x)
		}
		return dotF16(w, x)
	case []byte:
		return dotQ80(w, x)
	}
	panic("simd: unreachable")
}

// tail is the generic dot product, used for the columns past gemm's last
// whole group of 8 (never for Q8_0, whose rows are whole blocks).
func (k *mmKernels[W]) tail(w []W, x []float32) float32 {
	switch w := any(w).(type) {
	case []float32:
		return dotF32Generic(w, x)
	case []uint16:
		if k.bf16 {
			return dotBF16Generic(w, x)
		}
		return dotF16Generic(w, x)
	case []byte:
		return dotQ80Generic(w, x)
	}
	panic("simd: unreachable")
}

// rowLen returns the length of a weight row of cols columns, in W elements.
func (k *mmKernels[W]) rowLen(cols int) int {
	if k.q80 {
		return cols / q80BlockSize * q80BlockBytes
	}
	return cols
}

// kn returns the kernel length argument for n columns.
func (k *mmKernels[W]) kn(n int) int {
	if k.q80 {
		return n / q80BlockSize
	}
	return n
}

var (
	mmF32  = mmKernels[float32]{gemmT: 4, gemmR: 3, elemBytes: 4}
	mmF16  = mmKernels[uint16]{gemmT: 4, gemmR: 3, elemBytes: 2}
	mmBF16 = mmKernels[uint16]{gemmT: 4, gemmR: 3, bf16: true, elemBytes: 2}
	mmQ80  = mmKernels[byte]{gemmT: 4, gemmR: 3, q80: true, elemBytes: 1}
)

// Cache blocking of the token-block path: columns are taken mmKC at a time
// (so that a block of gemmT token rows, 32 KiB of float32, stays near L1
// while weight rows stream past it; this paid off for cols of 8192 and
// changed nothing at 2048), and weight rows in chunks of about mmChunkBytes
// of those columns (so that the chunk stays in L2 while every token block
// meets it).
const (
	mmKC         = 2048
	mmChunkBytes = 192 << 10
)

func matMulF32(dst []float32, ldd int, x []float32, nt, cols int, w []float32, r0, r1 int) {
	if !useAsm || cols < 8 {
		matMulF32Generic(dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMul(&mmF32, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	if !useAsm || cols < 8 {
		matMulF16Generic(dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMul(&mmF16, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulBF16(dst []float32, ldd int, x []float32, nt, cols int, w []uint16, r0, r1 int) {
	if !useAsm || cols < 8 {
		matMulBF16Generic(dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMul(&mmBF16, dst, ldd, x, nt, cols, w, r0, r1)
}

func matMulQ80(dst []float32, ldd int, x []float32, nt, cols int, w []byte, r0, r1 int) {
	if !useAsm || cols == 0 {
		matMulQ80Generic(dst, ldd, x, nt, cols, w, r0, r1)
		return
	}
	matMul(&mmQ80, dst, ldd, x, nt, cols, w, r0, r1)
}

// matMul drives the micro-kernels. Shapes were checked by the exported
// function, and cols >= 8 (a whole block for Q8_0).
//
// Token rows in blocks of gemmT go through gemm, gemmR weight rows at a time,
// so each weight vector is loaded and converted once per gemmT tokens, with
// the cache blocking described at mmKC.
//
// The remaining token rows (all of them in decode, nt == 1) take the weight
// rows one at a time, in order, with the single-row dot kernel, so that W is
// read as one sequential stream; each row then serves the (at most three)
// remaining token rows from L1. On the Zen 4 this was tuned on, streaming
// four rows side by side (sharing the token vector loads) was up to 2.6×
// slower from DRAM than one sequential stream, while for cache-resident
// weights it gained at most a third. Since the gemm kernels prefetch the
// next weight rows (the generator's gemm), binary16 and bfloat16 weights
// with 2 token rows or more (evenGroups) take them all through gemm16 in
// groups of 2 to 4 instead: from DRAM (2048×2048 F16, Zen 4, one core) 2
// token rows took 0.31–0.32 ms against 0.55–0.57 by the dot products
// (one row 0.29–0.32), 3 rows 0.34–0.35, 5 rows (3 and 2) 0.54–0.58
// against 0.65 (4 and a dot). Each token row's accumulators, order and
// reduction are the same in the 2-, 3- and 4-row kernels, so a token row
// gets the same bits whatever the number of rows in the call (above one)
// and its place among them. Under the Zen 5 choice a decode product over
// 16-bit rows (zen5Streams) goes through streamDots, under the Zen 4
// choice one over long 16-bit rows (zen4Blocked) through matVecBlocked,
// both with the single-row kernel's bits.
func matMul[W mmWeight](k *mmKernels[W], dst []float32, ldd int, x []float32, nt, cols int, w []W, r0, r1 int) {
	if w16, ok := any(w).([]uint16); ok && nt == 1 {
		switch {
		case zen5Streams(cols):
			streamDots(k.bf16, decodeStreams, dst[r0:r1], w16[r0*cols:r1*cols], x, cols, r1-r0)
			return
		case zen4Blocked(cols):
			matVecBlocked(k.bf16, dst, x, cols, w16, r0, r1)
			return
		}
	}
	if k.packed(nt) {
		r0 = matMulPacked(k, dst, ldd, x, nt, cols, w, r0, r1)
		if r0 == r1 {
			return
		}
	}
	rowLen := k.rowLen(cols)
	n8 := cols &^ 7 // columns gemm covers (all of them for Q8_0)
	kc := min(mmKC, n8)
	T, R := k.gemmT, k.gemmR
	ntg := nt - nt%T // token rows [0, ntg) go through gemm
	even := k.evenGroups(nt)
	if even {
		ntg = nt
	}
	chunk := r1 - r0
	if ntg > 0 {
		chunk = max(R, mmChunkBytes/(k.rowLen(kc)*k.elemBytes)/R*R)
	}
	for rc := r0; rc < r1; rc += chunk {
		re := min(rc+chunk, r1)
		rg := re - (re-rc)%R // weight rows [rc, rg) go through gemm
		for c0 := 0; c0 < n8 && ntg > 0; c0 += kc {
			acc := c0 > 0 // later column blocks add to dst
			kn := k.kn(min(kc, n8-c0))
			wc := k.rowLen(c0) // offset of column c0 in a weight row
			for t := 0; t < ntg; {
				g := T
				if even {
					g = eachGroup(ntg-t, T)
				}
				for r := rc; r < rg; r += R {
					if even {
						w16 := any(&w[r*rowLen+wc]).(*uint16)
						k.gemm16(g, acc, &dst[t*ldd+r], ldd, &x[t*cols+c0], cols, w16, rowLen, kn)
					} else {
						k.gemm(acc, &dst[t*ldd+r], ldd, &x[t*cols+c0], cols, &w[r*rowLen+wc], rowLen, kn)
					}
				}
				t += g
			}
		}
		if n8 < cols {
			for t := 0; t < ntg; t++ {
				xt := x[t*cols+n8 : (t+1)*cols]
				for r := rc; r < rg; r++ {
					dst[t*ldd+r] += k.tail(w[r*rowLen+n8:(r+1)*rowLen], xt)
				}
			}
		}
		for r := rc; r < re; r++ {
			wr := w[r*rowLen : (r+1)*rowLen]
			t := ntg
			if r >= rg {
				t = 0 // a weight row gemm left out: all token rows
			}
			for ; t < nt; t++ {
				dst[t*ldd+r] = k.dot(wr, x[t*cols:(t+1)*cols])
			}
		}
	}
}

// maxF32 takes the maximum of the whole groups of 8 with the assembly,
// which only reports whether it saw a NaN: then the twin finds the first
// one. The tail goes through the twin, and a zero maximum is made +0 (the
// assembly may return either zero).
func maxF32(x []float32) float32 {
	if !useAsm || len(x) < 8 {
		return maxF32Generic(x)
	}
	n := len(x) &^ 7
	m, nan := maxF32AVX2(x[:n])
	if nan {
		return maxF32Generic(x[:n])
	}
	if t := maxF32Generic(x[n:]); t > m || t != t {
		m = t
	}
	if m == 0 {
		return 0
	}
	return m
}

// expShiftSum runs the assembly over the whole groups of 8 and finishes the
// tail with the twin's expShiftTail, so that the sum is the twin's, bit for
// bit.
func expShiftSum(x []float32, scale, shift float32) float64 {
	if !useAsm {
		return expShiftSumGeneric(x, scale, shift)
	}
	n := len(x) &^ 7
	s := expShiftSumAVX2(x[:n], scale, shift)
	return expShiftTail(s, x[n:], scale, shift)
}

// expShiftTaylor runs the assembly over whole groups of 8; it stops before a
// group with an argument outside the polynomial's range (above 88.3 or a
// NaN), which the twin then computes, and the twin finishes the tail.
func expShiftTaylor(dst, x []float32, scale, shift float32) {
	if !useAsm {
		expShiftTaylorGeneric(dst, x, scale, shift)
		return
	}
	for {
		k := expShiftTaylorAVX2(dst, x, scale, shift)
		dst, x = dst[k:], x[k:]
		if len(x) < 8 {
			break
		}
		expShiftTaylorGeneric(dst[:8], x[:8], scale, shift)
		dst, x = dst[8:], x[8:]
	}
	expShiftTaylorGeneric(dst, x, scale, shift)
}

func transposeF32(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if !useAsm || rows < 8 || cols < 8 {
		transposeF32Generic(dst, ldd, src, lds, rows, cols)
		return
	}
	transpose8F32AVX2(&dst[0], ldd, &src[0], lds, rows&^7, cols&^7)
	transposeEdges(dst, ldd, src, lds, rows, cols)
}

func asmEnabled() bool { return useAsm }

func avx512Enabled() bool { return useAVX512 }

func zen4Enabled() bool { return useAVX512 && useZen4 }

// half512Enabled reports whether the Zen 4's prefill choice is selected
// (see isHalf512): only with its decode choice.
func half512Enabled() bool { return zen4Enabled() && useHalf512 }

// zen5Enabled reports whether the Zen 5's choice is selected: the Zen 4
// decode choice with full-width 512-bit units (see isHalf512).
func zen5Enabled() bool { return zen4Enabled() && !useHalf512 }

// The packed-code attention kernels cover the leading whole steps of each
// row (8 columns of 8-bit codes, 16 with AVX-512; blocks of 32 of 4-bit
// ones), in query blocks as scoresF32; the generic twin adds the tail.

// codeWide reports whether code attention over rows of cols columns of
// bits-bit codes takes the AVX-512 kernels: where the CPU has them, unless
// 8-bit rows are shorter than their 16-column step (the AVX2 kernels then
// take 8).
func codeWide(bits, cols int) bool { return useAVX512 && (bits == 4 || cols >= 16) }

// codeStep is the number of columns the assembly takes at a time.
func codeStep(bits int, wide bool) int {
	switch {
	case bits == 4:
		return 32
	case wide:
		return 16
	}
	return 8
}

func scoresCodesBlock(wide bool, bits, qb int, dst *float32, ldd int, q *float32, ldq int, codes *byte, ldc, cols, n int) {
	if wide {
		scoresCodesBlock512(bits, qb, dst, ldd, q, ldq, codes, ldc, cols, n)
		return
	}
	if bits == 8 {
		switch qb {
		case 1:
			scoresU8Q1AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
		case 2:
			scoresU8Q2AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
		case 3:
			scoresU8Q3AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
		default:
			scoresU8Q4AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
		}
		return
	}
	switch qb {
	case 1:
		scoresU4Q1AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
	case 2:
		scoresU4Q2AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
	case 3:
		scoresU4Q3AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
	default:
		scoresU4Q4AVX2(dst, ldd, q, ldq, codes, ldc, cols, n)
	}
}

func scoresCodesBlock512(bits, qb int, dst *float32, ldd int, q *float32, ldq int, codes *byte, ldc, cols, n int) {
	if bits == 8 {
		switch qb {
		case 1:
			scoresU8Q1AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
		case 2:
			scoresU8Q2AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
		case 3:
			scoresU8Q3AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
		default:
			scoresU8Q4AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
		}
		return
	}
	switch qb {
	case 1:
		scoresU4Q1AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
	case 2:
		scoresU4Q2AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
	case 3:
		scoresU4Q3AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
	default:
		scoresU4Q4AVX512(dst, ldd, q, ldq, codes, ldc, cols, n)
	}
}

func accumulateCodesBlock(wide bool, bits, qb int, acc *float32, lda int, bias, w *float32, ldw int, codes *byte, ldc, cols, n int) {
	if wide {
		accumulateCodesBlock512(bits, qb, acc, lda, bias, w, ldw, codes, ldc, cols, n)
		return
	}
	if bits == 8 {
		switch qb {
		case 1:
			accumulateU8Q1AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		case 2:
			accumulateU8Q2AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		case 3:
			accumulateU8Q3AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		default:
			accumulateU8Q4AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		}
		return
	}
	switch qb {
	case 1:
		accumulateU4Q1AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	case 2:
		accumulateU4Q2AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	case 3:
		accumulateU4Q3AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	default:
		accumulateU4Q4AVX2(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	}
}

func accumulateCodesBlock512(bits, qb int, acc *float32, lda int, bias, w *float32, ldw int, codes *byte, ldc, cols, n int) {
	if bits == 8 {
		switch qb {
		case 1:
			accumulateU8Q1AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		case 2:
			accumulateU8Q2AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		case 3:
			accumulateU8Q3AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		default:
			accumulateU8Q4AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
		}
		return
	}
	switch qb {
	case 1:
		accumulateU4Q1AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	case 2:
		accumulateU4Q2AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	case 3:
		accumulateU4Q3AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	default:
		accumulateU4Q4AVX512(acc, lda, bias, w, ldw, codes, ldc, cols, n)
	}
}

// scoresCodes runs with nq > 0, cols > 0 and n > 0.
func scoresCodes(bits int, dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	wide := codeWide(bits, cols)
	step := codeStep(bits, wide)
	if !useAsm || cols < step {
		scoresCodesGeneric(bits, false, dst, ldd, q, ldq, nq, 0, cols, codes, ldc, n)
		return
	}
	for i := 0; i < nq; {
		qb := queryBlock(nq, i)
		scoresCodesBlock(wide, bits, qb, &dst[i*ldd], ldd, &q[i*ldq], ldq, &codes[0], ldc, cols, n)
		i += qb
	}
	if c := cols &^ (step - 1); c < cols {
		scoresCodesGeneric(bits, true, dst, ldd, q, ldq, nq, c, cols, codes, ldc, n)
	}
}

// accumulateCodes runs with nq > 0 and cols > 0. The assembly adds the
// bias to the columns it covers, the twin to the tail.
func accumulateCodes(bits int, acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	wide := codeWide(bits, cols)
	step := codeStep(bits, wide)
	if !useAsm || cols < step || n == 0 {
		accumulateCodesGeneric(bits, acc, lda, bias, w, ldw, nq, 0, cols, codes, ldc, n)
		return
	}
	for i := 0; i < nq; {
		qb := queryBlock(nq, i)
		accumulateCodesBlock(wide, bits, qb, &acc[i*lda], lda, &bias[i], &w[i*ldw], ldw, &codes[0], ldc, cols, n)
		i += qb
	}
	if c := cols &^ (step - 1); c < cols {
		accumulateCodesGeneric(bits, acc, lda, bias, w, ldw, nq, c, cols, codes, ldc, n)
	}
}

func scoresU8(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	scoresCodes(8, dst, ldd, q, ldq, nq, cols, codes, ldc, n)
}

func scoresU4(dst []float32, ldd int, q []float32, ldq, nq, cols int, codes []byte, ldc, n int) {
	scoresCodes(4, dst, ldd, q, ldq, nq, cols, codes, ldc, n)
}

func accumulateU8(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	accumulateCodes(8, acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
}

func accumulateU4(acc []float32, lda int, bias, w []float32, ldw, nq, cols int, codes []byte, ldc, n int) {
	accumulateCodes(4, acc, lda, bias, w, ldw, nq, cols, codes, ldc, n)
}
