package gguf

import (
	"encoding/binary"
	"math"
)

// The quantizers reproduce ggml's reference ones byte for byte: the path
// ggml_quantize_chunk takes without an importance matrix, which is what
// llama-quantize runs when given no --imatrix. For q4_0..q8_0, q2_K..q6_K,
// q8_K and mxfp4 that is quantize_row_*_ref; for iq4_nl and iq4_xs it is
// quantize_row_iq4_nl_impl with weights x² and 7 scale trials on each side.
// The arithmetic is float32, in ggml's order, with its rounding helpers:
// nearest_int (round half to even by adding 1.5·2^23) and fp16 stores
// rounded to nearest even. The goldens in testdata/ggml check every type.

// groupMaxEps is ggml's GROUP_MAX_EPS: groups whose largest |x| is below it
// quantize to zero.
const groupMaxEps = 1e-15

// QuantizeRow encodes len(src) values as type t into dst, as llama-quantize
// does without an importance matrix. len(src) must be a multiple of
// t.BlockSize() and dst must hold t.RowBytes(len(src)) bytes; it panics
// otherwise, or if t is not Decodable (programmer errors). f16 and bf16
// round to nearest even.
func QuantizeRow(t Type, dst []byte, src []float32) {
	if !t.Decodable() {
		panic("gguf: QuantizeRow of " + t.String())
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(src)%bs != 0 || len(dst) < len(src)/bs*ts {
		panic("gguf: QuantizeRow: " + t.String() + " row size mismatch")
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
		return
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], f32ToBF16(v))
		}
		return
	}
	enc := encoders[t]
	for b := 0; b < len(src)/bs; b++ {
		blk := dst[b*ts : (b+1)*ts]
		clear(blk)
		enc(blk, src[b*bs:(b+1)*bs])
	}
}

// encoders holds one block encoder per quantized type; each gets a zeroed
// block.
var encoders = map[Type]func(dst []byte, x []float32){
	Q40: quantQ40, Q41: quantQ41, Q50: quantQ50, Q51: quantQ51, Q80: quantQ80,
	Q2K: quantQ2K, Q3K: quantQ3K, Q4K: quantQ4K, Q5K: quantQ5K, Q6K: quantQ6K, Q8K: quantQ8K,
	IQ4NL: quantIQ4NL, IQ4XS: quantIQ4XS, MXFP4: quantMXFP4,
}

// f32ToBF16 rounds to nearest even (NaN stays a quiet NaN), as ggml's
// GGML_FP32_TO_BF16.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16 | 64)
	}
	return uint16((u + (0x7fff + (u >> 16 & 1))) >> 16)
}

func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

// nearestInt is ggml's nearest_int: round to nearest, ties to even, for
// |f| ≤ 4194303.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(int32(math.Float32bits(v)&0x7fffff) - 0x400000)
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// absMax returns the element of largest |x| (the first on ties) and |it|.
func absMax(x []float32) (m, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	return m, amax
}

func inverse(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

func quantQ40(y []byte, x []float32) {
	m, _ := absMax(x)
	d := m / -8
	id := inverse(d)
	putHalf(y, d)
	for j := 0; j < 16; j++ {
		q0 := min(15, int8(int32(float32(x[j]*id)+8.5)))
		q1 := min(15, int8(int32(float32(x[j+16]*id)+8.5)))
		y[2+j] = uint8(q0) | uint8(q1)<<4
	}
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantQ41(y []byte, x []float32) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	id := inverse(d)
	putHalf(y, d)
	putHalf(y[2:], lo)
	for j := 0; j < 16; j++ {
		q0 := min(15, int8(int32(float32(float32(x[j]-lo)*id)+0.5)))
		q1 := min(15, int8(int32(float32(float32(x[j+16]-lo)*id)+0.5)))
		y[4+j] = uint8(q0) | uint8(q1)<<4
	}
}

func quantQ50(y []byte, x []float32) {
	m, _ := absMax(x)
	d := m / -16
	id := inverse(d)
	putHalf(y, d)
	var qh uint32
	for j := 0; j < 16; j++ {
		q0 := uint8(min(31, int8(int32(float32(x[j]*id)+16.5))))
		q1 := uint8(min(31, int8(int32(float32(x[j+16]*id)+16.5))))
		y[6+j] = q0&15 | (q1&15)<<4
		qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

func quantQ51(y []byte, x []float32) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	id := inverse(d)
	putHalf(y, d)
	putHalf(y[2:], lo)
	var qh uint32
	for j := 0; j < 16; j++ {
		q0 := uint8(int32(float32(float32(x[j]-lo)*id) + 0.5))
		q1 := uint8(int32(float32(float32(x[j+16]-lo)*id) + 0.5))
		y[8+j] = q0&15 | (q1&15)<<4
		qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

func quantQ80(y []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	id := inverse(d)
	putHalf(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(v * id))))
	}
}

func quantMXFP4(y []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	var e uint8
	if amax > 0 {
		// floorf(log2f(amax)) − 2 + 127, in float32 as ggml computes it
		l := float32(math.Floor(float64(float32(math.Log2(float64(amax))))))
		e = uint8(int32(l - 2 + 127))
	}
	d := e8m0Half(e)
	y[0] = e
	best := func(v float32) uint8 {
		bi, be := 0, abs32(float32(float32(kvaluesMXFP4[0])*d)-v)
		for i := 1; i < 16; i++ {
			if err := abs32(float32(float32(kvaluesMXFP4[i])*d) - v); err < be {
				bi, be = i, err
			}
		}
		return uint8(bi)
	}
	for j := 0; j < 16; j++ {
		y[1+j] = best(x[j]) | best(x[j+16])<<4
	}
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights (the q6_K path): codes L in [0, 2·nmax) and the scale that fits
// them best, trying 18 scales around nmax/max.
func makeQXQuants(x []float32, nmax int, L []int8) float32 {
	m, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	sums := func(iscale float32, store bool) (sumlx, suml2 float32) {
		for i, v := range x {
			l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w := v * v
			sumlx += float32(float32(w*v) * float32(l))
			suml2 += float32(float32(w*float32(l)) * float32(l))
		}
		return sumlx, suml2
	}
	iscale := -float32(nmax) / m
	sumlx, suml2 := sums(iscale, true)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / m
		sumlx, suml2 = sums(iscale, false)
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			sums(iscale, true)
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse (the q3_K path):
// codes in [0, 2·nmax) refined one at a time, up to 5 passes.
func makeQ3Quants(x []float32, nmax int, L []int8) float32 {
	m, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := -float32(nmax) / m
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = int8(l)
		w := v * v
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				nl := clampInt(nearestInt(float32(v*sl2)/slx), -nmax, nmax-1)
				if nl != int(L[i]) {
					fl := float32(nl)
					slx += float32(float32(w*v) * fl)
					sl2 += float32(float32(w*fl) * fl)
					if sl2 > 0 && float32(slx*slx)*suml2 > float32(sumlx*sumlx)*sl2 {
						L[i] = int8(nl)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQKX2Quants is ggml's make_qkx2_quants: codes L in [0, nmax] with a
// scale and a min (returned as the min's negation, ggml's the_min) fitted
// by weighted least squares over nstep+1 trial scales.
func makeQKX2Quants(x, weights []float32, nmax int, L []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:n])
		return 0, -lo
	}
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return diff * diff
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*float32(v-lo)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+lo) - v
		bestErr += float32(weights[i] * errOf(diff))
	}
	var aux [32]uint8
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt(nearestInt(iscale*float32(v-lo)), 0, nmax)
			aux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i, v := range x {
				diff := float32(float32(thisScale*float32(aux[i]))+thisMin) - v
				cur += float32(weights[i] * errOf(diff))
			}
			if cur < bestErr {
				copy(L[:n], aux[:n])
				bestErr, scale, lo = cur, thisScale, thisMin
			}
		}
	}
	return scale, -lo
}

// pack2Bit stores 256 2-bit codes as ggml's q2_K and q3_K do.
func pack2Bit(qs []byte, L []uint8) {
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantQ2K(y []byte, x []float32) {
	const q4scale = 15
	var L [256]uint8
	var scales, mins [16]float32
	var weights [16]float32
	var maxScale, maxMin float32
	for j := 0; j < 16; j++ {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			weights[l] = abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(xs, weights[:], 3, L[16*j:], -0.5, 0.1, 15, true)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	sc := y[0:16]
	if maxScale > 0 {
		iscale := q4scale / maxScale
		for j := range sc {
			sc[j] = uint8(nearestInt(iscale * scales[j]))
		}
		putHalf(y[80:], maxScale/q4scale)
	}
	if maxMin > 0 {
		iscale := q4scale / maxMin
		for j := range sc {
			sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
		}
		putHalf(y[82:], maxMin/q4scale)
	}
	d, dmin := half(y[80:]), half(y[82:])
	for j := 0; j < 16; j++ {
		dl := d * float32(sc[j]&15)
		if dl == 0 {
			continue
		}
		dm := dmin * float32(sc[j]>>4)
		for i := 0; i < 16; i++ {
			L[16*j+i] = uint8(clampInt(nearestInt(float32(x[16*j+i]+dm)/dl), 0, 3))
		}
	}
	pack2Bit(y[16:80], L[:])
}

func quantQ3K(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, amax float32
	for j := 0; j < 16; j++ {
		scales[j] = makeQ3Quants(x[16*j:16*j+16], 4, L[16*j:])
		if a := abs32(scales[j]); a > amax {
			amax, maxScale = a, scales[j]
		}
	}
	hmask, qs, sb := y[0:32], y[32:96], y[96:108]
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := 0; j < 16; j++ {
			l := uint8(clampInt(int(int8(nearestInt(iscale*scales[j]))), -32, 31) + 32)
			if j < 8 {
				sb[j] = l & 15
			} else {
				sb[j-8] |= (l & 15) << 4
			}
			sb[j%4+8] |= (l >> 4) << (2 * uint(j/4))
		}
		putHalf(y[108:], 1/iscale)
	}
	d := half(y[108:])
	for j := 0; j < 16; j++ {
		dl := d * float32(q3KScale(sb, j))
		if dl == 0 {
			continue
		}
		for i := 0; i < 16; i++ {
			L[16*j+i] = int8(clampInt(nearestInt(x[16*j+i]/dl), -4, 3) + 4)
		}
	}
	var U [256]uint8
	m, hm := 0, uint8(1)
	for j := range L {
		U[j] = uint8(L[j])
		if U[j] > 3 {
			hmask[m] |= hm
			U[j] -= 4
		}
		if m++; m == 32 {
			m, hm = 0, hm<<1
		}
	}
	pack2Bit(qs, U[:])
}

// quantK4Scales runs the shared first half of q4_K and q5_K: per 32-value
// group a make_qkx2_quants fit, then the 6-bit scales and mins packed as
// get_scale_min_k4 reads them, d and dmin, and the codes refitted to the
// stored scales.
func quantK4Scales(y []byte, x []float32, nmax int, rmin float32, nstep int, L *[256]uint8) {
	var scales, mins [8]float32
	var weights [32]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = av + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(xs, weights[:], nmax, L[32*j:], rmin, 0.1, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sb := y[4:16]
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			sb[j], sb[j+4] = ls, lm
		} else {
			sb[j+4] = ls&15 | (lm&15)<<4
			sb[j-4] |= (ls >> 4) << 6
			sb[j] |= (lm >> 4) << 6
		}
	}
	putHalf(y, maxScale/63)
	putHalf(y[2:], maxMin/63)
	d, dmin := half(y), half(y[2:])
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, sb)
		dl := d * float32(sc)
		if dl == 0 {
			continue
		}
		dm := dmin * float32(m)
		for i := 0; i < 32; i++ {
			L[32*j+i] = uint8(clampInt(nearestInt(float32(x[32*j+i]+dm)/dl), 0, nmax))
		}
	}
}

func quantQ4K(y []byte, x []float32) {
	var L [256]uint8
	quantK4Scales(y, x, 15, -1, 20, &L)
	qs := y[16:144]
	for j := 0; j < 256; j += 64 {
		for l := 0; l < 32; l++ {
			qs[j/2+l] = L[j+l] | L[j+l+32]<<4
		}
	}
}

func quantQ5K(y []byte, x []float32) {
	var L [256]uint8
	quantK4Scales(y, x, 31, -0.5, 15, &L)
	qh, ql := y[16:48], y[48:176]
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < 256; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[n/2+j] = l1 | l2<<4
		}
		m1, m2 = m1<<2, m2<<2
	}
}

func quantQ6K(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := 0; ib < 16; ib++ {
		scales[ib] = makeQXQuants(x[16*ib:16*ib+16], 32, L[16*ib:])
		if a := abs32(scales[ib]); a > maxAbs {
			maxAbs, maxScale = a, scales[ib]
		}
	}
	if maxAbs < groupMaxEps {
		return // an all-zero block, d = 0
	}
	iscale := -128 / maxScale
	putHalf(y[208:], 1/iscale)
	sc := y[192:208]
	for ib := range sc {
		sc[ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	d := half(y[208:])
	for j := 0; j < 16; j++ {
		dl := d * float32(int8(sc[j]))
		if dl == 0 {
			continue
		}
		for i := 0; i < 16; i++ {
			L[16*j+i] = int8(clampInt(nearestInt(x[16*j+i]/dl), -32, 31) + 32)
		}
	}
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1, q2 := uint8(L[j+l]), uint8(L[j+l+32])
			q3, q4 := uint8(L[j+l+64]), uint8(L[j+l+96])
			ql[j/2+l] = q1&15 | (q3&15)<<4
			ql[j/2+l+32] = q2&15 | (q4&15)<<4
			qh[j/4+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

func quantQ8K(y []byte, x []float32) {
	m, amax := absMax(x)
	if amax == 0 {
		return
	}
	iscale := -127 / m
	qs := y[4:260]
	for j, v := range x {
		qs[j] = uint8(int8(min(127, nearestInt(iscale*v))))
	}
	for j := 0; j < 16; j++ {
		var s int16
		for _, q := range qs[16*j : 16*j+16] {
			s += int16(int8(q))
		}
		binary.LittleEndian.PutUint16(y[260+2*j:], uint16(s))
	}
	binary.LittleEndian.PutUint32(y, math.Float32bits(1/iscale))
}

// bestIndexIQ4 is ggml's best_index_int8 over kvalues_iq4nl: the index of
// the level nearest to v (the upper one on ties).
func bestIndexIQ4(v float32) uint8 {
	vals := &kvaluesIQ4NL
	if v <= float32(vals[0]) {
		return 0
	}
	if v >= float32(vals[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if v < float32(vals[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if v-float32(vals[hi-1]) < float32(vals[hi])-v {
		return uint8(hi - 1)
	}
	return uint8(hi)
}

// iq4Scale fits one 32-value group the way quantize_row_iq4_nl_impl does
// with no importance weights and ntry 7: weights x², a first scale that
// puts the largest |x| on level −127, then 15 trial scales. It returns the
// scale (0 for a group below groupMaxEps) and sets L to the first trial's
// indices.
func iq4Scale(x []float32, L []uint8) float32 {
	const ntry = 7
	m, amax := absMax(x)
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(kvaluesIQ4NL[0])
	d := -m / v0
	id := 1 / d
	var sumqx, sumq2 float32
	for j, v := range x {
		l := bestIndexIQ4(id * v)
		L[j] = l
		q, w := float32(kvaluesIQ4NL[l]), v*v
		sumqx += float32(float32(w*q) * v)
		sumq2 += float32(float32(w*q) * q)
	}
	d = sumqx / sumq2
	best := d * sumqx
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(kvaluesIQ4NL[0])) / m
		sumqx, sumq2 = 0, 0
		for _, v := range x {
			q, w := float32(kvaluesIQ4NL[bestIndexIQ4(id*v)]), v*v
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		if sumq2 > 0 && sumqx*sumqx > best*sumq2 {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

func packIQ4(qs []byte, L []uint8) {
	for i := 0; i < len(L)/32; i++ {
		for j := 0; j < 16; j++ {
			qs[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

func quantIQ4NL(y []byte, x []float32) {
	var L [32]uint8
	d := iq4Scale(x, L[:])
	putHalf(y, d)
	id := inverse(d)
	for j, v := range x {
		L[j] = bestIndexIQ4(id * v)
	}
	packIQ4(y[2:18], L[:])
}

func quantIQ4XS(y []byte, x []float32) {
	var L [256]uint8
	var scales [8]float32
	var maxScale, amaxScale float32
	for ib := 0; ib < 8; ib++ {
		scales[ib] = iq4Scale(x[32*ib:32*ib+32], L[32*ib:])
		if a := abs32(scales[ib]); a > amaxScale {
			amaxScale, maxScale = a, scales[ib]
		}
	}
	d := -maxScale / 32
	putHalf(y, d)
	id := inverse(d)
	var sh uint16
	sl := y[4:8]
	for ib := 0; ib < 8; ib++ {
		l := clampInt(nearestInt(id*scales[ib]), -32, 31)
		idl := inverse(d * float32(l))
		for j, v := range x[32*ib : 32*ib+32] {
			L[32*ib+j] = bestIndexIQ4(idl * v)
		}
		l += 32
		if ib%2 == 0 {
			sl[ib/2] = uint8(l & 15)
		} else {
			sl[ib/2] |= uint8(l&15) << 4
		}
		sh |= uint16(l>>4) << (2 * uint(ib))
	}
	binary.LittleEndian.PutUint16(y[2:], sh)
	packIQ4(y[8:136], L[:])
}
