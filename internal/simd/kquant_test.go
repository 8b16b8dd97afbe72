package simd

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// randKBlocks returns nb random super-blocks of blockBytes with every byte
// random except the fp16 scales at the offsets given, which are small
// normal values (so that no decoded weight overflows).
func randKBlocks(r *rand.Rand, nb, blockBytes int, scaleAt ...int) []byte {
	w := make([]byte, nb*blockBytes)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for b := 0; b < nb; b++ {
		for _, at := range scaleAt {
			binary.LittleEndian.PutUint16(w[b*blockBytes+at:], F32ToF16Scalar(float32(r.NormFloat64()/256)))
		}
	}
	return w
}

// q4KValue and q6KValue decode value i of a row in float64 from the same
// unpacked scales (each scale the float32 product ggml computes).
func q4KValue(w []byte, i int) float64 {
	blk := w[i/kBlockSize*q4KBlockBytes:]
	var sc [16]float32
	q4KScales(sc[:], blk)
	j := i % kBlockSize
	c, l, hi := j/64, j%32, j%64 >= 32
	q := blk[16+32*c+l] & 15
	g := 2 * c
	if hi {
		q, g = blk[16+32*c+l]>>4, g+1
	}
	return float64(sc[2*g])*float64(q) - float64(sc[2*g+1])
}

func q5KValue(w []byte, i int) float64 {
	blk := w[i/kBlockSize*q5KBlockBytes:]
	var sc [16]float32
	q4KScales(sc[:], blk)
	j := i % kBlockSize
	c, l, h := j/64, j%32, 0
	if j%64 >= 32 {
		h = 1
	}
	g := 2*c + h
	return float64(sc[2*g])*float64(q5KCode(blk, c, h, l)) - float64(sc[2*g+1])
}

func q6KValue(w []byte, i int) float64 {
	blk := w[i/kBlockSize*q6KBlockBytes:]
	var sc [16]float32
	q6KScales(sc[:], blk)
	j := i % kBlockSize
	h, r := j/128, j%128
	k, l := r/32, r%32
	ql, qh := blk[64*h:], blk[128+32*h:]
	var q int
	switch k {
	case 0:
		q = int(ql[l]&15 | (qh[l]&3)<<4)
	case 1:
		q = int(ql[l+32]&15 | (qh[l]>>2&3)<<4)
	case 2:
		q = int(ql[l]>>4 | (qh[l]>>4&3)<<4)
	case 3:
		q = int(ql[l+32]>>4 | (qh[l]>>6&3)<<4)
	}
	return float64(sc[j/16]) * float64(q-32)
}

// TestDotKQuants compares DotQ4K, DotQ5K and DotQ6K on every kernel set with their
// Go twins and a float64 reference over 0..20 super-blocks (the dispatch
// unpacks scales in chunks of 16) at misaligned offsets.
func TestDotKQuants(t *testing.T) {
	tests := []struct {
		name       string
		blockBytes int
		scaleAt    []int
		dot, twin  func(w []byte, x []float32) float32
		value      func(w []byte, i int) float64
	}{
		{"DotQ4K", q4KBlockBytes, []int{0, 2}, DotQ4K, dotQ4KGeneric, q4KValue},
		{"DotQ5K", q5KBlockBytes, []int{0, 2}, DotQ5K, dotQ5KGeneric, q5KValue},
		{"DotQ6K", q6KBlockBytes, []int{208}, DotQ6K, dotQ6KGeneric, q6KValue},
	}
	forEachKSet(t, func(t *testing.T) {
		for _, tt := range tests {
			r := newRand(t)
			for nb := 0; nb <= 20; nb++ {
				for _, off := range offsets {
					w := offsetCopy(randKBlocks(r, nb, tt.blockBytes, tt.scaleAt...), off)
					x := offsetCopy(randF32(r, nb*kBlockSize), off+1)
					var ref, mag float64
					for i := range x {
						p := tt.value(w, i) * float64(x[i])
						ref, mag = ref+p, mag+math.Abs(p)
					}
					got, gen := tt.dot(w, x), tt.twin(w, x)
					if !within(float64(got), ref, mag) {
						t.Errorf("%s(nb=%d, off=%d) = %v, float64 reference %v (Σ|wx| %v)", tt.name, nb, off, got, ref, mag)
					}
					if !within(float64(gen), ref, mag) {
						t.Errorf("%s twin (nb=%d, off=%d) = %v, float64 reference %v (Σ|wx| %v)", tt.name, nb, off, gen, ref, mag)
					}
					if !within(float64(got), float64(gen), mag) {
						t.Errorf("%s(nb=%d, off=%d) = %v, twin %v (Σ|wx| %v)", tt.name, nb, off, got, gen, mag)
					}
				}
			}
			if r := recover(); r != nil {
				t.Fatal(r)
			}
		}
	})
	for _, bad := range []func(){
		func() { DotQ4K(make([]byte, 144), make([]float32, 255)) },
		func() { DotQ4K(make([]byte, 143), make([]float32, 256)) },
		func() { DotQ6K(make([]byte, 209), make([]float32, 256)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a bad length did not panic")
				}
			}()
			bad()
		}()
	}
}

// TestKQuantsToF32 checks that Q2KToF32 … Q6KToF32 give their twins'
// bits on every kernel set (the twins are ggml's decoding; pkg/runtime/cpu
// checks them against pkg/gguf's golden-tested decoders), over 0..20
// super-blocks at misaligned offsets.
func TestKQuantsToF32(t *testing.T) {
	tests := []struct {
		name       string
		blockBytes int
		scaleAt    []int
		dec, twin  func(dst []float32, w []byte)
	}{
		{"Q4KToF32", q4KBlockBytes, []int{0, 2}, Q4KToF32, q4KToF32Generic},
		{"Q5KToF32", q5KBlockBytes, []int{0, 2}, Q5KToF32, q5KToF32Generic},
		{"Q6KToF32", q6KBlockBytes, []int{208}, Q6KToF32, q6KToF32Generic},
		{"Q2KToF32", q2KBlockBytes, []int{80, 82}, Q2KToF32, q2KToF32Generic},
		{"Q3KToF32", q3KBlockBytes, []int{108}, Q3KToF32, q3KToF32Generic},
	}
	forEachKSet(t, func(t *testing.T) {
		for _, tt := range tests {
			r := newRand(t)
			for nb := 0; nb <= 20; nb++ {
				for _, off := range offsets {
					w := offsetCopy(randKBlocks(r, nb, tt.blockBytes, tt.scaleAt...), off)
					got, check := guardedF32(off, nb*kBlockSize, 16)
					want := make([]float32, nb*kBlockSize)
					tt.dec(got, w)
					tt.twin(want, w)
					check(t)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s(nb=%d, off=%d)[%d] = %v, twin %v", tt.name, nb, off, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

// kParts returns the two terms of value i of a q4_K (q5_K with five) row:
// d·scale·q and dmin·min, in float64 from ggml's float32 products.
func kParts(w []byte, i int, five bool) (sq, m float64) {
	bb, code := q4KBlockBytes, q4KCode
	if five {
		bb, code = q5KBlockBytes, q5KCode
	}
	blk := w[i/kBlockSize*bb:]
	var sc [16]float32
	q4KScales(sc[:], blk)
	j := i % kBlockSize
	c, l, h := j/64, j%32, 0
	if j%64 >= 32 {
		h = 1
	}
	g := 2*c + h
	return float64(sc[2*g]) * float64(code(blk, c, h, l)), float64(sc[2*g+1])
}

// TestDotKQuantSums compares DotQ4KSums and DotQ5KSums on every kernel set
// with their twins and a float64 reference, within dotTol of
// Σ(|d·scale·q|+|dmin·min|)·|x| (the terms they sum separately).
func TestDotKQuantSums(t *testing.T) {
	forEachKSet(t, func(t *testing.T) {
		for _, five := range []bool{false, true} {
			dot, twin, bb := DotQ4KSums, dotQ4KSumsGeneric, q4KBlockBytes
			if five {
				dot, twin, bb = DotQ5KSums, dotQ5KSumsGeneric, q5KBlockBytes
			}
			r := newRand(t)
			for nb := 0; nb <= 12; nb++ {
				for _, off := range offsets {
					w := offsetCopy(randKBlocks(r, nb, bb, 0, 2), off)
					x := offsetCopy(randF32(r, nb*kBlockSize), off+1)
					xs := make([]float32, len(x)/32)
					GroupSums32(xs, x)
					var ref, mag float64
					for i := range x {
						sq, m := kParts(w, i, five)
						ref += (sq - m) * float64(x[i])
						mag += (math.Abs(sq) + math.Abs(m)) * math.Abs(float64(x[i]))
					}
					got, gen := dot(w, x, xs), twin(w, x, xs)
					if !within(float64(got), ref, mag) {
						t.Errorf("five=%v nb=%d off=%d: %v, float64 reference %v (magnitude %v)", five, nb, off, got, ref, mag)
					}
					if !within(float64(gen), ref, mag) {
						t.Errorf("twin five=%v nb=%d off=%d: %v, float64 reference %v (magnitude %v)", five, nb, off, gen, ref, mag)
					}
					if !within(float64(got), float64(gen), mag) {
						t.Errorf("five=%v nb=%d off=%d: %v, twin %v (magnitude %v)", five, nb, off, got, gen, mag)
					}
				}
			}
		}
	})
}

// TestGroupSums32 compares GroupSums32 on every kernel set with a float64
// sum of each group.
func TestGroupSums32(t *testing.T) {
	forEachKSet(t, func(t *testing.T) {
		r := newRand(t)
		for n := 0; n <= 9; n++ {
			for _, off := range offsets {
				x := offsetCopy(randF32(r, 32*n), off)
				xs, check := guardedF32(off, n, 8)
				GroupSums32(xs, x)
				check(t)
				for g := range xs {
					var ref, mag float64
					for _, v := range x[32*g : 32*g+32] {
						ref, mag = ref+float64(v), mag+math.Abs(float64(v))
					}
					if !within(float64(xs[g]), ref, mag) {
						t.Errorf("n=%d off=%d: group %d sums to %v, float64 %v", n, off, g, xs[g], ref)
					}
				}
			}
		}
	})
}

// TestLUTBlocksToF32 checks IQ4XSToF32 and MXFP4ToF32 on every kernel set
// bit for bit against the generic decoding (pkg/runtime/cpu checks them
// against pkg/gguf's golden-tested decoders), over whole rows of random
// blocks at misaligned offsets, past the 64-block scale chunks.
func TestLUTBlocksToF32(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		r := newRand(t)
		for _, n := range []int{0, 256, 512, 256 * 9} {
			for _, off := range offsets {
				for _, mx := range []bool{false, true} {
					var w []byte
					if mx {
						w = make([]byte, n/32*mxfp4BlockBytes)
					} else {
						w = randKBlocks(r, n/256, iq4XSBlockBytes, 0)
					}
					if mx {
						for i := range w {
							w[i] = byte(r.IntN(256))
						}
					}
					w = offsetCopy(w, off)
					got, check := guardedF32(off, n, 8)
					want := make([]float32, n)
					if mx {
						MXFP4ToF32(got, w)
						restore := ForceGeneric()
						MXFP4ToF32(want, w)
						restore()
					} else {
						IQ4XSToF32(got, w)
						restore := ForceGeneric()
						IQ4XSToF32(want, w)
						restore()
					}
					check(t)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("mxfp4=%v n=%d off=%d: value %d = %v, generic %v", mx, n, off, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

// forEachKSet is forEachSet for the k-quant kernels: where the AVX-512
// set is selected but the dispatch prefers the AVX2 k-quant kernels on
// this CPU (kquant512 false), it also runs f as "avx512-kquant", with the
// AVX-512 k-quant kernels forced on, so that they are tested on every CPU
// that has them.
func forEachKSet(t *testing.T, f func(t *testing.T)) {
	forEachSet(t, f)
	if hasAVX512 && !kquant512 {
		t.Run("avx512-kquant", func(t *testing.T) {
			defer forceKQuant512()()
			f(t)
		})
	}
}

// forceKQuant512 makes the AVX-512 set, where it is selected, run the
// AVX-512 k-quant kernels even where the dispatch prefers the AVX2 ones on
// this CPU (kquant512).
func forceKQuant512() (restore func()) {
	old := kquant512
	kquant512 = true
	return func() { kquant512 = old }
}
