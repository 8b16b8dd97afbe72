package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ExpShiftTaylor is checked like ExpShiftSum: the assembly gives the bits
// of its twin at every small length, misaligned, with guard regions, and on
// 1M arguments that include the range ends, specials and random bit
// patterns (so that the stop-and-resume path around out-of-range groups
// runs); ExpTaylor itself is within its documented error of math.Exp and
// gives the documented values outside its range. With -exhaustive,
// TestExpTaylorExhaustive compares the assembly with the twin on all 2^32
// arguments.

// taylorArgs returns n arguments: mostly uniform in [-100, 100], with runs
// of values next to etLo and etHi, zeros, infinities, NaNs and random bit
// patterns mixed in.
func taylorArgs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch k := r.IntN(40); {
		case k == 0:
			x[i] = math.Float32frombits(r.Uint32())
		case k == 1:
			x[i] = []float32{0, float32(math.Copysign(0, -1)), inf32, -inf32, float32(math.NaN())}[r.IntN(5)]
		case k == 2 || k == 3:
			edge := []float32{etLo, etHi}[k-2]
			x[i] = math.Float32frombits(math.Float32bits(edge) + uint32(r.IntN(9)) - 4)
		default:
			x[i] = float32(r.Float64()*200 - 100)
		}
	}
	return x
}

// TestExpShiftTaylor compares the dispatch with the twin, in place and into
// another slice, at lengths 0..40 and random ones, misaligned, with guard
// regions.
func TestExpShiftTaylor(t *testing.T) {
	r := newRand(t)
	params := []struct{ scale, shift float32 }{
		{1, 0},
		{-1, 0}, // sigmoid's e^-x
		{0.125, 3.5},
		{0.125, -2},
	}
	for _, n := range sizes(r) {
		for _, off := range offsets {
			for _, p := range params {
				x0 := taylorArgs(r, n)
				x, check := guardedF32(off, n, 16)
				copy(x, x0)
				xg := append([]float32(nil), x0...)
				ExpShiftTaylor(x, x, p.scale, p.shift) // in place
				expShiftTaylorGeneric(xg, xg, p.scale, p.shift)
				check(t)
				// Into a separate dst: the same values, x untouched.
				d, checkD := guardedF32(off, n, 16)
				src := append([]float32(nil), x0...)
				ExpShiftTaylor(d, src, p.scale, p.shift)
				checkD(t)
				for i := range d {
					if !sameF32(d[i], xg[i]) || !sameF32(src[i], x0[i]) {
						t.Errorf("ExpShiftTaylor(dst, x; n=%d, off=%d, scale=%v, shift=%v): dst[%d] = %v, x[%d] = %v; want %v and %v",
							n, off, p.scale, p.shift, i, d[i], i, src[i], xg[i], x0[i])
						break
					}
				}
				for i := range x {
					if !sameF32(x[i], xg[i]) {
						t.Errorf("ExpShiftTaylor(n=%d, off=%d, scale=%v, shift=%v): x[%d] = %v (%#08x) for %v, generic %v (%#08x)",
							n, off, p.scale, p.shift, i, x[i], math.Float32bits(x[i]), x0[i], xg[i], math.Float32bits(xg[i]))
						break
					}
				}
			}
		}
	}
}

// TestExpShiftTaylorRandomBits compares the assembly with the twin on 1M
// arguments from taylorArgs, value by value.
func TestExpShiftTaylorRandomBits(t *testing.T) {
	if !hasAVX2 {
		t.Skip("assembly not built or not supported")
	}
	r := newRand(t)
	const n = 1 << 20
	x := taylorArgs(r, n)
	xg := append([]float32(nil), x...)
	x0 := append([]float32(nil), x...)
	ExpShiftTaylor(x, x, 1, 0)
	expShiftTaylorGeneric(xg, xg, 1, 0)
	bad := 0
	for i := range x {
		if !sameF32(x[i], xg[i]) {
			if bad++; bad <= 5 {
				t.Errorf("ExpShiftTaylor: exp(%v) (%#08x) = %#08x, generic %#08x", x0[i], math.Float32bits(x0[i]), math.Float32bits(x[i]), math.Float32bits(xg[i]))
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d mismatches in all", bad)
	}
}

// TestExpTaylorAccuracy sweeps [etLo, etHi] in 2M steps: the relative error
// against math.Exp stays below 3e-7 (measured 2.53e-7: the Taylor
// truncation, the reduction and a few roundings).
func TestExpTaylorAccuracy(t *testing.T) {
	const steps = 1 << 21
	worst, at := 0.0, float32(0)
	for i := 0; i <= steps; i++ {
		v := etLo + float32(float64(etHi-etLo)*float64(i)/steps)
		want := math.Exp(float64(v))
		if rel := math.Abs(float64(ExpTaylor(v))-want) / want; rel > worst {
			worst, at = rel, v
		}
	}
	if worst > 3e-7 {
		t.Errorf("ExpTaylor: relative error %.3g at %v, want <= 3e-7", worst, at)
	}
}

// TestExpTaylorSpecial checks the documented results at and outside the
// range ends, through ExpTaylor and through the assembly's dispatch.
func TestExpTaylorSpecial(t *testing.T) {
	cases := []struct{ in, want float32 }{
		{0, 1},
		{float32(math.Copysign(0, -1)), 1},
		{-87.31, 0},
		{-inf32, 0},
		{88.5, float32(math.Exp(88.5))},
		{89, inf32},
		{inf32, inf32},
	}
	for _, c := range cases {
		for _, asm := range []bool{false, true} {
			got := ExpTaylor(c.in)
			if asm { // through ExpShiftTaylor, in a group of 8
				x := []float32{c.in, 0, 0, 0, 0, 0, 0, 0}
				ExpShiftTaylor(x, x, 1, 0)
				got = x[0]
			}
			if !sameF32(got, c.want) {
				t.Errorf("ExpTaylor(%v) (asm path %v) = %v, want %v", c.in, asm, got, c.want)
			}
		}
	}
	if v := ExpTaylor(float32(math.NaN())); v == v {
		t.Errorf("ExpTaylor(NaN) = %v, want NaN", v)
	}
}

// TestExpTaylorExhaustive (-exhaustive) compares the assembly with the twin
// on all 2^32 float32 arguments.
func TestExpTaylorExhaustive(t *testing.T) {
	if !*exhaustive {
		t.Skip("takes minutes; run with -exhaustive")
	}
	if !hasAVX2 {
		t.Skip("assembly not built or not supported")
	}
	if n, one := mismatchesAll32(
		func(x []float32) { ExpShiftTaylor(x, x, 1, 0) },
		func(x []float32) { expShiftTaylorGeneric(x, x, 1, 0) }); n != 0 {
		t.Errorf("ExpShiftTaylor differs from expShiftTaylorGeneric on %d of the 2^32 float32 arguments (one: %#08x)", n, math.Float32bits(one))
	}
}
