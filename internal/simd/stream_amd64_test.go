//go:build amd64 && gc && !purego

package simd

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDotPrefetchVariants checks the decode dot products that differ from
// an existing kernel only in their weight prefetch (_generate/stream.go):
// each must give its base kernel's bits, on every length 0..300 and some
// long ones, at every offset, and stay within rounding of the generic twin.
func TestDotPrefetchVariants(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	type u16Kernel = func(w []uint16, x []float32) float32
	u16 := []struct {
		name       string
		bf16, avx2 bool // bfloat16 weights; a kernel of whole groups of 8
		base       u16Kernel
		variants   []u16Kernel
	}{
		{"F16AVX512", false, false, dotF16AVX512, []u16Kernel{dotF16AVX512NP, dotF16AVX512T0, dotF16AVX512T1, dotF16AVX512T2K}},
		{"BF16AVX512", true, false, dotBF16AVX512, []u16Kernel{dotBF16AVX512NP, dotBF16AVX512T0, dotBF16AVX512T1, dotBF16AVX512T2K}},
		{"F16AVX2", false, true, dotF16AVX2, []u16Kernel{dotF16AVX2T0, dotF16AVX2T1, dotF16AVX2T2K}},
		{"BF16AVX2", true, true, dotBF16AVX2, []u16Kernel{dotBF16AVX2T0, dotBF16AVX2T1, dotBF16AVX2T2K}},
	}
	q80 := []func(w []byte, x []float32) float32{dotQ80AVX512NP, dotQ80AVX512T0, dotQ80AVX512T1, dotQ80AVX512T2K}
	r := newRand(t)
	lengths := []int{1000, 2048, 4095, 8192}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, off := range offsets {
			x := offsetCopy(randF32(r, n), off+2)
			for _, k := range u16 {
				w := randF16(r, n)
				twin := dotF16Generic
				if k.bf16 {
					w, twin = randBF16(r, n), dotBF16Generic
				}
				w = offsetCopy(w, off)
				m := n
				if k.avx2 {
					m = n &^ 7
				}
				want := k.base(w, x)
				var mag float64
				for i := range m {
					v := twin(w[i:i+1], x[i:i+1])
					mag += math.Abs(float64(v))
				}
				if gen := twin(w[:m], x[:m]); !within(float64(want), float64(gen), mag) {
					t.Errorf("dot%s(n=%d, off=%d) = %v, generic %v", k.name, n, off, want, gen)
				}
				for v, f := range k.variants {
					if got := f(w, x); math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("variant %d of dot%s(n=%d, off=%d) = %v, want its bits %v", v, k.name, n, off, got, want)
					}
				}
			}
			nb := n / q80BlockSize
			w, xq := offsetCopy(randQ80(r, nb), off), x[:nb*q80BlockSize]
			want := dotQ80AVX512(w, xq)
			for v, f := range q80 {
				if got := f(w, xq); math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("variant %d of dotQ80AVX512(n=%d, off=%d) = %v, want its bits %v", v, nb*q80BlockSize, off, got, want)
				}
			}
		}
	}
}

// TestZen4Detection checks isZen4 and isHalf512 against the vendor and
// family that Linux reports in /proc/cpuinfo: the Zen 4 decode choice on
// families 19h (Zen 4) and 1Ah (Zen 5) with AVX-512, its prefill choice on
// 19h only.
func TestZen4Detection(t *testing.T) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	defer f.Close()
	var vendor string
	family := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() && (vendor == "" || family < 0) {
		k, v, ok := strings.Cut(sc.Text(), ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
		case k == "vendor_id":
			vendor = v
		case k == "cpu family":
			if family, err = strconv.Atoi(v); err != nil {
				t.Fatalf("/proc/cpuinfo: cpu family %q: %v", v, err)
			}
		}
	}
	if vendor == "" || family < 0 {
		t.Skip("skipping: /proc/cpuinfo names no vendor_id and cpu family")
	}
	wantFamily := uint32(0)
	if vendor == "AuthenticAMD" {
		wantFamily = uint32(family)
	}
	if got := amdFamily(); got != wantFamily {
		t.Errorf("amdFamily() = %#x; /proc/cpuinfo says vendor %s, family %d", got, vendor, family)
	}
	if want := hasAVX512 && (wantFamily == 0x19 || wantFamily == 0x1a); isZen4 != want {
		t.Errorf("isZen4 = %v, want %v (vendor %s, family %d, avx512 %v)", isZen4, want, vendor, family, hasAVX512)
	}
	if want := hasAVX512 && wantFamily == 0x19; isHalf512 != want {
		t.Errorf("isHalf512 = %v, want %v (vendor %s, family %d, avx512 %v)", isHalf512, want, vendor, family, hasAVX512)
	}
	t.Logf("vendor %s, family %#x: isZen4 %v, isHalf512 %v, Kernels() %q", vendor, family, isZen4, isHalf512, Kernels())
}

// TestDotRows checks the kernels that run 4 weight rows side by side
// against one vector: each row's result must have the bits of the
// single-row kernel it follows (dotF16AVX2, dotBF16AVX2), on every length
// 0..300 and some long ones, at every offset and row stride.
func TestDotRows(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	kernels := []struct {
		name   string
		bf16   bool
		single func(w []uint16, x []float32) float32
		rows   func(dst *float32, w *uint16, ldw int, x *float32, n int)
	}{
		{"F16", false, dotF16AVX2, dotF16R4AVX2},
		{"BF16", true, dotBF16AVX2, dotBF16R4AVX2},
	}
	r := newRand(t)
	lengths := []int{1000, 2048, 4095, 8192}
	for n := 8; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, k := range kernels {
		for _, n := range lengths {
			for _, off := range offsets {
				ldw := n + off
				w := randF16(r, 3*ldw+n)
				if k.bf16 {
					w = randBF16(r, 3*ldw+n)
				}
				w = offsetCopy(w, off)
				x := offsetCopy(randF32(r, n), off+2)
				var got [4]float32
				k.rows(&got[0], &w[0], ldw, &x[0], n)
				for row, g := range got {
					want := k.single(w[row*ldw:row*ldw+n], x)
					if math.Float32bits(g) != math.Float32bits(want) {
						t.Errorf("dot%sR4AVX2(n=%d, ldw=%d, off=%d) row %d = %v, dot%sAVX2 %v", k.name, n, ldw, off, row, g, k.name, want)
					}
				}
			}
		}
	}
}

// TestZen4DotBits checks that the Zen 4 choice's F16 and BF16 dot
// products give the avx2 set's bits, on both sides of zen4PrefetchCols.
func TestZen4DotBits(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("skipping: this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for _, n := range []int{0, 7, 100, 2048, zen4PrefetchCols - 1, zen4PrefetchCols, zen4PrefetchCols + 9, 8192} {
		for _, off := range offsets {
			x := offsetCopy(randF32(r, n), off+2)
			for _, bf := range []bool{false, true} {
				w, dot := randF16(r, n), DotF16
				if bf {
					w, dot = randBF16(r, n), DotBF16
				}
				w = offsetCopy(w, off)
				restore := forceZen4(true)
				got := dot(w, x)
				restore()
				restore = ForceAVX2()
				want := dot(w, x)
				restore()
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("bf16 %v, n=%d, off=%d: avx512-zen4 %v, avx2 %v", bf, n, off, got, want)
				}
			}
		}
	}
}
