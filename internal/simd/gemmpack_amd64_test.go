//go:build amd64 && gc && !purego

package simd

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"
)

// TestMatMulPackedSetsBitExact checks that the AVX-512 packed path gives
// the AVX2 packed path's results bit for bit (every output is the same
// chain of fused multiply-adds in both), and so do the Zen 4 choice's
// (the AVX-512 micro-kernels in blocks of 6 token rows) and the Zen 5
// one's where they pack: token counts with whole and
// partial 12- and 6-token blocks, weight rows with an even and an odd
// number of 16-row panels, several column blocks and a column tail. Only
// the packed rows are compared: the row tail (fewer than 16 rows) goes
// through the dot kernels, whose AVX-512 and AVX2 sums differ in order.
// Skipped where the CPU lacks AVX-512.
func TestMatMulPackedSetsBitExact(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	r := newRand(t)
	for _, tc := range matMulCases {
		if tc.name == "F32" {
			continue // not the packed path
		}
		t.Run(tc.name, func(t *testing.T) {
			for _, sh := range []struct{ nt, rows, cols, r0, r1 int }{
				{256, 64, 256, 0, 64}, {263, 80, 600, 0, 80}, {269, 50, 1030, 2, 50}, {300, 144, 96, 16, 144}, {257, 19, 8, 0, 19}, {260, 37, 544, 3, 37}, {518, 48, 264, 0, 48},
			} {
				cols := sh.cols
				if tc.q80 {
					cols = max(q80BlockSize, cols/q80BlockSize*q80BlockSize)
				}
				_, mm := tc.make(r, sh.rows, cols, 0)
				x := randF32(r, sh.nt*cols)
				want := make([]float32, sh.nt*sh.rows)
				restore := ForceAVX2()
				mm(want, sh.rows, x, sh.nt, cols, sh.r0, sh.r1)
				restore()
				packedEnd := sh.r0 + (sh.r1-sh.r0)/MatMulPackRows*MatMulPackRows
				for _, v := range []struct {
					name  string
					force func() func()
				}{{"avx512", ForceAVX512}, {"avx512-zen4", ForceZen4}, {"avx512-zen5", ForceZen5}} {
					restore := v.force()
					pt := packTokens(tc.q80, tc.name == "BF16")
					got := make([]float32, sh.nt*sh.rows)
					mm(got, sh.rows, x, sh.nt, cols, sh.r0, sh.r1)
					restore()
					if sh.nt < pt {
						continue // that choice's 4×3 path
					}
					for i := range want {
						if j := i % sh.rows; j < sh.r0 || j >= packedEnd {
							continue
						}
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("nt=%d rows=%d cols=%d: dst[%d] = %v with %s, %v with avx2", sh.nt, sh.rows, cols, i, got[i], v.name, want[i])
						}
					}
				}
			}
		})
	}
}

// TestPrefillChoice pins each AVX-512 choice's prefill blocking: the
// token rows of a micro-kernel's block (gemm512Tokens) and the token rows
// from which F16, BF16 and Q8_0 weights pack (packTokens). The Zen 4
// choice takes 6 rows and packs 16-bit weights later; the Zen 5 one, whose
// 512-bit units are full width, keeps the avx512 choice's prefill.
func TestPrefillChoice(t *testing.T) {
	if !hasAVX512 {
		t.Skipf("this CPU lacks the avx512 kernels (%s)", cpuFeatures512())
	}
	type choice struct{ tokens, f16, bf16, q80 int }
	avx512 := choice{12, packTokensAVX512, packTokensAVX512, packTokensAVX512}
	for _, c := range []struct {
		name  string
		force func() func()
		want  choice
	}{
		{"avx512", ForceAVX512, avx512},
		{"avx512-zen4", ForceZen4, choice{6, packTokensF16Zen4, packTokensBF16Zen4, packTokensAVX512}},
		{"avx512-zen5", ForceZen5, avx512},
	} {
		restore := c.force()
		got := choice{gemm512Tokens(), packTokens(false, false), packTokens(false, true), packTokens(true, false)}
		name := Kernels()
		restore()
		if name != c.name || got != c.want {
			t.Errorf("%s forced: Kernels() %q, tokens a block, F16, BF16, Q8_0 thresholds %v; want %v", c.name, name, got, c.want)
		}
	}
}

// BenchmarkMatMulPacked compares the packed prefill path with the 4×3 path
// it replaces above MatMulPackTokensF16/Q80(), on one goroutine: every round
// runs the same product once each way, in alternating order, and it
// reports both GFLOP/s (medians) and "speedup", the 4×3 time over the
// packed time; on AVX-512 CPUs also the packed path with the other
// micro-kernels ("over-avx2": the AVX2 ones' time over the AVX-512 ones';
// on the Zen 4 choice, which takes the AVX-512 ones 6 token rows at a
// time, "over-avx512": the time with the avx512 choice's 12 rows over
// that). This is how the thresholds and gemm512Tokens were chosen:
//
//	go test -run '^$' -bench MatMulPacked -benchtime 8x ./internal/simd/
func BenchmarkMatMulPacked(b *testing.B) {
	r := newRand(b)
	for _, dt := range []string{"F16", "BF16", "Q80"} {
		for _, nt := range []int{8, 16, 32, 64, 128, 256, 512} {
			for _, sh := range [][2]int{{2048, 2048}, {8192, 2048}, {2048, 8192}} {
				rows, cols := sh[0], sh[1]
				if nt >= 256 && rows*cols > 2048*2048 {
					continue
				}
				b.Run(fmt.Sprintf("%s/nt=%d/%dx%d", dt, nt, rows, cols), func(b *testing.B) {
					x := randF32(r, nt*cols)
					dst := make([]float32, nt*rows)
					var call func()
					switch dt {
					case "F16", "BF16":
						w := randF16(r, rows*cols)
						call = func() { MatMulF16(dst, rows, x, nt, cols, w, 0, rows) }
						if dt == "BF16" {
							w = randBF16(r, rows*cols)
							call = func() { MatMulBF16(dst, rows, x, nt, cols, w, 0, rows) }
						}
					case "Q80":
						w := randQ80(r, rows*cols/q80BlockSize)
						call = func() { MatMulQ80(dst, rows, x, nt, cols, w, 0, rows) }
					}
					b.Cleanup(func() { packForce = packTokensUnforced })
					// 4×3, packed, and where the CPU has AVX-512, packed with
					// the other micro-kernels: the AVX2 ones (ForceAVX2), or on
					// the Zen 4 choice the avx512 choice's blocks of 12 token
					// rows (ForceAVX512); with KVQ_BENCH_ZEN4 on another
					// AVX-512 CPU the Zen 4 choice's blocks of 6 (ForceZen4).
					ways, other, force := 2, "avx2", ForceAVX2
					if useAVX512 {
						ways = 3
					}
					switch {
					case half512Enabled():
						other, force = "avx512", ForceAVX512
					case useAVX512 && os.Getenv("KVQ_BENCH_ZEN4") != "":
						other, force = "avx512-zen4", ForceZen4
					}
					secs := make([][]float64, ways)
					round := 0
					for b.Loop() {
						for k := 0; k < ways; k++ {
							i := (k + round) % ways
							packForce = math.MaxInt
							if i >= 1 {
								packForce = 0
							}
							restore := func() {}
							if i == 2 {
								restore = force()
							}
							t0 := time.Now()
							call()
							secs[i] = append(secs[i], time.Since(t0).Seconds())
							restore()
						}
						round++
					}
					med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
					fl := 2 * float64(nt) * float64(rows*cols)
					b.ReportMetric(fl/med(secs[0])/1e9, "4x3-GFLOP/s")
					b.ReportMetric(fl/med(secs[1])/1e9, "packed-GFLOP/s")
					b.ReportMetric(med(secs[0])/med(secs[1]), "speedup")
					if ways == 3 {
						b.ReportMetric(fl/med(secs[2])/1e9, "packed-"+other+"-GFLOP/s")
						b.ReportMetric(med(secs[2])/med(secs[1]), "over-"+other)
					}
				})
			}
		}
	}
}
