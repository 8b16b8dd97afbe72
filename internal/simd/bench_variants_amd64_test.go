//go:build amd64 && gc && !purego

package simd

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkMatVecVariants compares decode dot-product kernels that differ
// in weight prefetch (and the avx2 set's kernel, whose accumulation order
// differs) on the decode matrix-vector product streaming weights from
// DRAM, as BenchmarkMatVecSets does: a 1 GiB ring of 8192×2048 matrices,
// one matrix a call, rows split over 1 or 2 goroutines, every variant once
// a round in an order that rotates. In round r variant i reads matrix
// r+i*copies/n of the ring, so that a round reads no matrix twice and, over
// a whole number of laps of the ring (32 rounds for 16-bit weights, 60 for
// Q8_0: make -benchtime a multiple), every variant reads the same
// matrices: on the KVM guest this was written on, some parts of memory
// stream at half the speed of others, so variants that read different
// matrices differed by 2× for nothing. Where the
// weights live is chosen with KVQ_BENCH_SRC: heap (the default, Go heap),
// anon (an anonymous mapping), huge (one with MADV_HUGEPAGE) or a path to
// a file of at least 1 GiB, mapped read-only and shared as internal/mmap
// maps a GGUF file (its first 1 GiB, bytes taken as they are).
// KVQ_BENCH_VARIANTS (comma-separated names) keeps some variants only;
// KVQ_BENCH_COLS sets the columns (default 2048; rows make 16 Mi values);
// KVQ_BENCH_CHUNK=N makes the workers take chunks of N rows from a shared
// counter, as llama.cpp's threads take jobs, instead of one share each.
// The variant "blocked" is the Zen 4 choice's matVecBlocked (blocks of
// blockCols columns: use KVQ_BENCH_COLS of 4096 or more).
// Each variant reports its median GB/s, and "sum-GB/s" is a plain
// streaming sum of the same bytes. Run it with -benchtime 60x or so.
func BenchmarkMatVecVariants(b *testing.B) {
	if !hasAVX512 {
		b.Skip("avx512 kernels not built or not supported")
	}
	for _, dt := range []string{"F16", "BF16", "Q80"} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", dt, workers), func(b *testing.B) {
				benchMatVecVariants(b, dt, workers)
			})
		}
	}
}

// dotVariant is one kernel of BenchmarkMatVecVariants: u for 16-bit
// weights, q for Q8_0.
type dotVariant struct {
	name string
	u    func(w []uint16, x []float32) float32
	q    func(w []byte, x []float32) float32
	// r4 runs 4 rows side by side (u16 weights).
	r4 func(dst *float32, w *uint16, ldw int, x *float32, n int)
	// rows decodes the rows [r0, r1) in one call (u16 weights).
	rows func(dst, x []float32, cols int, w []uint16, r0, r1 int)
}

// blockedVariant is the variant "blocked": matVecBlocked over 16-bit
// weights, bfloat16 if bf16.
func blockedVariant(bf16 bool) dotVariant {
	return dotVariant{name: "blocked", rows: func(dst, x []float32, cols int, w []uint16, r0, r1 int) {
		matVecBlocked(bf16, dst, x, cols, w, r0, r1)
	}}
}

// streamsVariant is the variant "seq<s>", streamDots with s runs, or for
// s = 1 "seq", one run a call (seqDots).
func streamsVariant(bf16 bool, s int) dotVariant {
	if s == 1 {
		return dotVariant{name: "seq", rows: func(dst, x []float32, cols int, w []uint16, r0, r1 int) {
			seqDots(bf16, &dst[r0], &w[r0*cols], &x[0], cols, r1-r0)
		}}
	}
	return dotVariant{name: fmt.Sprintf("seq%d", s), rows: func(dst, x []float32, cols int, w []uint16, r0, r1 int) {
		streamDots(bf16, s, dst[r0:], w[r0*cols:], x, cols, r1-r0)
	}}
}

func matVecVariants(dt string) []dotVariant {
	switch dt {
	case "F16":
		return []dotVariant{
			{name: "avx512", u: dotF16AVX512},
			{name: "avx2", u: dotF16AVX2},
			{name: "NP", u: dotF16AVX512NP},
			{name: "T0", u: dotF16AVX512T0},
			{name: "T1", u: dotF16AVX512T1},
			{name: "T2K", u: dotF16AVX512T2K},
			{name: "avx2T0", u: dotF16AVX2T0},
			{name: "avx2T1", u: dotF16AVX2T1},
			{name: "avx2T2K", u: dotF16AVX2T2K},
			{name: "avx2R4", r4: dotF16R4AVX2},
			blockedVariant(false),
			streamsVariant(false, 1), streamsVariant(false, 2), streamsVariant(false, 3), streamsVariant(false, 4),
		}
	case "BF16":
		return []dotVariant{
			{name: "avx512", u: dotBF16AVX512},
			{name: "avx2", u: dotBF16AVX2},
			{name: "NP", u: dotBF16AVX512NP},
			{name: "T0", u: dotBF16AVX512T0},
			{name: "T1", u: dotBF16AVX512T1},
			{name: "T2K", u: dotBF16AVX512T2K},
			{name: "avx2T0", u: dotBF16AVX2T0},
			{name: "avx2T1", u: dotBF16AVX2T1},
			{name: "avx2T2K", u: dotBF16AVX2T2K},
			{name: "avx2R4", r4: dotBF16R4AVX2},
			blockedVariant(true),
			streamsVariant(true, 1), streamsVariant(true, 2), streamsVariant(true, 3), streamsVariant(true, 4),
		}
	}
	return []dotVariant{
		{name: "avx512", q: dotQ80AVX512},
		{name: "avx2", q: dotQ80AVX2},
		{name: "NP", q: dotQ80AVX512NP},
		{name: "T0", q: dotQ80AVX512T0},
		{name: "T1", q: dotQ80AVX512T1},
		{name: "T2K", q: dotQ80AVX512T2K},
	}
}

// variantRing returns 1 GiB of memory for the weights, from where
// KVQ_BENCH_SRC says.
func variantRing(b *testing.B) []byte {
	const size = 1 << 30
	src := os.Getenv("KVQ_BENCH_SRC")
	anon := func(huge bool) []byte {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		if huge {
			if err := syscall.Madvise(m, 14); err != nil { // MADV_HUGEPAGE
				b.Fatal(err)
			}
		}
		b.Cleanup(func() { syscall.Munmap(m) })
		return m
	}
	var ring []byte
	switch src {
	case "", "heap":
		ring = make([]byte, size)
	case "anon":
		ring = anon(false)
	case "huge":
		ring = anon(true)
	default:
		f, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			b.Fatalf("%s: %v", src, err)
		}
		b.Cleanup(func() { syscall.Munmap(m) })
		return m
	}
	r := newRand(b)
	for i := 0; i < size; i += 8 {
		v := r.Uint64()
		// Finite binary16 and bfloat16 values: clear each half's top
		// exponent bit; the Q8_0 scales become small too.
		v &^= 0x4000_4000_4000_4000
		*(*uint64)(unsafe.Pointer(&ring[i])) = v
	}
	return ring
}

func benchMatVecVariants(b *testing.B, dt string, workers int) {
	cols := 2048
	if c := os.Getenv("KVQ_BENCH_COLS"); c != "" {
		var err error
		if cols, err = strconv.Atoi(c); err != nil || cols <= 0 || cols%128 != 0 {
			b.Fatalf("KVQ_BENCH_COLS=%q: want a positive multiple of 128", c)
		}
	}
	rows := 8192 * 2048 / cols
	vs := matVecVariants(dt)
	if keep := os.Getenv("KVQ_BENCH_VARIANTS"); keep != "" {
		names := strings.Split(keep, ",")
		vs = slices.DeleteFunc(vs, func(v dotVariant) bool { return !slices.Contains(names, v.name) })
	}
	ring := variantRing(b)
	rowBytes := 2 * cols
	if dt == "Q80" {
		rowBytes = cols / q80BlockSize * q80BlockBytes
	}
	mBytes := rows * rowBytes
	copies := len(ring) / mBytes
	x := randF32(newRand(b), cols)
	dst := make([]float32, rows)
	chunk := 0
	if c := os.Getenv("KVQ_BENCH_CHUNK"); c != "" {
		var err error
		if chunk, err = strconv.Atoi(c); err != nil || chunk <= 0 || chunk%4 != 0 || rows%chunk != 0 {
			b.Fatalf("KVQ_BENCH_CHUNK=%q: want a positive multiple of 4 dividing %d", c, rows)
		}
	}
	split := func(f func(lo, hi int)) {
		if workers == 1 {
			f(0, rows)
			return
		}
		if chunk > 0 {
			var next atomic.Int64
			take := func() {
				for {
					lo := int(next.Add(int64(chunk))) - chunk
					if lo >= rows {
						return
					}
					f(lo, lo+chunk)
				}
			}
			var wg sync.WaitGroup
			for range workers - 1 {
				wg.Go(take)
			}
			take()
			wg.Wait()
			return
		}
		var wg sync.WaitGroup
		per := rows / workers / 4 * 4
		for i := 0; i < workers-1; i++ {
			wg.Go(func() { f(i*per, (i+1)*per) })
		}
		f((workers-1)*per, rows)
		wg.Wait()
	}
	run := func(v dotVariant, m []byte) {
		split(func(lo, hi int) {
			if v.rows != nil {
				v.rows(dst, x, cols, unsafe.Slice((*uint16)(unsafe.Pointer(&m[0])), len(m)/2), lo, hi)
				return
			}
			if v.r4 != nil {
				u := unsafe.Slice((*uint16)(unsafe.Pointer(&m[0])), len(m)/2)
				for r := lo; r < hi; r += 4 {
					v.r4(&dst[r], &u[r*cols], cols, &x[0], cols)
				}
				return
			}
			for r := lo; r < hi; r++ {
				w := m[r*rowBytes : (r+1)*rowBytes]
				if v.q != nil {
					dst[r] = v.q(w, x)
				} else {
					dst[r] = v.u(unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), cols), x)
				}
			}
		})
	}
	sum := func(m []byte) {
		f := unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), len(m)/4)
		split(func(lo, hi int) { benchSink += sumF32(f[lo*len(f)/rows : hi*len(f)/rows]) })
	}
	n := len(vs) + 1
	secs := make([][]float64, n)
	round := 0
	for b.Loop() {
		for j := range n {
			i := (j + round) % n
			m := ring[(round+i*copies/n)%copies*mBytes:][:mBytes]
			t0 := time.Now()
			if i == len(vs) {
				sum(m)
			} else {
				run(vs[i], m)
			}
			secs[i] = append(secs[i], time.Since(t0).Seconds())
		}
		round++
	}
	b.SetBytes(int64(n * mBytes))
	for i := range n {
		s := slices.Clone(secs[i])
		slices.Sort(s)
		name := "sum"
		if i < len(vs) {
			name = vs[i].name
		}
		b.ReportMetric(float64(mBytes)/s[len(s)/2]/1e9, name+"-GB/s")
	}
}
