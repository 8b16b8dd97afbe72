package simd

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// q8lLCG is the generator of the golden inputs below (the same sequence
// made them in llama.cpp's quantizers and dots): a 64-bit LCG, 31 bits a
// draw.
type q8lLCG uint64

func (s *q8lLCG) next() uint32 {
	*s = *s*6364136223846793005 + 1442695040888963407
	return uint32(*s >> 33)
}

// x returns a value in [−10, 10] with 3 decimals, as float32.
func (s *q8lLCG) x() float32 { return float32(int32(s.next()%20001)-10000) / 1000 }

// TestQuantizeQ8Goldens: QuantizeQ80 and QuantizeQ81 reproduce llama.cpp's
// x86 quantize_row_q8_0 and quantize_row_q8_1 (ggml-cpu, AVX2) byte for
// byte on 4 random blocks and a block of ties (127, then ±0.5 … ±7.5,
// which round half to even, where quantize_row_q8_0_ref's roundf would
// round away from zero).
func TestQuantizeQ8Goldens(t *testing.T) {
	const (
		q80 = "032df8f91417c8cee27ee6c6812aabb88cb777f4d3e13b4fccd50e22223347880370722cbc4a4240714a7ac34d7d237b23aaa329b35412d05c313fb0a2a04ec63381da00fa2c78130d8ac5e8e20aaf7246d53532e9baebf874a5e2e82b8169350fa6dd609f59fe2ca58e33343c00c58f5692a54326ebde1f2383690c086d9a7fd7658e38a7239b71003c7ffe02fc04fa06f800fe02fc04fa06f800fe02fc04fa06f800fe02fc04fa06f8"
		q81 = "032d63ccf8f91417c8cee27ee6c6812aabb88cb777f4d3e13b4fccd50e22223347880370722cf54fbc4a4240714a7ac34d7d237b23aaa329b35412d05c313fb0a2a04ec63381da00fa2c38b678130d8ac5e8e20aaf7246d53532e9baebf874a5e2e82b8169350fa6dd609f59fe2ca4c8a58e33343c00c58f5692a54326ebde1f2383690c086d9a7fd7658e38a7239b71003cf0557ffe02fc04fa06f800fe02fc04fa06f800fe02fc04fa06f800fe02fc04fa06f8"
	)
	x := make([]float32, 160)
	s := q8lLCG(1)
	for i := range 128 {
		x[i] = s.x()
	}
	for i := range 32 {
		x[128+i] = float32(1-2*(i%2)) * (0.5 + float32(i%8))
	}
	x[128] = 127
	for _, c := range []struct {
		name  string
		quant func(dst []byte, x []float32)
		bb    int
		want  string
	}{{"QuantizeQ80", QuantizeQ80, Q80BlockBytes, q80}, {"QuantizeQ81", QuantizeQ81, Q81BlockBytes, q81}} {
		got := make([]byte, 5*c.bb)
		c.quant(got, x)
		if h := hex.EncodeToString(got); h != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, h, c.want)
		}
	}
}

// q8lCase is one of the legacy types' Q8 dots.
type q8lCase struct {
	name        string
	t           qdotType
	dot         func(w, q []byte) float32
	quant       func(dst []byte, x []float32)
	wBytes, qBB int
}

func q8lCases() []q8lCase {
	return []q8lCase{
		{"DotQ40Q80", qdQ40, DotQ40Q80, QuantizeQ80, q40BlockBytes, Q80BlockBytes},
		{"DotQ41Q81", qdQ41, DotQ41Q81, QuantizeQ81, q41BlockBytes, Q81BlockBytes},
		{"DotQ50Q80", qdQ50, DotQ50Q80, QuantizeQ80, q50BlockBytes, Q80BlockBytes},
		{"DotQ51Q81", qdQ51, DotQ51Q81, QuantizeQ81, q51BlockBytes, Q81BlockBytes},
		{"DotIQ4NLQ80", qdIQ4NL, DotIQ4NLQ80, QuantizeQ80, iq4nlBlockBytes, Q80BlockBytes},
		{"DotMXFP4Q80", qdMXFP4, DotMXFP4Q80, QuantizeQ80, mxfp4BlockBytes, Q80BlockBytes},
		{"DotQ80Q80", qdQ80, DotQ80Q80, QuantizeQ80, Q80BlockBytes, Q80BlockBytes},
	}
}

// q8lMagnitude returns Σ_b |w_b·a_b·S_b| + |m_b·s_b|: the scale of the
// rounding differences between two summation orders.
func q8lMagnitude(c q8lCase, w, q []byte) float64 {
	var mag float64
	var v [32]int8
	off := c.qBB - 32
	for b := 0; b < len(q)/c.qBB; b++ {
		blk, qk := w[b*c.wBytes:], q[b*c.qBB:]
		d := float64(qdotValues(c.t, blk, &v))
		var sum int64
		for j := range 32 {
			sum += int64(v[j]) * int64(int8(qk[off+j]))
		}
		mag += math.Abs(d * float64(F16ToF32Scalar(binary.LittleEndian.Uint16(qk))) * float64(sum))
		if off == 4 {
			mag += math.Abs(float64(F16ToF32Scalar(binary.LittleEndian.Uint16(blk[2:]))) * float64(F16ToF32Scalar(binary.LittleEndian.Uint16(qk[2:]))))
		}
	}
	return mag
}

// TestQ8LegacyDotGoldens: on every kernel set the dots agree with
// llama.cpp's ggml_vec_dot_{q4_0,q4_1,q5_0,q5_1,iq4_nl,mxfp4,q8_0}_q8_{0,1}
// (x86 build, AVX2; q8_0's from the build's best set, with weight values
// −128 among the random bytes) over 8 random blocks (4 rows a type, quantized by
// QuantizeQ80/Q81 as llama.cpp quantizes them) within float32 rounding of
// the different summation order: 1e-6 of Σ|block terms|.
func TestQ8LegacyDotGoldens(t *testing.T) {
	const nb = 8
	want := map[string][4]uint32{
		"DotQ40Q80":   {0xc0905a4e, 0x41c363ce, 0x40108b28, 0x410c04f6},
		"DotQ41Q81":   {0x418ba862, 0xc1d478a2, 0xc20d814f, 0x3efaf3dc},
		"DotQ50Q80":   {0xc063a1be, 0x3e17ee50, 0x40cd17c5, 0x41c7cf57},
		"DotQ51Q81":   {0x4241e5e0, 0xc11db124, 0xc27b175c, 0xc229c3d0},
		"DotIQ4NLQ80": {0xc286cfc4, 0x43b0fdda, 0x41db6a60, 0x4307c333},
		"DotMXFP4Q80": {0x4397626f, 0x4517783f, 0x4407113c, 0x4369f047},
		"DotQ80Q80":   {0xc3312c83, 0xc2d53f77, 0xc3a8133e, 0x430bdf84},
	}
	for _, set := range kernelSets(t) {
		restore := set.force()
		for _, c := range q8lCases() {
			for r := range 4 {
				s := q8lLCG(100 + r)
				a := make([]float32, nb*32)
				for i := range a {
					a[i] = s.x()
				}
				w := make([]byte, nb*c.wBytes)
				for b := range nb {
					blk := w[b*c.wBytes : (b+1)*c.wBytes]
					for i := range blk {
						blk[i] = byte(s.next())
					}
					d, m := uint16(0x2400|s.next()&0x3ff), uint16(0xa400|s.next()&0x3ff)
					if c.t == qdMXFP4 {
						blk[0] = byte(120 + s.next()%12)
						continue
					}
					binary.LittleEndian.PutUint16(blk, d)
					if q8LegacyMins(c.t) {
						binary.LittleEndian.PutUint16(blk[2:], m)
					}
				}
				q := make([]byte, nb*c.qBB)
				c.quant(q, a)
				got, ref := c.dot(w, q), math.Float32frombits(want[c.name][r])
				if d := math.Abs(float64(got) - float64(ref)); d > 1e-6*q8lMagnitude(c, w, q) {
					t.Errorf("%s: %s row %d: %g, llama.cpp %g", set.name, c.name, r, got, ref)
				}
			}
		}
		restore()
	}
}

// TestQ8LegacyKernels: every kernel set's dots are bit for bit their Go
// twin's, for 0 to 67 blocks of random weights (codes of every value, Q8_0
// values −128 and ±127 included, the largest and subnormal MXFP4 scales) and activations (random, constant
// ±127 codes), and with the VNNI kernels off (the avx512 set then takes
// the AVX2 ones).
func TestQ8LegacyKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, set := range q8lSets(t) {
		restore := set.force()
		for _, c := range q8lCases() {
			for _, nb := range []int{0, 1, 2, 3, 7, 16, 67} {
				var w []byte
				if c.t == qdMXFP4 {
					w = randMXFP4(r, nb)
				} else {
					w = randKBlocks(r, nb, c.wBytes, 0)
					if q8LegacyMins(c.t) {
						w = randKBlocks(r, nb, c.wBytes, 0, 2)
					}
				}
				if c.t == qdQ80 && nb > 2 { // extreme values: a block of −128, one of 127
					for j := range 32 {
						w[2+j], w[c.wBytes+2+j] = 0x80, 127
					}
				}
				for k := range 3 {
					x := make([]float32, nb*32)
					for i := range x {
						switch k {
						case 0:
							x[i] = float32(r.NormFloat64())
						case 1:
							x[i] = 1
						default:
							x[i] = -1
						}
					}
					q := make([]byte, nb*c.qBB)
					c.quant(q, x)
					got, want := c.dot(w, q), dotQ8LegacyGeneric(c.t, w, q, nb)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s: %s, %d blocks, activations %d: %g, twin %g", set.name, c.name, nb, k, got, want)
					}
				}
			}
		}
		restore()
	}
}

// TestQ8LegacyPanics: the dots refuse activations that are not whole
// blocks and weights too short for them; the quantizers refuse partial
// blocks and a wrong-sized destination.
func TestQ8LegacyPanics(t *testing.T) {
	for _, f := range []func(){
		func() { DotQ40Q80(make([]byte, 18), make([]byte, 35)) },
		func() { DotQ41Q81(make([]byte, 39), make([]byte, 72)) },
		func() { DotQ80Q80(make([]byte, 33), make([]byte, 34)) },
		func() { DotQ80Q80(make([]byte, 34), make([]byte, 33)) },
		func() { QuantizeQ80(make([]byte, 34), make([]float32, 31)) },
		func() { QuantizeQ81(make([]byte, 34), make([]float32, 32)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}
