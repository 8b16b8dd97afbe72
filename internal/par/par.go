// Package par splits loops across goroutines with a fixed partition, so that
// every output element is computed by exactly one goroutine in the same order
// whatever the number of workers: results are bit-identical across runs.
package par

import (
	"runtime"
	"sync"
)

// Workers is a degree of parallelism; 0 means runtime.GOMAXPROCS(0).
type Workers int

// N returns the effective number of workers.
func (w Workers) N() int {
	if w <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return int(w)
}

// For calls fn(lo, hi) on disjoint chunks covering [0, n). Chunk bounds are
// multiples of align (except the last). When the work is smaller than
// minChunk per worker it runs on the calling goroutine.
func (w Workers) For(n, align, minChunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if align < 1 {
		align = 1
	}
	k := w.N()
	if minChunk > 0 && n/minChunk < k {
		k = max(1, n/minChunk)
	}
	if k <= 1 {
		fn(0, n)
		return
	}
	units := (n + align - 1) / align
	if units < k {
		k = units
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for i := 0; i < k; i++ {
		lo := units * i / k * align
		hi := min(n, units*(i+1)/k*align)
		if i == k-1 {
			fn(lo, hi)
			continue
		}
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
