// Package par splits loops across goroutines with a fixed partition, so that
// every output element is computed by exactly one goroutine in the same order
// whatever the number of workers: results are bit-identical across runs.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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

// inOrder makes ForTaskSpread take its chunks in order; see ForceInOrder.
var inOrder atomic.Bool

// ForceInOrder makes ForTaskSpread take its chunks in order, as ForTask
// does, until the returned function is called: kept for benchmarks that
// compare the two in one process.
func ForceInOrder() (restore func()) {
	old := inOrder.Swap(true)
	return func() { inOrder.Store(old) }
}

// chunksPerWorker is how many chunks ForChunks cuts per worker: enough that
// a worker slowed by another process leaves its rows to the others, few
// enough that each chunk is a long stream.
const chunksPerWorker = 16

// ForChunks calls fn(lo, hi) on disjoint chunks covering [0, n), as For
// does, but the chunks are smaller than one worker's share and are taken
// in turn from a shared counter by the calling goroutine and up to
// N()-1 helpers of a persistent pool (each polls for its next job for
// spinFor after a job, then parks on a channel). Chunk bounds are multiples of align (except the last);
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
func (w Workers) ForTask(n, align, minChunk int, t Task) { w.forTask(n, align, minChunk, t, false) }

// ForTaskSpread is ForTask with the chunks taken in an order that keeps
// those running at once far apart: [0, n) is cut into as many blocks of
// consecutive chunks as goroutines, and the shared counter takes the
// first chunk of each block, then the second of each, and so on, so
// goroutines that keep pace work in different blocks, each through its
// own block in order, as For's even shares, while one that falls behind
// still leaves its chunks to the others. It is for tasks whose chunks
// each write a block of columns of many rows of one output (a product
// over many token rows): two goroutines writing neighbouring blocks at
// once ran slower than the same goroutines far apart. On a 2-core Zen 5
// the 1B model's 2048×2048 F16 product over 512 token rows took 301
// GFLOP/s in order, 374 spread, 366 in two even shares (For); 8192×2048
// 347, 372, 366 (three rounds each, interleaved).
func (w Workers) ForTaskSpread(n, align, minChunk int, t Task) {
	w.forTask(n, align, minChunk, t, true)
}

func (w Workers) forTask(n, align, minChunk int, t Task, spread bool) {
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
	j.blocks = 0
	if spread && !inOrder.Load() {
		j.blocks = k
	}
	j.next.Store(0)
	j.left.Store(int64(j.chunks))
	j.users.Store(int32(k))
	for i := 0; i < k-1; i++ {
		wake(j)
	}
	j.run()
	j.wait()
	j.release()
}

// spreadChunk is ForTaskSpread's order: the chunk that the counter's c
// names when chunks chunks are cut into k blocks, the first chunks%k of
// ⌊chunks/k⌋+1 chunks and the rest of ⌊chunks/k⌋; c takes chunk ⌊c/k⌋
// of block c mod k. Every chunk once: the last round, c ≥ k·⌊chunks/k⌋,
// falls in the first chunks%k blocks, the longer ones.
func spreadChunk(c, chunks, k int) int {
	q, rem := chunks/k, chunks%k
	i := c % k
	return i*q + min(i, rem) + c/k
}

// spinFor is how long a helper that finished a job polls for its next one
// before it parks, and how long ForTask's caller polls for its helpers'
// last chunks before it blocks. A decode step's matrix products follow
// each other tens to hundreds of microseconds apart, and waking a parked
// goroutine whose thread sleeps on an idle core (a futex wake, then the
// scheduler) costs a sizable share of a small product: llama.cpp's
// threads spin between its graph nodes for the same reason. The spin is
// bounded, so an idle kvq parks within spinFor and a loaded machine loses
// at most that much of a core per call; and each poll yields its core to
// any other runnable goroutine (runtime.Gosched), so the polling never
// holds up the rest of the process (a server's request handlers, a
// benchmark's clients), which polling without yielding did: the in-process
// engine then saw its requests arrive one at a time.
const spinFor = 50 * time.Microsecond

// noSpin turns the polling off (ForceNoSpin).
var noSpin atomic.Bool

// ForceNoSpin makes helpers park right after a job and ForTask's caller
// block on its helpers at once until the returned function is called: the
// path before spinFor, kept for benchmarks that compare the two in one
// process.
func ForceNoSpin() (restore func()) {
	old := noSpin.Swap(true)
	return func() { noSpin.Store(old) }
}

// wait returns once every chunk of j is finished: it polls for up to
// spinFor, then blocks on j.done.
func (j *job) wait() {
	if !noSpin.Load() {
		deadline := time.Now().Add(spinFor)
		for i := 0; ; i++ {
			select {
			case <-j.done:
				return
			default:
			}
			if i&63 == 63 && time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	<-j.done
}

// job is one ForTask call: chunks of step elements, next is the next
// chunk to take and left the chunks not yet finished; users counts the
// goroutines (caller and helpers) that still hold it, the last of which
// returns it to jobs.
type job struct {
	n, step, chunks int
	blocks          int // ForTaskSpread's blocks (spreadChunk), or 0: in order
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
		if j.blocks > 1 {
			c = spreadChunk(c, j.chunks, j.blocks)
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

// pool holds the idle helpers (polling or parked), most recently used
// last.
var pool struct {
	sync.Mutex
	idle []*helperState
}

// helperState is one helper of the pool: a polling helper takes its next
// job from slot, a parked one from c.
type helperState struct {
	c    chan *job
	slot atomic.Pointer[job]
	// state is polling while the helper polls slot, handed once a waker
	// has claimed it (the job is in slot, or about to be), parked
	// otherwise (running, or blocked on c).
	state atomic.Int32
}

const (
	parked int32 = iota
	polling
	handed
)

// wake hands j to an idle helper, or to a new one when none is idle (so
// concurrent and nested calls never wait for each other's helpers).
func wake(j *job) {
	pool.Lock()
	var h *helperState
	if n := len(pool.idle); n > 0 {
		h = pool.idle[n-1]
		pool.idle = pool.idle[:n-1]
	}
	pool.Unlock()
	switch {
	case h == nil:
		go helper(&helperState{c: make(chan *job, 1)}, j)
	case h.state.CompareAndSwap(polling, handed):
		h.slot.Store(j)
	default:
		h.c <- j
	}
}

// helper runs j, then the jobs it is handed, polling for each for spinFor
// (poll) and parking on h.c when none came.
func helper(h *helperState, j *job) {
	for {
		j.run()
		j.release()
		spin := !noSpin.Load()
		pool.Lock()
		if len(pool.idle) >= maxIdle {
			pool.Unlock()
			return
		}
		if spin {
			h.state.Store(polling) // before a waker can see h
		}
		pool.idle = append(pool.idle, h)
		pool.Unlock()
		j = nil
		if spin {
			j = h.poll()
		}
		if j == nil {
			j = <-h.c
		}
	}
}

// poll waits up to spinFor for a job handed through h.slot and returns it,
// or nil (the helper is then parked: a waker sends on h.c).
func (h *helperState) poll() *job {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if h.state.Load() == handed {
			for k := 0; ; k++ { // the waker stores the job right after claiming h
				if j := h.slot.Swap(nil); j != nil {
					h.state.Store(parked)
					return j
				}
				if k&63 == 63 {
					runtime.Gosched()
				}
			}
		}
		if i&63 == 63 && time.Now().After(deadline) && h.state.CompareAndSwap(polling, parked) {
			return nil
		}
		runtime.Gosched()
	}
}
