// Package par splits loops across goroutines with a fixed partition, so that
// every output element is computed by exactly one goroutine in the same order
// whatever the number of workers: results are bit-identical across runs.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// split is how For and ForChunks cut [0, n): into k parts (0 when there is
// nothing to do, 1 to run on the calling goroutine) of units units of align
// elements each (align at least 1).
func (w Workers) split(n, align, minChunk int) (k, units, al int) {
	if n <= 0 {
		return 0, 0, 0
	}
	align = max(align, 1)
	k = w.N()
	if minChunk > 0 && n/minChunk < k {
		k = max(1, n/minChunk)
	}
	units = (n + align - 1) / align
	return min(k, units), units, align
}

// Serial reports whether For, ForChunks and ForTask with these arguments
// run the work on the calling goroutine (as fn(0, n), or not at all for
// n ≤ 0). A caller whose work is usually that small runs it inline when
// Serial says so, and makes its closure only otherwise: a closure passed
// to For escapes, so making it costs an allocation even when For then
// calls it on the caller.
func (w Workers) Serial(n, align, minChunk int) bool {
	k, _, _ := w.split(n, align, minChunk)
	return k <= 1
}

// For calls fn(lo, hi) on disjoint chunks covering [0, n). Chunk bounds are
// multiples of align (except the last). When the work is smaller than
// minChunk per worker it runs on the calling goroutine.
func (w Workers) For(n, align, minChunk int, fn func(lo, hi int)) {
	k, units, align := w.split(n, align, minChunk)
	if k == 0 {
		return
	}
	if k == 1 {
		fn(0, n)
		return
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

// staticSplit makes ForChunks behave as For (one even share per worker,
// a goroutine started per call); see ForceStatic.
var staticSplit atomic.Bool

// ForceStatic makes ForChunks split as For does until the returned
// function is called: the path before ForChunks, kept for benchmarks that
// compare the two in one process.
func ForceStatic() (restore func()) {
	old := staticSplit.Swap(true)
	return func() { staticSplit.Store(old) }
}

// chunksPerWorker is how many chunks ForChunks cuts per worker: enough that
// a worker slowed by another process leaves its rows to the others, few
// enough that each chunk is a long stream.
const chunksPerWorker = 16

// ForChunks calls fn(lo, hi) on disjoint chunks covering [0, n), as For
// does, but the chunks are smaller than one worker's share and are taken
// in turn from a shared counter by the calling goroutine and up to
// N()-1 helpers of a persistent pool (parked on a channel between calls,
// never spinning). Chunk bounds are multiples of align (except the last);
// which goroutine computes a chunk varies from call to call, so fn must
// compute each element the same way whatever chunk holds it. When the work
// is smaller than minChunk per worker it runs on the calling goroutine.
func (w Workers) ForChunks(n, align, minChunk int, fn func(lo, hi int)) {
	w.ForTask(n, align, minChunk, funcTask(fn))
}

// Task is the work of ForTask: Run computes elements [lo, hi).
type Task interface{ Run(lo, hi int) }

// funcTask makes a function a Task.
type funcTask func(lo, hi int)

func (f funcTask) Run(lo, hi int) { f(lo, hi) }

// ForTask is ForChunks with the work as a Task: a caller that keeps its
// Task (a pointer to a struct it reuses) makes calls that allocate
// nothing, where a closure passed to ForChunks is allocated every call.
func (w Workers) ForTask(n, align, minChunk int, t Task) {
	if staticSplit.Load() {
		w.For(n, align, minChunk, t.Run)
		return
	}
	k, units, align := w.split(n, align, minChunk)
	if k == 0 {
		return
	}
	if k == 1 {
		t.Run(0, n)
		return
	}
	per := max(1, units/(k*chunksPerWorker))
	j := jobs.Get().(*job)
	j.n, j.step, j.t = n, per*align, t
	j.chunks = (units + per - 1) / per
	j.next.Store(0)
	j.left.Store(int64(j.chunks))
	j.users.Store(int32(k))
	for i := 0; i < k-1; i++ {
		wake(j)
	}
	j.run()
	<-j.done
	j.release()
}

// job is one ForTask call: chunks of step elements, next is the next
// chunk to take and left the chunks not yet finished; users counts the
// goroutines (caller and helpers) that still hold it, the last of which
// returns it to jobs.
type job struct {
	n, step, chunks int
	t               Task
	next, left      atomic.Int64
	users           atomic.Int32
	done            chan struct{} // gets a value when left reaches 0
}

// jobs recycles jobs (and their done channels) between calls.
var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// release drops one user of j, recycling it after the last.
func (j *job) release() {
	if j.users.Add(-1) == 0 {
		j.t = nil
		jobs.Put(j)
	}
}

// run computes chunks of j until none is left to take.
func (j *job) run() {
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		lo := c * j.step
		j.t.Run(lo, min(j.n, lo+j.step))
		if j.left.Add(-1) == 0 {
			j.done <- struct{}{}
		}
	}
}

// maxIdle bounds the parked helpers kept between calls; helpers beyond it
// (started for nested or concurrent calls) exit after their job.
const maxIdle = 64

// pool holds the parked helpers, most recently used last.
var pool struct {
	sync.Mutex
	idle []chan *job
}

// wake hands j to a parked helper, or to a new one when none is parked
// (so concurrent and nested calls never wait for each other's helpers).
func wake(j *job) {
	pool.Lock()
	var c chan *job
	if n := len(pool.idle); n > 0 {
		c = pool.idle[n-1]
		pool.idle = pool.idle[:n-1]
	}
	pool.Unlock()
	if c == nil {
		c = make(chan *job, 1)
		go helper(c)
	}
	c <- j
}

// helper runs the jobs sent on c, parking on c between them.
func helper(c chan *job) {
	for j := range c {
		j.run()
		j.release()
		pool.Lock()
		if len(pool.idle) >= maxIdle {
			pool.Unlock()
			return
		}
		pool.idle = append(pool.idle, c)
		pool.Unlock()
	}
}
