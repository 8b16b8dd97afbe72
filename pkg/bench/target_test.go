package bench_test

import (
	"context"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// fakeClock is a manual clock for RunOptions.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// funcTarget is a Target whose Do is a function.
type funcTarget struct {
	name string
	do   func(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error)
}

var _ bench.Target = (*funcTarget)(nil)

func (t *funcTarget) Name() string { return t.name }

func (t *funcTarget) Do(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
	return t.do(ctx, r, chunk)
}

// requests makes n requests with distinct indexes and 4-token prompts.
func requests(n int) []bench.Request {
	reqs := make([]bench.Request, n)
	for i := range reqs {
		reqs[i] = bench.Request{Index: i, Prompt: []int{0, 5, 6, 7}, Text: "abc", MaxTokens: 3}
	}
	return reqs
}

// ms is n milliseconds.
func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
