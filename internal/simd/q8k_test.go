package simd

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// q8kLCG is the generator of the golden program's inputs: values
// (k − mod/2)/div for k drawn by a 32-bit linear congruential generator,
// exact in float32 on both sides.
type q8kLCG uint32

func (s *q8kLCG) next(mod uint32, div float32) float32 {
	*s = *s*1664525 + 1013904223
	return float32(int32(uint32(*s)>>8%mod)-int32(mod/2)) / div
}

// q8kGoldenInput returns the 1024 activations of the golden program: 4
// blocks, the second with a negative extreme, the third zeros, the fourth
// halves of small integers (many ties after scaling).
func q8kGoldenInput() []float32 {
	x := make([]float32, 1024)
	s := q8kLCG(1)
	for i := range x {
		x[i] = s.next(20001, 997)
	}
	x[256+17] = -20
	for i := 512; i < 768; i++ {
		x[i] = 0
	}
	for i := 768; i < 1024; i++ {
		x[i] = float32((i*37)%255-127) * 0.5
	}
	return x
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuantizeQ8KGolden checks QuantizeQ8K's bytes against llama.cpp's
// quantize_row_q8_K_ref.
func TestQuantizeQ8KGolden(t *testing.T) {
	want := mustHex(t, q8kGolden)
	for i := 4 + kBlockSize; i < Q8KBlockBytes; i++ {
		want[2*Q8KBlockBytes+i] = 0 // ggml leaves the zero block's sums unset
	}
	forEachSet(t, func(t *testing.T) {
		got := make([]byte, 4*Q8KBlockBytes)
		for i := range got {
			got[i] = 0xcd
		}
		QuantizeQ8K(got, q8kGoldenInput())
		for b := 0; b < 4; b++ {
			g, w := got[b*Q8KBlockBytes:(b+1)*Q8KBlockBytes], want[b*Q8KBlockBytes:(b+1)*Q8KBlockBytes]
			if !bytes.Equal(g, w) {
				for i := range g {
					if g[i] != w[i] {
						t.Errorf("block %d differs from llama.cpp's first at byte %d: %#x, want %#x", b, i, g[i], w[i])
						break
					}
				}
			}
		}
	})
	for _, bad := range []func(){
		func() { QuantizeQ8K(make([]byte, Q8KBlockBytes), make([]float32, 255)) },
		func() { QuantizeQ8K(make([]byte, Q8KBlockBytes-1), make([]float32, 256)) },
		func() { DotQ4KQ8K(make([]byte, 143), make([]byte, Q8KBlockBytes)) },
		func() { DotQ6KQ8K(make([]byte, 210), make([]byte, Q8KBlockBytes+1)) },
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

// TestDotKQ8KGolden checks the twins (and every kernel set) against
// llama.cpp's ggml_vec_dot_q{4,5,6}_K_q8_K on golden blocks: equal up to
// float32 rounding of the sum's order (2 super-blocks: a few ulps of the
// terms' magnitude).
func TestDotKQ8KGolden(t *testing.T) {
	q := mustHex(t, q8kGolden)[:2*Q8KBlockBytes]
	tests := []struct {
		name string
		w    string
		want uint32
		dot  func(w, q []byte) float32
		twin func(w, q []byte, nb int) float32
	}{
		{"DotQ4KQ8K", q4kGoldenW, q4kGoldenDot, DotQ4KQ8K, dotQ4KQ8KGeneric},
		{"DotQ5KQ8K", q5kGoldenW, q5kGoldenDot, DotQ5KQ8K, dotQ5KQ8KGeneric},
		{"DotQ6KQ8K", q6kGoldenW, q6kGoldenDot, DotQ6KQ8K, dotQ6KQ8KGeneric},
	}
	for _, tt := range tests {
		w := mustHex(t, tt.w)
		want := math.Float32frombits(tt.want)
		twin := tt.twin(w, q, 2)
		if d := math.Abs(float64(twin - want)); d > 4*ulp32(want) {
			t.Errorf("%s twin = %v, llama.cpp %v (differ by %g, over 4 ulps)", tt.name, twin, want, d)
		}
		forEachQ8KSet(t, func(t *testing.T) {
			if got := tt.dot(w, q); got != twin {
				t.Errorf("%s = %v, twin %v", tt.name, got, twin)
			}
		})
	}
}

func ulp32(f float32) float64 {
	a := float32(math.Abs(float64(f)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// TestDotKQ8K compares DotQ4KQ8K, DotQ5KQ8K and DotQ6KQ8K with their twins
// on every kernel set, bit for bit (the kernels compute the same exact
// integer sums per super-block and the same float32 operations in the same
// order), over 0..20 super-blocks of random blocks at misaligned offsets,
// including extreme activation codes (±127) and scales.
func TestDotKQ8K(t *testing.T) {
	tests := []struct {
		name       string
		blockBytes int
		scaleAt    []int
		dot        func(w, q []byte) float32
		twin       func(w, q []byte, nb int) float32
	}{
		{"DotQ4KQ8K", q4KBlockBytes, []int{0, 2}, DotQ4KQ8K, dotQ4KQ8KGeneric},
		{"DotQ5KQ8K", q5KBlockBytes, []int{0, 2}, DotQ5KQ8K, dotQ5KQ8KGeneric},
		{"DotQ6KQ8K", q6KBlockBytes, []int{208}, DotQ6KQ8K, dotQ6KQ8KGeneric},
	}
	forEachQ8KSet(t, func(t *testing.T) {
		for _, tt := range tests {
			r := newRand(t)
			for nb := 0; nb <= 20; nb++ {
				for _, off := range offsets {
					w := offsetCopy(randKBlocks(r, nb, tt.blockBytes, tt.scaleAt...), off)
					x := randF32(r, nb*kBlockSize)
					if nb > 1 {
						for i := 0; i < kBlockSize; i++ { // extreme codes: ±127 everywhere
							x[kBlockSize+i] = float32(1 - 2*(i&1))
						}
					}
					q := make([]byte, nb*Q8KBlockBytes)
					QuantizeQ8K(q, x)
					q = offsetCopy(q, off+1)
					got, want := tt.dot(w, q), tt.twin(w, q, nb)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s(nb=%d, off=%d) = %v, twin %v", tt.name, nb, off, got, want)
					}
					// The integer sums against a float64 decode: the twin
					// must equal Σ w_i·d_q·c_i up to float32 rounding.
					var ref, mag float64
					for b := 0; b < nb; b++ {
						yd := float64(math.Float32frombits(binary.LittleEndian.Uint32(q[b*Q8KBlockBytes:])))
						for i := 0; i < kBlockSize; i++ {
							var v float64
							switch tt.blockBytes {
							case q4KBlockBytes:
								v = q4KValue(w, b*kBlockSize+i)
							case q5KBlockBytes:
								v = q5KValue(w, b*kBlockSize+i)
							default:
								v = q6KValue(w, b*kBlockSize+i)
							}
							p := v * yd * float64(int8(q[b*Q8KBlockBytes+4+i]))
							ref, mag = ref+p, mag+math.Abs(p)
						}
					}
					if !within(float64(want), ref, mag) {
						t.Errorf("%s twin (nb=%d, off=%d) = %v, float64 reference %v (Σ|wx| %v)", tt.name, nb, off, want, ref, mag)
					}
				}
			}
		}
	})
}

// forEachQ8KSet is forEachSet plus, where the CPU has AVX-512 VNNI (whose
// Q8_K kernels the avx512 set runs), the avx512 set without it (the
// AVX-512BW kernels).
func forEachQ8KSet(t *testing.T, f func(t *testing.T)) {
	forEachSet(t, f)
	if !hasVNNI {
		t.Logf("skipping the VNNI-less avx512 Q8_K kernels as a separate set: this CPU lacks VNNI or AVX-512")
		return
	}
	t.Run("avx512-novnni", func(t *testing.T) {
		useVNNI = false
		defer func() { useVNNI = true }()
		f(t)
	})
}

// TestQuantizeQ8K compares QuantizeQ8K with its twin on every kernel set,
// bit for bit, over 0..9 blocks of random values at misaligned offsets:
// normal values, all negative, all positive, a largest magnitude that ties
// between a positive and a negative value (the first wins), zeros (and
// negative zeros), tiny and huge values, and values whose scaled codes
// fall on halves.
func TestQuantizeQ8K(t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		r := newRand(t)
		for nb := 0; nb <= 9; nb++ {
			for _, off := range offsets {
				x := randF32(r, nb*kBlockSize)
				for b := 0; b < nb; b++ {
					xb := x[b*kBlockSize : (b+1)*kBlockSize]
					switch b {
					case 1:
						for i := range xb {
							xb[i] = -float32(math.Abs(float64(xb[i])))
						}
					case 2:
						for i := range xb {
							xb[i] = float32(math.Abs(float64(xb[i]))) * 1e-30
						}
					case 3:
						xb[7], xb[200] = -9, 9
					case 4:
						xb[7], xb[200] = 9, -9
					case 5:
						for i := range xb {
							xb[i] = float32(math.Copysign(0, float64(xb[i])))
						}
					case 6:
						for i := range xb {
							xb[i] = float32(i%255-127) * 0.5 * 1e30
						}
					case 7:
						for i := range xb {
							xb[i] = float32(i%254 - 127)
						}
						xb[3] = 254 // codes k/2: every other one a tie
					}
				}
				x = offsetCopy(x, off)
				got, want := make([]byte, nb*Q8KBlockBytes), make([]byte, nb*Q8KBlockBytes)
				QuantizeQ8K(got, x)
				quantizeQ8KGeneric(want, x)
				if !bytes.Equal(got, want) {
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("nb=%d off=%d: block %d byte %d = %#x, twin %#x", nb, off, i/Q8KBlockBytes, i%Q8KBlockBytes, got[i], want[i])
						}
					}
				}
			}
		}
	})
}
