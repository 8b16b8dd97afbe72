package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Each test calls the exported kernel (assembly where built and supported)
// and compares it with the generic twin, and the twin with a float64
// reference, on every length 0..40 and random lengths up to 300, at
// misaligned slice offsets.

// TestAsmSelected checks the kernel selection: in a build with the assembly
// (amd64, gc, not purego) on a CPU that runs it, the assembly must be
// selected; in a build without it, the generic twins. A CPU that cannot run
// the assembly skips the test, except under CI=true, where it fails: CI must
// not pass having tested only the generic kernels.
func TestAsmSelected(t *testing.T) {
	t.Logf("assembly kernels: avx2 built and supported %v, selected %v; avx512 built and supported %v, selected %v; Kernels() = %q",
		hasAVX2, useAsm, hasAVX512, useAVX512, Kernels())
	if !asmBuilt {
		if hasAVX2 || useAsm || hasAVX512 || useAVX512 || Kernels() != "generic" {
			t.Errorf("build without assembly: hasAVX2 %v, useAsm %v, hasAVX512 %v, useAVX512 %v, Kernels() = %q; want false, false, false, false, \"generic\"",
				hasAVX2, useAsm, hasAVX512, useAVX512, Kernels())
		}
		return
	}
	if hasAVX2 != cpuRunsAsm {
		t.Errorf("hasAVX2 = %v, want %v (%s)", hasAVX2, cpuRunsAsm, cpuFeatures())
	}
	if hasAVX512 != cpuRunsAVX512 {
		t.Errorf("hasAVX512 = %v, want %v (%s; %s)", hasAVX512, cpuRunsAVX512, cpuFeatures(), cpuFeatures512())
	}
	if !cpuRunsAsm {
		msg := fmt.Sprintf("this CPU cannot run the assembly kernels (%s): only the generic twins are tested", cpuFeatures())
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI=true requires a CPU with them (or build with -tags purego)", msg)
		}
		t.Skip(msg)
	}
	want := "avx2"
	if cpuRunsAVX512 {
		want = "avx512"
		switch {
		case isHalf512:
			want = "avx512-zen4"
		case isZen4:
			want = "avx512-zen5"
		}
	} else {
		t.Logf("this CPU cannot run the avx512 kernels (%s): they are not tested", cpuFeatures512())
	}
	if !useAsm || useAVX512 != cpuRunsAVX512 || Kernels() != want {
		t.Errorf("assembly built and supported (%s; %s), but useAsm = %v, useAVX512 = %v, Kernels() = %q; want true, %v, %q",
			cpuFeatures(), cpuFeatures512(), useAsm, useAVX512, Kernels(), cpuRunsAVX512, want)
	}
	// The overrides select the named sets and restore the default.
	for _, s := range kernelSets(t) {
		restore := s.force()
		if got := Kernels(); got != s.name {
			t.Errorf("with the %s set forced, Kernels() = %q", s.name, got)
		}
		restore()
		if got := Kernels(); got != want {
			t.Errorf("after restoring from %s, Kernels() = %q, want %q", s.name, got, want)
		}
	}
}

// TestNoAVX512Registers checks that the generated AVX2 assembly names no
// vector register above 15 and no mask register: avo allocates from all 32
// vector registers, but X16-X31 need AVX-512, which the AVX2 kernels must
// not require (the AVX-512 ones are in kernels_avx512_amd64.s).
func TestNoAVX512Registers(t *testing.T) {
	src, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\b([XYZ](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
	for i, line := range strings.Split(string(src), "\n") {
		if r := re.FindString(line); r != "" && !strings.HasPrefix(strings.TrimSpace(line), "//") {
			t.Errorf("kernels_amd64.s:%d uses %s, an AVX-512 register: %s", i+1, r, strings.TrimSpace(line))
		}
	}
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
	for _, set := range kernelSets(t) {
		for _, tt := range tests {
			t.Run(set.name+"/"+tt.name, func(t *testing.T) {
				defer set.force()()
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
}

// TestDotF32SetsBitExact checks that DotF32 gives the same bits with the
// avx512 set as with the avx2 set, on every length 0..300 and misaligned
// slices: internal/train's golden trajectories were recorded with the avx2
// kernels, and its float32 arithmetic must not depend on the CPU.
func TestDotF32SetsBitExact(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for n := 0; n <= 300; n++ {
		for _, off := range offsets {
			a, b := offsetCopy(randF32(r, n), off), offsetCopy(randF32(r, n), off+1)
			got := DotF32(a, b)
			restore := ForceAVX2()
			want := DotF32(a, b)
			restore()
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("DotF32(n=%d, off=%d) = %v with avx512, %v with avx2", n, off, got, want)
			}
		}
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

// TestMul checks MulF32 and MulAddF32 bit for bit against their generic
// twins and against the definition (the product rounded to float32, then
// the sum: random normal operands make a fused multiply-add differ in the
// last bit for a good share of the elements), at misaligned offsets with
// guard regions, and with the destination passed as x too.
func TestMul(t *testing.T) {
	tests := []struct {
		name string
		run  func(dst, x, y []float32)
		twin func(dst, x, y []float32)
		// def is element i of the result for the old destination value d.
		def func(d, x, y float32) float32
	}{
		{"MulF32", MulF32, mulF32Generic, func(_, x, y float32) float32 { return x * y }},
		{"MulAddF32", MulAddF32, mulAddF32Generic, func(d, x, y float32) float32 { return d + float32(x*y) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(t)
			for _, n := range sizes(r) {
				for _, off := range offsets {
					for _, alias := range []bool{false, true} {
						shape := fmt.Sprintf("%s(n=%d, off=%d, alias=%v)", tt.name, n, off, alias)
						d0 := randF32(r, n)
						dst, check := guardedF32(off, n, 16)
						copy(dst, d0)
						x := offsetCopy(randF32(r, n), (off+1)%8)
						y := offsetCopy(randF32(r, n), (off+2)%8)
						twin := append([]float32(nil), d0...)
						if alias {
							x = dst
							tt.run(dst, dst, y)
							tt.twin(twin, twin, y)
						} else {
							tt.run(dst, x, y)
							tt.twin(twin, x, y)
						}
						check(t)
						for i := range dst {
							xi := x[i]
							if alias {
								xi = d0[i]
							}
							if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
								t.Fatalf("%s: dst[%d] = %v, generic %v", shape, i, dst[i], twin[i])
							}
							if want := tt.def(d0[i], xi, y[i]); math.Float32bits(twin[i]) != math.Float32bits(want) {
								t.Fatalf("%sGeneric: dst[%d] = %v, want %v", shape, i, twin[i], want)
							}
						}
					}
				}
			}
		})
	}
}

// TestConvertVector checks the slice conversions bit for bit against the
// scalar helpers, on random bit patterns (NaNs, subnormals and infinities
// included) at misaligned offsets with guard regions, with every kernel
// set the CPU runs.
func TestConvertVector(t *testing.T) { forEachSet(t, testConvertVector) }

func testConvertVector(t *testing.T) {
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
	tests := []panicCase{
		{"DotF32", func() { DotF32(make([]float32, 3), make([]float32, 4)) }},
		{"AxpyF16", func() { AxpyF16(make([]float32, 3), 1, make([]uint16, 4)) }},
		{"MulF32/x", func() { MulF32(make([]float32, 4), make([]float32, 3), make([]float32, 4)) }},
		{"MulF32/y", func() { MulF32(make([]float32, 4), make([]float32, 4), make([]float32, 5)) }},
		{"MulAddF32/y", func() { MulAddF32(make([]float32, 4), make([]float32, 4), make([]float32, 3)) }},
		{"DotQ80/cols", func() { DotQ80(make([]byte, 34), make([]float32, 31)) }},
		{"DotQ80/w", func() { DotQ80(make([]byte, 33), make([]float32, 32)) }},
		{"F32ToF16", func() { F32ToF16(make([]uint16, 3), make([]float32, 4)) }},
		{"MatMulF32/w", func() { MatMulF32(make([]float32, 4), 4, make([]float32, 8), 1, 8, make([]float32, 31), 0, 4) }},
		{"MatMulF32/dst", func() { MatMulF32(make([]float32, 7), 4, make([]float32, 16), 2, 8, make([]float32, 32), 0, 4) }},
		{"MatMulF32/ldd", func() { MatMulF32(make([]float32, 16), 3, make([]float32, 16), 2, 8, make([]float32, 32), 0, 4) }},
		{"MatMulQ80/cols", func() { MatMulQ80(make([]float32, 4), 4, make([]float32, 16), 1, 16, make([]byte, 64), 0, 4) }},
	}
	checkPanics(t, "lengths", tests)
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

// TestNoAlloc checks that the kernels keep their slice arguments on the
// caller's stack, with the assembly and with the generic kernels: callers
// pass stack buffers, and a slice argument that escaped (as one passed
// through a function value does) would cost an allocation per call. The
// MatMul shapes take every path of the driver: 4-token blocks, leftover
// token and weight rows, and a tail past the last group of 8 columns.
func TestNoAlloc(t *testing.T) {
	const nt, rows, cols, qcols = 5, 16, 36, 64
	for _, impl := range []string{"dispatch", "generic"} {
		t.Run(impl, func(t *testing.T) {
			if impl == "generic" {
				defer ForceGeneric()()
			}
			allocs := testing.AllocsPerRun(20, func() {
				var x [nt * qcols]float32
				var dst [nt * rows]float32
				var w32 [rows * cols]float32
				var w16 [rows * cols]uint16
				var wq [rows * qcols / q80BlockSize * q80BlockBytes]byte
				MatMulF32(dst[:], rows, x[:], nt, cols, w32[:], 0, rows)
				MatMulF16(dst[:], rows, x[:], nt, cols, w16[:], 0, rows)
				MatMulBF16(dst[:], rows, x[:], nt, cols, w16[:], 1, rows)
				MatMulQ80(dst[:], rows, x[:], nt, qcols, wq[:], 0, rows)

				var y, s, z [cols]float32
				var h [cols]uint16
				var codes [cols]byte
				benchSink += DotF32(y[:], x[:cols]) + DotF16(h[:], y[:]) + DotBF16(h[:], y[:])
				benchSink += DotQ80(wq[:2*q80BlockBytes], x[:qcols])
				AxpyF32(y[:], 2, x[:cols])
				AxpyF16(y[:], 2, h[:])
				AxpyBF16(y[:], 2, h[:])
				ScaleF32(y[:], 2)
				F16ToF32(y[:], h[:])
				BF16ToF32(y[:], h[:])
				F32ToF16(h[:], y[:])
				F32ToBF16(h[:], y[:])
				U8ToF32(y[:], codes[:], 1, 0)
				I8ToF32(y[:], codes[:], 1)
				U4ToF32(y[:], codes[:cols/2], 1, 0)
				U2ToF32(y[:], codes[:cols/4], 1, 0)
				U8ToF32Vec(y[:], codes[:], s[:], z[:])
				U4ToF32Vec(y[:], codes[:cols/2], s[:], z[:])
				U2ToF32Vec(y[:], codes[:cols/4], s[:], z[:])
				MulF32(y[:], s[:], z[:])
				MulAddF32(y[:], s[:], z[:])
				var t16 [16]float32
				LUT4ToF32(y[:], codes[:cols/2], &t16)
				LUT3ToF32(y[:32], codes[:12], (*[8]float32)(t16[:8]))
				LUT2ToF32(y[:], codes[:cols/4], (*[4]float32)(t16[:4]))
				Q80ToF32(x[:qcols], wq[:2*q80BlockBytes])
				Q40ToF32(x[:qcols], wq[:2*q40BlockBytes])
				Q41ToF32(x[:qcols], wq[:2*q41BlockBytes])
				Q50ToF32(x[:qcols], wq[:2*q50BlockBytes])
				Q51ToF32(x[:qcols], wq[:2*q51BlockBytes])
				IQ4NLToF32(x[:qcols], wq[:2*iq4nlBlockBytes])
				E5M2ToF32(y[:], codes[:], 0.5)
				E4M3ToF32(y[:], codes[:], 0.5)
				E4M3ToF32(y[:], codes[:], 0x1p125) // the generic path

				var rowsF [8 * 128]float32
				var packed [8 * 128]byte
				var gs, gb [8 * 128 / 32]float32
				U8ToF32Groups(rowsF[:], packed[:], 32, gs[:], gb[:])
				U4ToF32Groups(rowsF[:], packed[:8*64], 64, gs[:16], gb[:16])
				U2ToF32Groups(rowsF[:], packed[:8*32], 128, gs[:8], gb[:8])
				U8ToF32Groups(rowsF[:12*20], packed[:12*20], 12, gs[:20], gb[:20])
				U4ToF32Groups(rowsF[:3*10], packed[:15], 3, gs[:10], gb[:10])

				var scores [37]float32 // whole groups of 8 and a tail
				m := MaxF32(scores[:])
				benchSink += float32(ExpShiftSum(scores[:], 0.125, m*0.125))
			})
			if allocs != 0 {
				t.Errorf("kernels on stack buffers: %v allocations, want 0", allocs)
			}
		})
	}
}
