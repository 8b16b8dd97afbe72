package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Each test calls the exported kernel (assembly where built and supported)
// and compares it with the generic twin, and the twin with a float64
// reference, on every length 0..40 and random lengths up to 300, at
// misaligned slice offsets.

func TestAsmSelected(t *testing.T) {
	t.Logf("assembly kernels: built and supported %v, selected %v", hasAVX2, useAsm)
}

func TestDot(t *testing.T) {
	tests := []struct {
		name string
		// run returns the exported kernel's result, the generic twin's,
		// the float64 reference and Σ|a_i*b_i| for n values at offset off.
		run func(r *rand.Rand, n, off int) (got, gen float32, ref, mag float64)
	}{
		{"DotF32", func(r *rand.Rand, n, off int) (float32, float32, float64, float64) {
			a, b := offsetCopy(randF32(r, n), off), offsetCopy(randF32(r, n), off+1)
			var ref, mag float64
			for i := range a {
				p := float64(a[i]) * float64(b[i])
				ref, mag = ref+p, mag+math.Abs(p)
			}
			return DotF32(a, b), dotF32Generic(a, b), ref, mag
		}},
		{"DotF16", func(r *rand.Rand, n, off int) (float32, float32, float64, float64) {
			w, x := offsetCopy(randF16(r, n), off), offsetCopy(randF32(r, n), off+2)
			var ref, mag float64
			for i := range w {
				p := float64(F16ToF32Scalar(w[i])) * float64(x[i])
				ref, mag = ref+p, mag+math.Abs(p)
			}
			return DotF16(w, x), dotF16Generic(w, x), ref, mag
		}},
		{"DotBF16", func(r *rand.Rand, n, off int) (float32, float32, float64, float64) {
			w, x := offsetCopy(randBF16(r, n), off), offsetCopy(randF32(r, n), off+2)
			var ref, mag float64
			for i := range w {
				p := float64(BF16ToF32Scalar(w[i])) * float64(x[i])
				ref, mag = ref+p, mag+math.Abs(p)
			}
			return DotBF16(w, x), dotBF16Generic(w, x), ref, mag
		}},
		{"DotQ80", func(r *rand.Rand, n, off int) (float32, float32, float64, float64) {
			nb := n % 11 // Q8_0 needs whole blocks: 0..10 of them
			w, x := offsetCopy(randQ80(r, nb), off), offsetCopy(randF32(r, nb*q80BlockSize), off+3)
			var ref, mag float64
			for i := range x {
				p := q80Value(w, i) * float64(x[i])
				ref, mag = ref+p, mag+math.Abs(p)
			}
			return DotQ80(w, x), dotQ80Generic(w, x), ref, mag
		}},
		{"sumF32", func(r *rand.Rand, n, off int) (float32, float32, float64, float64) {
			x := offsetCopy(randF32(r, n), off)
			var ref, mag float64
			for _, v := range x {
				ref, mag = ref+float64(v), mag+math.Abs(float64(v))
			}
			return sumF32(x), sumF32Generic(x), ref, mag
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(t)
			for _, n := range sizes(r) {
				for _, off := range offsets {
					got, gen, ref, mag := tt.run(r, n, off)
					if !within(float64(got), float64(gen), mag) {
						t.Errorf("%s(n=%d, off=%d) = %v, generic %v (Σ|ab| %v)", tt.name, n, off, got, gen, mag)
					}
					if !within(float64(gen), ref, mag) {
						t.Errorf("%sGeneric(n=%d, off=%d) = %v, float64 reference %v (Σ|ab| %v)", tt.name, n, off, gen, ref, mag)
					}
				}
			}
		})
	}
}

func TestAxpy(t *testing.T) {
	tests := []struct {
		name string
		// run applies the exported kernel to y and the generic twin to yg,
		// and returns the x values as float32.
		run func(r *rand.Rand, y, yg []float32, alpha float32, off int) []float32
	}{
		{"AxpyF32", func(r *rand.Rand, y, yg []float32, alpha float32, off int) []float32 {
			x := offsetCopy(randF32(r, len(y)), off)
			AxpyF32(y, alpha, x)
			axpyF32Generic(yg, alpha, x)
			return x
		}},
		{"AxpyF16", func(r *rand.Rand, y, yg []float32, alpha float32, off int) []float32 {
			x := offsetCopy(randF16(r, len(y)), off)
			AxpyF16(y, alpha, x)
			axpyF16Generic(yg, alpha, x)
			xf := make([]float32, len(x))
			f16ToF32Generic(xf, x)
			return xf
		}},
		{"AxpyBF16", func(r *rand.Rand, y, yg []float32, alpha float32, off int) []float32 {
			x := offsetCopy(randBF16(r, len(y)), off)
			AxpyBF16(y, alpha, x)
			axpyBF16Generic(yg, alpha, x)
			xf := make([]float32, len(x))
			bf16ToF32Generic(xf, x)
			return xf
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(t)
			for _, n := range sizes(r) {
				for _, off := range offsets {
					y0 := randF32(r, n)
					y, check := guardedF32(off, n, 16)
					copy(y, y0)
					yg := append([]float32(nil), y0...)
					alpha := float32(r.NormFloat64())
					x := tt.run(r, y, yg, alpha, (off+1)%8)
					check(t)
					for i := range y {
						tol := axpyTol * (math.Abs(float64(y0[i])) + math.Abs(float64(alpha*x[i])))
						if math.Abs(float64(y[i]-yg[i])) > tol {
							t.Errorf("%s(n=%d, off=%d): y[%d] = %v, generic %v", tt.name, n, off, i, y[i], yg[i])
							break
						}
					}
				}
			}
		})
	}
}

func TestScaleF32(t *testing.T) {
	r := newRand(t)
	for _, n := range sizes(r) {
		for _, off := range offsets {
			x0 := randF32(r, n)
			x, check := guardedF32(off, n, 16)
			copy(x, x0)
			alpha := float32(r.NormFloat64())
			ScaleF32(x, alpha)
			check(t)
			for i := range x {
				if want := x0[i] * alpha; math.Float32bits(x[i]) != math.Float32bits(want) {
					t.Errorf("ScaleF32(n=%d, off=%d): x[%d] = %v, want %v", n, off, i, x[i], want)
					break
				}
			}
		}
	}
}

// TestConvertVector checks the slice conversions bit for bit against the
// scalar helpers, on random bit patterns (NaNs, subnormals and infinities
// included) at misaligned offsets with guard regions.
func TestConvertVector(t *testing.T) {
	r := newRand(t)
	for _, n := range sizes(r) {
		for _, off := range offsets {
			name := fmt.Sprintf("n=%d, off=%d", n, off)
			halves := make([]uint16, n)
			floats := make([]float32, n)
			for i := range halves {
				halves[i] = uint16(r.Uint32())
				floats[i] = math.Float32frombits(r.Uint32())
			}
			halves = offsetCopy(halves, (off+3)%8)
			floats = offsetCopy(floats, (off+5)%8)

			for _, c := range []struct {
				name  string
				conv  func([]float32, []uint16)
				twin  func(uint16) float32
				input []uint16
			}{
				{"F16ToF32", F16ToF32, F16ToF32Scalar, halves},
				{"BF16ToF32", BF16ToF32, BF16ToF32Scalar, halves},
			} {
				dst, check := guardedF32(off, n, 16)
				c.conv(dst, c.input)
				check(t)
				for i, h := range c.input {
					if want := c.twin(h); math.Float32bits(dst[i]) != math.Float32bits(want) {
						t.Errorf("%s(%s): dst[%d] = %#08x for %#04x, want %#08x", c.name, name, i, math.Float32bits(dst[i]), h, math.Float32bits(want))
						break
					}
				}
			}
			for _, c := range []struct {
				name string
				conv func([]uint16, []float32)
				twin func(float32) uint16
			}{
				{"F32ToF16", F32ToF16, F32ToF16Scalar},
				{"F32ToBF16", F32ToBF16, F32ToBF16Scalar},
			} {
				dst, check := guardedU16(off, n, 16)
				c.conv(dst, floats)
				check(t)
				for i, f := range floats {
					if want := c.twin(f); dst[i] != want {
						t.Errorf("%s(%s): dst[%d] = %#04x for %#08x, want %#04x", c.name, name, i, dst[i], math.Float32bits(f), want)
						break
					}
				}
			}
		}
	}
}

func TestLengthMismatchPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"DotF32", func() { DotF32(make([]float32, 3), make([]float32, 4)) }},
		{"AxpyF16", func() { AxpyF16(make([]float32, 3), 1, make([]uint16, 4)) }},
		{"DotQ80/cols", func() { DotQ80(make([]byte, 34), make([]float32, 31)) }},
		{"DotQ80/w", func() { DotQ80(make([]byte, 33), make([]float32, 32)) }},
		{"F32ToF16", func() { F32ToF16(make([]uint16, 3), make([]float32, 4)) }},
		{"MatMulF32/w", func() { MatMulF32(make([]float32, 4), 4, make([]float32, 8), 1, 8, make([]float32, 31), 0, 4) }},
		{"MatMulF32/dst", func() { MatMulF32(make([]float32, 7), 4, make([]float32, 16), 2, 8, make([]float32, 32), 0, 4) }},
		{"MatMulF32/ldd", func() { MatMulF32(make([]float32, 16), 3, make([]float32, 16), 2, 8, make([]float32, 32), 0, 4) }},
		{"MatMulQ80/cols", func() { MatMulQ80(make([]float32, 4), 4, make([]float32, 16), 1, 16, make([]byte, 64), 0, 4) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with bad lengths did not panic", tt.name)
				}
			}()
			tt.f()
		})
	}
}

func TestMeasureBandwidth(t *testing.T) {
	if testing.Short() {
		t.Skip("timing loop; skipped in -short")
	}
	for _, workers := range []int{1, 2} {
		bw := MeasureBandwidthParallel(1<<20, workers)
		t.Logf("MeasureBandwidthParallel(1 MiB, %d) = %.1f GB/s", workers, bw/1e9)
		if !(bw > 0) || math.IsInf(bw, 0) {
			t.Errorf("MeasureBandwidthParallel(1 MiB, %d) = %v, want a positive rate", workers, bw)
		}
	}
}
