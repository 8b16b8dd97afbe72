package simd

import (
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// The softmax kernels are checked three ways: MaxF32 and ExpShiftSum give
// the same bits as their twins (results, sums, NaN positions) on random
// inputs at odd lengths and misaligned offsets with guard regions; the
// twins follow their documented semantics on special values; and the
// exponential is within the documented error of math.Exp on a dense sweep
// and on 10M random points. With -exhaustive, TestExpExhaustive checks
// every float32 argument in range against math.Exp and the assembly against
// the twin on all 2^32 arguments.

var exhaustive = flag.Bool("exhaustive", false, "run TestExpExhaustive: every float32 argument of ExpShiftSum's exponential (minutes)")

// Documented accuracy of the exponential in [expLo, expHi]: at most 1.02
// ulp and a relative error of 1e-7 (TestExpExhaustive measures 1.0103 ulp
// and 8.46e-8 over every float32 there).
const (
	expMaxULP = 1.02
	expMaxRel = 1e-7
)

var inf32 = float32(math.Inf(1))

// expULP returns the error of got against e^t in units of the last place
// of float32 in e^t's binade, and the relative error.
func expULP(got, t float32) (ulp, rel float64) {
	want := math.Exp(float64(t))
	_, e := math.Frexp(want) // want = f*2^e, 0.5 <= f < 1
	d := math.Abs(float64(got) - want)
	return d / math.Ldexp(1, e-24), d / want
}

// expErr accumulates the worst ulp and relative errors of a sweep.
type expErr struct {
	ulp, rel   float64
	atU, atRel float32
	n          int
}

func (s *expErr) add(got, t float32) {
	u, r := expULP(got, t)
	if u > s.ulp {
		s.ulp, s.atU = u, t
	}
	if r > s.rel {
		s.rel, s.atRel = r, t
	}
	s.n++
}

func (s *expErr) merge(o expErr) {
	if o.ulp > s.ulp {
		s.ulp, s.atU = o.ulp, o.atU
	}
	if o.rel > s.rel {
		s.rel, s.atRel = o.rel, o.atRel
	}
	s.n += o.n
}

func (s *expErr) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d points, max %.4f ulp at t=%v, max relative error %.3g at t=%v", what, s.n, s.ulp, s.atU, s.rel, s.atRel)
	if s.ulp > expMaxULP || s.rel > expMaxRel {
		t.Errorf("%s: max error %.4f ulp (t=%v), relative %.3g (t=%v); want <= %v ulp and <= %v", what, s.ulp, s.atU, s.rel, s.atRel, expMaxULP, expMaxRel)
	}
}

// expOf returns exp(t) for every t through ExpShiftSum (scale 1, shift 0:
// the argument is t itself), in one call.
func expOf(ts []float32) []float32 {
	x := append([]float32(nil), ts...)
	ExpShiftSum(x, 1, 0)
	return x
}

// sweep runs f(lo, hi) over [0, n) split across the CPUs.
func sweep(n int, f func(lo, hi int) expErr) expErr {
	w := runtime.GOMAXPROCS(0)
	res := make([]expErr, w)
	var wg sync.WaitGroup
	for k := range res {
		wg.Go(func() { res[k] = f(k*n/w, (k+1)*n/w) })
	}
	wg.Wait()
	var s expErr
	for _, r := range res {
		s.merge(r)
	}
	return s
}

// measureExp checks the values produced from the arguments next(i) for
// i < n, in chunks of 4096.
func measureExp(n int, next func(i int) float32) expErr {
	return sweep(n, func(lo, hi int) expErr {
		var s expErr
		var t, x [4096]float32
		for i := lo; i < hi; i += len(t) {
			m := min(len(t), hi-i)
			for j := range m {
				t[j] = next(i + j)
			}
			copy(x[:m], t[:m])
			ExpShiftSum(x[:m], 1, 0)
			for j := range m {
				s.add(x[j], t[j])
			}
		}
		return s
	})
}

// TestExpAccuracy sweeps float32 arguments densely: every 2048th float32
// in [expLo, expHi] (all binades, tiny arguments included), a uniform grid
// of 2^20 points on [-87.3, 0], and every float32 within 256 ulps of the
// range ends, of 0 and of each (k+1/2)*ln2, where round(t*log2e) steps;
// then 10M uniform random points on [-87.3, 0].
func TestExpAccuracy(t *testing.T) {
	lo, hi := math.Float32bits(expLo), math.Float32bits(expHi)
	neg := int(lo-0x8000_0000) + 1 // -0 .. expLo
	pos := int(hi) + 1             // +0 .. expHi
	const stride = 2048
	s := measureExp((neg+pos)/stride, func(i int) float32 {
		b := uint32(i * stride)
		if int(b) < neg {
			return math.Float32frombits(0x8000_0000 + b)
		}
		return math.Float32frombits(b - uint32(neg))
	})
	s.check(t, "every 2048th float32 in [expLo, expHi]")

	const grid = 1 << 20
	s = measureExp(grid+1, func(i int) float32 { return float32(-87.3 * float64(i) / grid) })
	s.check(t, "uniform grid on [-87.3, 0]")

	centres := []float32{expLo, expHi, 0}
	for k := -126; k <= 127; k++ {
		centres = append(centres, float32((float64(k)+0.5)*math.Ln2))
	}
	const half = 256
	s = measureExp(len(centres)*2*half, func(i int) float32 {
		c, d := centres[i/(2*half)], i%(2*half)-half
		v := c
		for ; d > 0; d-- {
			v = math.Nextafter32(v, inf32)
		}
		for ; d < 0; d++ {
			v = math.Nextafter32(v, -inf32)
		}
		return min(max(v, expLo), expHi)
	})
	s.check(t, "±256 ulps around the range ends, 0 and (k+1/2)*ln2")

	const points = 10_000_000
	s = sweep(points, func(lo, hi int) expErr {
		r := rand.New(rand.NewPCG(7, uint64(lo)))
		var s expErr
		var ts, x [4096]float32
		for i := lo; i < hi; i += len(ts) {
			m := min(len(ts), hi-i)
			for j := range m {
				ts[j] = float32(-87.3 * r.Float64())
			}
			copy(x[:m], ts[:m])
			ExpShiftSum(x[:m], 1, 0)
			for j := range m {
				s.add(x[j], ts[j])
			}
		}
		return s
	})
	s.check(t, "10M random points on [-87.3, 0]")
}

// TestExpExhaustive checks every float32 argument in [expLo, expHi] against
// math.Exp (about 2.2e9 of them), then the assembly against the twin on
// every float32 bit pattern: minutes of CPU. Run it with -exhaustive.
func TestExpExhaustive(t *testing.T) {
	if !*exhaustive {
		t.Skip("takes minutes; run with -exhaustive")
	}
	lo, hi := math.Float32bits(expLo), math.Float32bits(expHi)
	neg := int(lo-0x8000_0000) + 1
	s := measureExp(neg+int(hi)+1, func(i int) float32 {
		if i < neg {
			return math.Float32frombits(0x8000_0000 + uint32(i))
		}
		return math.Float32frombits(uint32(i - neg))
	})
	s.check(t, "every float32 in [expLo, expHi]")

	if !hasAVX2 {
		return
	}
	// The assembly against the twin on all 2^32 bit patterns.
	if n, one := mismatchesAll32(
		func(x []float32) { ExpShiftSum(x, 1, 0) },
		func(x []float32) { expShiftSumGeneric(x, 1, 0) }); n != 0 {
		t.Errorf("ExpShiftSum differs from expShiftSumGeneric on %d of the 2^32 float32 arguments (one: %#08x)", n, math.Float32bits(one))
	}
}

// mismatchesAll32 runs asm and generic, each in place, over every float32
// bit pattern, in chunks on all cores, and returns how many results differ
// (NaNs match NaNs) and one argument where they do.
func mismatchesAll32(asm, generic func(x []float32)) (n int, one float32) {
	const chunk = 1 << 16
	bad := sweep(1<<32/chunk, func(lo, hi int) expErr {
		var e expErr
		var x, xg [chunk]float32
		for c := lo; c < hi; c++ {
			for j := range x {
				x[j] = math.Float32frombits(uint32(c*chunk + j))
			}
			xg = x
			asm(x[:])
			generic(xg[:])
			for j := range x {
				if !sameF32(x[j], xg[j]) {
					e.n++
					e.atU = math.Float32frombits(uint32(c*chunk + j))
				}
			}
		}
		return e
	})
	return bad.n, bad.atU
}

// TestExpSpecial checks the documented results outside the accurate range
// and at its ends, with the assembly and the generic kernels.
func TestExpSpecial(t *testing.T) {
	nan := float32(math.NaN())
	tiny := math.Float32frombits(1) // smallest subnormal
	tests := []struct {
		name string
		t    float32
		want float32 // NaN: any NaN
	}{
		{"+0", 0, 1},
		{"-0", float32(math.Copysign(0, -1)), 1},
		{"subnormal", tiny, 1},
		{"-subnormal", -tiny, 1},
		{"expLo", expLo, 1.1754997e-38},
		{"below expLo", math.Nextafter32(expLo, -inf32), 0},
		{"-88", -88, 0},
		{"-1e30", -1e30, 0},
		{"-MaxFloat32", -math.MaxFloat32, 0},
		{"-Inf", -inf32, 0},
		{"expHi", expHi, 3.4027985e+38},
		{"above expHi", math.Nextafter32(expHi, inf32), inf32},
		{"100", 100, inf32},
		{"MaxFloat32", math.MaxFloat32, inf32},
		{"+Inf", inf32, inf32},
		{"NaN", nan, nan},
		{"1", 1, math.E},
		{"-1", -1, 1 / math.E},
		{"ln2", float32(math.Ln2), 2},
	}
	for _, impl := range []string{"dispatch", "generic"} {
		t.Run(impl, func(t *testing.T) {
			if impl == "generic" {
				defer ForceGeneric()()
			}
			// Each value fills a whole vector, and once more in the tail.
			for _, tt := range tests {
				x := make([]float32, 11)
				for i := range x {
					x[i] = tt.t
				}
				ExpShiftSum(x, 1, 0)
				for i, got := range x {
					ok := math.Float32bits(got) == math.Float32bits(tt.want)
					if tt.want != tt.want {
						ok = got != got
					}
					if !ok {
						t.Errorf("%s: exp(%v) = %v (%#08x) at index %d, want %v (%#08x)", tt.name, tt.t, got, math.Float32bits(got), i, tt.want, math.Float32bits(tt.want))
						break
					}
				}
			}
		})
	}
}

// expArgs returns n arguments for the exponential that stress its edges:
// the softmax range and beyond, the neighbourhoods of the range ends and
// of the points where n = round(t*log2e) steps, tiny values, special
// values and random bit patterns (NaNs, infinities, subnormals).
func expArgs(r *rand.Rand, n int) []float32 {
	ts := make([]float32, n)
	nudge := func(v float32, k int) float32 {
		for ; k > 0; k-- {
			v = math.Nextafter32(v, inf32)
		}
		for ; k < 0; k++ {
			v = math.Nextafter32(v, -inf32)
		}
		return v
	}
	special := []float32{0, float32(math.Copysign(0, -1)), inf32, -inf32, float32(math.NaN()), expLo, expHi, math.MaxFloat32, -math.MaxFloat32}
	for i := range ts {
		switch r.IntN(8) {
		case 0, 1:
			ts[i] = float32(-90 * r.Float64())
		case 2:
			ts[i] = float32(200*r.Float64() - 100)
		case 3:
			ts[i] = nudge([]float32{expLo, expHi, 0}[r.IntN(3)], r.IntN(129)-64)
		case 4:
			k := r.IntN(256) - 127
			ts[i] = nudge(float32((float64(k)+0.5)*math.Ln2), r.IntN(9)-4)
		case 5:
			ts[i] = float32(r.NormFloat64() * 1e-4)
		case 6:
			ts[i] = special[r.IntN(len(special))]
		default:
			ts[i] = math.Float32frombits(r.Uint32())
		}
	}
	return ts
}

// sameF32 reports whether a and b have the same bits or are both NaNs (a
// NaN's payload depends on which operand the hardware propagated).
func sameF32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func sameF64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// TestExpShiftSum compares ExpShiftSum bit for bit with its twin, values
// and sum, at every length 0..40 and random lengths up to 300, misaligned,
// with guard regions, for several scales and shifts; and checks the sum
// against a plain float64 sum of the results.
func TestExpShiftSum(t *testing.T) {
	r := newRand(t)
	params := []struct{ scale, shift float32 }{
		{1, 0},
		{0.088388346, 0}, // 1/sqrt(128)
		{0.125, 3.5},
		{1, -2},
		{-1, 0.5},
	}
	for _, n := range sizes(r) {
		for _, off := range offsets {
			for _, p := range params {
				x0 := expArgs(r, n)
				x, check := guardedF32(off, n, 16)
				copy(x, x0)
				xg := append([]float32(nil), x0...)
				got := ExpShiftSum(x, p.scale, p.shift)
				want := expShiftSumGeneric(xg, p.scale, p.shift)
				check(t)
				for i := range x {
					if !sameF32(x[i], xg[i]) {
						t.Errorf("ExpShiftSum(n=%d, off=%d, scale=%v, shift=%v): x[%d] = %v (%#08x) for %v, generic %v (%#08x)",
							n, off, p.scale, p.shift, i, x[i], math.Float32bits(x[i]), x0[i], xg[i], math.Float32bits(xg[i]))
						break
					}
				}
				if !sameF64(got, want) {
					t.Errorf("ExpShiftSum(n=%d, off=%d, scale=%v, shift=%v) = %v, generic %v", n, off, p.scale, p.shift, got, want)
				}
				var plain float64
				for _, v := range xg {
					plain += float64(v)
				}
				if !(math.Abs(want-plain) <= 1e-14*math.Abs(plain)) && !sameF64(want, plain) {
					t.Errorf("expShiftSumGeneric(n=%d, off=%d) = %v, plain float64 sum of the results %v", n, off, want, plain)
				}
			}
		}
	}
}

// TestExpShiftSumRandomBits compares the assembly with the twin on 1M
// arguments from expArgs (boundaries, specials and random bit patterns),
// value by value; TestExpAccuracy covers 10M more through the dispatch.
func TestExpShiftSumRandomBits(t *testing.T) {
	if !hasAVX2 {
		t.Skip("assembly not built or not supported")
	}
	r := newRand(t)
	const n = 1 << 20
	x := expArgs(r, n)
	xg := append([]float32(nil), x...)
	x0 := append([]float32(nil), x...)
	got := ExpShiftSum(x, 1, 0)
	want := expShiftSumGeneric(xg, 1, 0)
	bad := 0
	for i := range x {
		if !sameF32(x[i], xg[i]) {
			if bad++; bad <= 5 {
				t.Errorf("ExpShiftSum: exp(%v) (%#08x) = %#08x, generic %#08x", x0[i], math.Float32bits(x0[i]), math.Float32bits(x[i]), math.Float32bits(xg[i]))
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d mismatches in all", bad)
	}
	if !sameF64(got, want) {
		t.Errorf("ExpShiftSum sum = %v, generic %v", got, want)
	}
}

// TestSoftmaxSteps runs the softmax of the ExpShiftSum doc comment and
// compares it with a float64 softmax.
func TestSoftmaxSteps(t *testing.T) {
	r := newRand(t)
	for _, n := range []int{1, 7, 16, 37, 128, 1000} {
		x := randF32(r, n)
		for i := range x {
			x[i] *= 8
		}
		const scale = 0.088388346
		ref := make([]float64, n)
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, float64(v)*scale)
		}
		var sum float64
		for i, v := range x {
			ref[i] = math.Exp(float64(v)*scale - mx)
			sum += ref[i]
		}
		m := MaxF32(x)
		s := ExpShiftSum(x, scale, m*scale)
		ScaleF32(x, float32(1/s))
		for i := range x {
			if want := ref[i] / sum; math.Abs(float64(x[i])-want) > 1e-6*want+1e-30 {
				t.Errorf("softmax(n=%d)[%d] = %v, want %v", n, i, x[i], want)
				break
			}
		}
	}
}

func TestMaxF32(t *testing.T) {
	nan := float32(math.NaN())
	nan2 := math.Float32frombits(0x7fc0_1234)
	negz := float32(math.Copysign(0, -1))
	tests := []struct {
		name string
		x    []float32
		want float32
	}{
		{"empty", nil, -inf32},
		{"one", []float32{-3}, -3},
		{"all -Inf", []float32{-inf32, -inf32, -inf32}, -inf32},
		{"+Inf", []float32{1, inf32, 2}, inf32},
		{"-0", []float32{negz}, 0},
		{"-0 and +0", []float32{negz, 0, negz}, 0},
		{"zeros below", []float32{negz, -1, -2}, 0},
		{"subnormal", []float32{0, math.Float32frombits(1)}, math.Float32frombits(1)},
		{"NaN", []float32{1, nan, 2}, nan},
		{"first NaN", []float32{1, nan2, 2, nan}, nan2},
	}
	for _, impl := range []string{"dispatch", "generic"} {
		t.Run(impl, func(t *testing.T) {
			if impl == "generic" {
				defer ForceGeneric()()
			}
			for _, tt := range tests {
				// Pad with -Inf to put the values in the assembly's whole
				// groups, and after them in the tail.
				for _, pad := range []int{0, 8, 29, 37} {
					x := append(append(make([]float32, 0, pad+len(tt.x)), tt.x...), make([]float32, pad)...)
					for i := len(tt.x); i < len(x); i++ {
						x[i] = -inf32
					}
					if pad == 37 { // the values in the tail
						copy(x, x[len(tt.x):])
						copy(x[pad:], tt.x)
					}
					if got := MaxF32(x); math.Float32bits(got) != math.Float32bits(tt.want) {
						t.Errorf("%s (pad %d): MaxF32(%v) = %v (%#08x), want %v (%#08x)", tt.name, pad, x, got, math.Float32bits(got), tt.want, math.Float32bits(tt.want))
					}
				}
			}
		})
	}
}

// TestMaxF32Random compares MaxF32 bit for bit with its twin and with a
// plain loop, on random values with zeros of both signs, infinities and
// (sometimes) NaNs with distinct payloads at random places.
func TestMaxF32Random(t *testing.T) {
	r := newRand(t)
	for _, n := range sizes(r) {
		for _, off := range offsets {
			for _, kind := range []string{"normal", "zeros", "nan"} {
				x := randF32(r, n)
				for i := range x {
					switch {
					case kind == "zeros":
						x[i] = -float32(math.Abs(float64(x[i])))
						if r.IntN(4) == 0 {
							x[i] = float32(math.Copysign(0, float64(r.IntN(2)-1)))
						}
					case r.IntN(16) == 0:
						x[i] = []float32{inf32, -inf32}[r.IntN(2)]
					}
				}
				if kind == "nan" && n > 0 {
					for k := 0; k < 2; k++ {
						x[r.IntN(n)] = math.Float32frombits(0x7fc0_0000 | uint32(r.IntN(1<<22)))
					}
				}
				x = offsetCopy(x, off)
				got, want := MaxF32(x), maxF32Generic(x)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("MaxF32(n=%d, off=%d, %s) = %v (%#08x), generic %v (%#08x)", n, off, kind, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				plain := float32(math.Inf(-1))
				for _, v := range x {
					if v != v {
						plain = v
						break
					}
					plain = max(plain, v)
				}
				if plain == 0 {
					plain = 0
				}
				if math.Float32bits(want) != math.Float32bits(plain) {
					t.Errorf("maxF32Generic(n=%d, off=%d, %s) = %v (%#08x), plain loop %v (%#08x)", n, off, kind, want, math.Float32bits(want), plain, math.Float32bits(plain))
				}
			}
		}
	}
}

// TestFMA32 checks that fma32 is math.FMA rounded to float32, on operands
// of all magnitudes and on the operands of the exponential's fused steps.
// (That this matches the assembly's float32 fused multiply-adds for every
// argument of the exponential is TestExpExhaustive's part.)
func TestFMA32(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 100000; i++ {
		e := func() float32 {
			return float32(math.Ldexp(r.Float64()+0.5, r.IntN(120)-60)) * float32(1-2*r.IntN(2))
		}
		rr := float32(0.35 * (2*r.Float64() - 1))
		for _, o := range [][3]float32{{e(), e(), e()}, {float32(0.2 * r.Float64()), rr, expP5}, {-float32(r.IntN(256) - 127), expC2, rr}} {
			a, b, c := o[0], o[1], o[2]
			if got, want := fma32(a, b, c), float32(math.FMA(float64(a), float64(b), float64(c))); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("fma32(%v, %v, %v) = %v, want float32(math.FMA) %v", a, b, c, got, want)
			}
		}
	}
}
