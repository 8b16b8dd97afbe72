package train

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// pool runs a list of tasks on up to n goroutines.
//
// Determinism rests on how callers cut work into tasks, not on which
// goroutine runs a task: the tasks of an operation depend only on the
// shapes (never on the number of workers), each task writes only its own
// outputs and computes them in a fixed order, and cross-task reductions
// are summed afterwards in task order. The results are then bit-identical
// whatever the number of workers and however the scheduler interleaves
// them, so a free-running task queue is safe.
type pool struct{ n int }

func newPool(workers int) pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return pool{n: workers}
}

// run calls fn(w, i) for every task i < tasks, with w < p.n the index of the
// worker running it (for per-worker scratch). The calling goroutine is
// worker 0.
func (p pool) run(tasks int, fn func(w, i int)) {
	k := min(p.n, tasks)
	if k <= 1 {
		for i := 0; i < tasks; i++ {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	work := func(w int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= tasks {
				return
			}
			fn(w, i)
		}
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for w := 1; w < k; w++ {
		go func() {
			defer wg.Done()
			work(w)
		}()
	}
	work(0)
	wg.Wait()
}

// blocks runs fn(w, lo, hi) over [0, n) cut into fixed blocks of size bs.
func (p pool) blocks(n, bs int, fn func(w, lo, hi int)) {
	p.run((n+bs-1)/bs, func(w, i int) {
		fn(w, i*bs, min(n, (i+1)*bs))
	})
}
