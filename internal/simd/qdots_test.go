package simd

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// qdotCase is one packed block dot: its kernel dispatcher, its Go twin,
// the bit-exact row decoder, the bytes per block of blockValues values,
// and how to make random blocks.
type qdotCase struct {
	name        string
	blockValues int
	blockBytes  int
	dot, twin   func(w []byte, x, xs []float32) float32
	decode      func(dst []float32, w []byte)
	blocks      func(r *rand.Rand, nb int) []byte
	// mins: the value is d·code + m, m the binary16 at 2 (so the
	// magnitude counts |m·x| apart).
	mins bool
}

// randMXFP4 returns nb random mxfp4 blocks with exponents whose scales
// keep the products finite, some of them subnormal (e < 2).
func randMXFP4(r *rand.Rand, nb int) []byte {
	w := make([]byte, nb*mxfp4BlockBytes)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for b := 0; b < nb; b++ {
		e := byte(110 + r.IntN(30))
		if b%7 == 3 {
			e = byte(r.IntN(3))
		}
		w[b*mxfp4BlockBytes] = e
	}
	return w
}

func qdotCases() []qdotCase {
	noSums := func(f func(w []byte, x []float32) float32) func(w []byte, x, xs []float32) float32 {
		return func(w []byte, x, _ []float32) float32 { return f(w, x) }
	}
	rb := func(bs, bb int, scaleAt ...int) func(r *rand.Rand, nb int) []byte {
		return func(r *rand.Rand, nb int) []byte { return randKBlocks(r, nb, bb, scaleAt...) }
	}
	return []qdotCase{
		{"DotQ40", 32, q40BlockBytes, noSums(DotQ40), noSums(dotQ40Generic), Q40ToF32, rb(32, q40BlockBytes, 0), false},
		{"DotQ41", 32, q41BlockBytes, DotQ41, dotQ41Generic, Q41ToF32, rb(32, q41BlockBytes, 0, 2), true},
		{"DotQ50", 32, q50BlockBytes, noSums(DotQ50), noSums(dotQ50Generic), Q50ToF32, rb(32, q50BlockBytes, 0), false},
		{"DotQ51", 32, q51BlockBytes, DotQ51, dotQ51Generic, Q51ToF32, rb(32, q51BlockBytes, 0, 2), true},
		{"DotIQ4NL", 32, iq4nlBlockBytes, noSums(DotIQ4NL), noSums(dotIQ4NLGeneric), IQ4NLToF32, rb(32, iq4nlBlockBytes, 0), false},
		{"DotMXFP4", 32, mxfp4BlockBytes, noSums(DotMXFP4), noSums(dotMXFP4Generic), MXFP4ToF32, randMXFP4, false},
		{"DotIQ4XS", 256, iq4XSBlockBytes, noSums(DotIQ4XS), noSums(dotIQ4XSGeneric), IQ4XSToF32, rb(256, iq4XSBlockBytes, 0), false},
		{"DotQ2K", 256, q2KBlockBytes, noSums(DotQ2K), noSums(func(w []byte, x []float32) float32 {
			restore := ForceGeneric()
			defer restore()
			return DotQ2K(w, x)
		}), Q2KToF32, rb(256, q2KBlockBytes, 80, 82), false},
		{"DotQ3K", 256, q3KBlockBytes, noSums(DotQ3K), noSums(func(w []byte, x []float32) float32 {
			restore := ForceGeneric()
			defer restore()
			return DotQ3K(w, x)
		}), Q3KToF32, rb(256, q3KBlockBytes, 108), false},
	}
}

// TestQDots compares each packed block dot on every kernel set with its Go
// twin, and both with decode-then-dot: the row decoded bit for bit as
// ggml does (Q40ToF32 …, tested against pkg/gguf's golden decoders in
// pkg/runtime/cpu), its dot with x summed in float64. Both must be within
// dotTol of Σ|w_i·x_i| (Σ(|d·code|+|m|)·|x_i| where a block has an
// offset m). Rows run from 0 to 20 blocks and over 9 super-blocks, at
// misaligned offsets.
func TestQDots(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		for _, tt := range qdotCases() {
			r := newRand(t)
			sizes := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 20, 64 + 3}
			if tt.blockValues == 256 {
				sizes = []int{0, 1, 2, 3, 4, 5, 9, 16, 17, 20}
			}
			for _, nb := range sizes {
				for _, off := range offsets {
					n := nb * tt.blockValues
					w := offsetCopy(tt.blocks(r, nb), off)
					x := offsetCopy(randF32(r, n), off+1)
					xs := make([]float32, n/32)
					GroupSums32(xs, x)
					dec := make([]float32, n)
					generic(func() { tt.decode(dec, w) })
					var ref, mag float64
					for i, v := range dec {
						ref += float64(v) * float64(x[i])
						mag += math.Abs(float64(v) * float64(x[i]))
						if tt.mins {
							m := float64(F16ToF32Scalar(binary.LittleEndian.Uint16(w[i/32*tt.blockBytes+2:])))
							mag += 2 * math.Abs(m*float64(x[i]))
						}
					}
					got, twin := tt.dot(w, x, xs), tt.twin(w, x, xs)
					if !within(float64(got), ref, mag) {
						t.Errorf("%s(nb=%d, off=%d) = %v, decode-then-dot %v (Σ|wx| %v)", tt.name, nb, off, got, ref, mag)
					}
					if !within(float64(twin), ref, mag) {
						t.Errorf("%s twin (nb=%d, off=%d) = %v, decode-then-dot %v (Σ|wx| %v)", tt.name, nb, off, twin, ref, mag)
					}
					if !within(float64(got), float64(twin), mag) {
						t.Errorf("%s(nb=%d, off=%d) = %v, twin %v (Σ|wx| %v)", tt.name, nb, off, got, twin, mag)
					}
				}
			}
		}
	})
}

// TestQDotsExact checks cases every kernel must compute exactly: one
// block whose only nonzero activation is 1 at value j gives the decoded
// value j (for MXFP4 with every exponent 0..255, the subnormal scales
// of e < 2 included, so the kernels' scale table is checked entry by
// entry).
func TestQDotsExact(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		r := newRand(t)
		for _, tt := range qdotCases() {
			if tt.blockValues != 32 {
				continue
			}
			for trial := 0; trial < 256; trial++ {
				w := tt.blocks(r, 1)
				if tt.name == "DotMXFP4" {
					w[0] = byte(trial)
				}
				j := trial % 32
				x := make([]float32, 32)
				x[j] = 1
				xs := make([]float32, 1)
				GroupSums32(xs, x)
				dec := make([]float32, 32)
				generic(func() { tt.decode(dec, w) })
				got := tt.dot(w, x, xs)
				if math.Float32bits(got) != math.Float32bits(dec[j]) && !(got == 0 && dec[j] == 0) {
					t.Errorf("%s: block %x, value %d: %v, decoded %v", tt.name, w, j, got, dec[j])
				}
			}
		}
	})
}

// TestQDotsPanics checks that the block dots refuse lengths that are not
// whole blocks, too few weight bytes and wrong group sums.
func TestQDotsPanics(t *testing.T) {
	checkPanics(t, "lengths", []panicCase{
		{"DotQ40 short x", func() { DotQ40(make([]byte, 18), make([]float32, 31)) }},
		{"DotQ40 short w", func() { DotQ40(make([]byte, 17), make([]float32, 32)) }},
		{"DotQ41 sums", func() { DotQ41(make([]byte, 20), make([]float32, 32), make([]float32, 2)) }},
		{"DotQ50 short w", func() { DotQ50(make([]byte, 21), make([]float32, 32)) }},
		{"DotQ51 short w", func() { DotQ51(make([]byte, 23), make([]float32, 32), make([]float32, 1)) }},
		{"DotIQ4NL short w", func() { DotIQ4NL(make([]byte, 35), make([]float32, 64)) }},
		{"DotMXFP4 short w", func() { DotMXFP4(make([]byte, 16), make([]float32, 32)) }},
		{"DotIQ4XS short x", func() { DotIQ4XS(make([]byte, 136), make([]float32, 224)) }},
		{"DotQ2K short w", func() { DotQ2K(make([]byte, 83), make([]float32, 256)) }},
		{"DotQ3K short w", func() { DotQ3K(make([]byte, 109), make([]float32, 256)) }},
	})
}
