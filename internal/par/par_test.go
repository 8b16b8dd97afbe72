package par

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestForChunksCovers checks that ForChunks calls fn on disjoint chunks
// covering [0, n) with bounds multiples of align, for the static and the
// chunked path, nested and from concurrent callers.
func TestForChunksCovers(t *testing.T) {
	check := func(t *testing.T, w Workers, n, align, minChunk int) {
		hits := make([]atomic.Int32, n)
		w.ForChunks(n, align, minChunk, func(lo, hi int) {
			if lo%align != 0 || (hi%align != 0 && hi != n) || lo >= hi {
				t.Errorf("n=%d align=%d: chunk [%d, %d)", n, align, lo, hi)
			}
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("w=%d n=%d align=%d: element %d computed %d times", w, n, align, i, h)
			}
		}
	}
	for _, static := range []bool{false, true} {
		restore := func() {}
		if static {
			restore = ForceStatic()
		}
		for _, w := range []Workers{1, 2, 3, 8} {
			for _, n := range []int{0, 1, 3, 4, 5, 64, 100, 2048, 8191} {
				for _, align := range []int{1, 4} {
					check(t, w, n, align, 0)
					check(t, w, n, align, 16)
				}
			}
		}
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				Workers(4).ForChunks(64, 1, 1, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						check(t, 3, 1000, 4, 0)
					}
				})
			}()
		}
		wg.Wait()
		restore()
	}
}

// BenchmarkForkJoin measures the cost of one parallel call with almost no
// work: For starts a goroutine per call, ForChunks wakes a parked helper.
func BenchmarkForkJoin(b *testing.B) {
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	b.Run("For", func(b *testing.B) {
		for b.Loop() {
			Workers(0).For(2048, 4, 0, fn)
		}
	})
	b.Run("ForChunks", func(b *testing.B) {
		for b.Loop() {
			Workers(0).ForChunks(2048, 4, 0, fn)
		}
	})
}

// TestSerial checks that Serial is true exactly when For runs the work in
// at most one call on the calling goroutine.
func TestSerial(t *testing.T) {
	for _, w := range []Workers{1, 2, 3, 8} {
		for _, n := range []int{0, 1, 7, 64, 1000} {
			for _, minChunk := range []int{0, 1, 16, 500, 2000} {
				var calls atomic.Int32
				w.For(n, 4, minChunk, func(lo, hi int) { calls.Add(1) })
				if got, want := w.Serial(n, 4, minChunk), calls.Load() <= 1; got != want {
					t.Errorf("Workers(%d).Serial(%d, 4, %d) = %v, For made %d calls", w, n, minChunk, got, calls.Load())
				}
			}
		}
	}
}

// TestForTaskPollAndPark runs ForTask back to back (helpers handed their
// next job while they poll), with pauses past spinFor (helpers parked
// again) and with polling off, checking every call's coverage.
func TestForTaskPollAndPark(t *testing.T) {
	const n = 512
	var hits [n]atomic.Int32
	task := funcTask(func(lo, hi int) {
		for i := lo; i < hi; i++ {
			hits[i].Add(1)
		}
	})
	for _, noPoll := range []bool{false, true} {
		restore := func() {}
		if noPoll {
			restore = ForceNoSpin()
		}
		for call := 1; call <= 200; call++ {
			Workers(3).ForTask(n, 4, 1, task)
			for i := range hits {
				if h := hits[i].Load(); h != int32(call) {
					t.Fatalf("noPoll=%v call %d: element %d computed %d times", noPoll, call, i, h)
				}
			}
			if call%20 == 0 {
				time.Sleep(2 * spinFor)
			}
		}
		for i := range hits {
			hits[i].Store(0)
		}
		restore()
	}
}

// TestSpreadChunk checks ForTaskSpread's order: every chunk exactly once,
// each goroutine's share in order within its block, and the first k
// chunks taken one per block, so goroutines keeping pace never work on
// neighbouring chunks.
func TestSpreadChunk(t *testing.T) {
	for _, k := range []int{2, 3, 4, 16} {
		for chunks := 1; chunks <= 70; chunks++ {
			seen := make([]bool, chunks)
			for c := range chunks {
				i := spreadChunk(c, chunks, k)
				if i < 0 || i >= chunks || seen[i] {
					t.Fatalf("k=%d chunks=%d: c=%d gives chunk %d (out of range or twice)", k, chunks, c, i)
				}
				seen[i] = true
				if c >= k && spreadChunk(c-k, chunks, k) != i-1 {
					t.Fatalf("k=%d chunks=%d: c=%d gives %d, c-k gave %d; want consecutive", k, chunks, c, i, spreadChunk(c-k, chunks, k))
				}
			}
			if chunks >= 2*k {
				for c := 1; c < k; c++ {
					if d := spreadChunk(c, chunks, k) - spreadChunk(c-1, chunks, k); d < chunks/k {
						t.Fatalf("k=%d chunks=%d: chunks %d and %d taken together are %d apart; want ≥ %d", k, chunks, c-1, c, d, chunks/k)
					}
				}
			}
		}
	}
}

// TestForTaskSpreadCovers is TestForChunksCovers for ForTaskSpread.
func TestForTaskSpreadCovers(t *testing.T) {
	for _, w := range []Workers{1, 2, 3, 8} {
		for _, n := range []int{0, 1, 5, 64, 100, 2048, 8191} {
			for _, align := range []int{1, 4, 128} {
				hits := make([]atomic.Int32, n)
				w.ForTaskSpread(n, align, 0, funcTask(func(lo, hi int) {
					if lo%align != 0 || (hi%align != 0 && hi != n) || lo >= hi {
						t.Errorf("w=%d n=%d align=%d: chunk [%d, %d)", w, n, align, lo, hi)
					}
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				}))
				for i := range hits {
					if h := hits[i].Load(); h != 1 {
						t.Fatalf("w=%d n=%d align=%d: element %d computed %d times", w, n, align, i, h)
					}
				}
			}
		}
	}
}
