package kvcache_test

import (
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	. "github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// slidingCache is a cache of two layers, layer 1 sliding over window
// positions, in 4-token blocks.
func slidingCache(t *testing.T, window int, opts Options) *Cache {
	t.Helper()
	g := Geometry{Layers: 2, KVHeads: 1, HeadDim: 8, Window: window}
	g.Sliding.Add(1)
	l, err := NewLayout(g, mustSpec(t, "fp16"), 4)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Sliding() || l.FullBlockBytes != l.SlideBlockBytes || l.FullBlockBytes+l.SlideBlockBytes != l.BlockBytes {
		t.Fatalf("layout: sliding %v, full %d + sliding %d of %d bytes a block", l.Sliding(), l.FullBlockBytes, l.SlideBlockBytes, l.BlockBytes)
	}
	opts.Storage = cpu.New(1)
	c, err := New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func step(t *testing.T, c *Cache, id SeqID, n int) {
	t.Helper()
	p, err := c.Reserve([]Append{{Seq: id, N: n}})
	if err != nil {
		t.Fatal(err)
	}
	c.Commit(p)
}

// TestSlidingRelease: the sliding pool gives back, at each Commit, the
// blocks wholly before the next token's window, and only then (a rolled
// back step gives back its own blocks and nothing else); Truncate works
// while the window it needs is held and refuses beyond; a fork shares the
// held blocks; Stats, InUseBytes and the storage agree.
func TestSlidingRelease(t *testing.T) {
	c := slidingCache(t, 6, Options{Blocks: 16, PoisonFreed: true})
	l := c.Layout()
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	step(t, c, 0, 15) // positions 0..14; the next token (15) reads 10..15
	st := c.Stats()
	if st.BlocksUsed != 4 || st.SlideBlocksUsed != 2 || st.SlideBlocks != 16 {
		t.Fatalf("after 15 tokens: %d full blocks, %d of %d sliding, want 4, 2 of 16", st.BlocksUsed, st.SlideBlocksUsed, st.SlideBlocks)
	}
	if want := l.PoolBytes(4, 2, 1); st.InUse != want || c.InUseBytes() != want.Total {
		t.Errorf("in use %+v, want %+v", st.InUse, want)
	}
	if held := c.HeldBytes(); held != st.Allocated.Total-st.Allocated.State {
		t.Errorf("storage holds %d, Stats %d", held, st.Allocated.Total-st.Allocated.State)
	}
	// A step of 5 tokens allocates in both pools; rolled back, the
	// sequence is as it was.
	p, err := c.Reserve([]Append{{Seq: 0, N: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats(); got.BlocksUsed != 5 || got.SlideBlocksUsed != 3 {
		t.Errorf("during a 5-token step: %d full, %d sliding blocks", got.BlocksUsed, got.SlideBlocksUsed)
	}
	c.Rollback(p)
	if got := c.Stats(); got.BlocksUsed != 4 || got.SlideBlocksUsed != 2 || c.Len(0) != 15 {
		t.Errorf("after a rollback: %d full, %d sliding blocks, %d tokens", got.BlocksUsed, got.SlideBlocksUsed, c.Len(0))
	}
	// The window of the token after 12 reads 7..12: block 1 was released.
	if err := c.Truncate(0, 12); !errors.Is(err, ErrTruncate) {
		t.Errorf("Truncate to 12: %v, want ErrTruncate", err)
	}
	if c.Len(0) != 15 {
		t.Fatalf("a refused Truncate changed the length to %d", c.Len(0))
	}
	// To 13 the window reads 8..13, still held.
	if err := c.Truncate(0, 13); err != nil {
		t.Fatalf("Truncate to 13: %v", err)
	}
	if err := c.Fork(1, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats(); got.SlideBlocksUsed != 3 || got.BlocksUsed != 5 {
		// The full block 3 and sliding block 3 (the tail) are copied.
		t.Errorf("after a fork: %d full, %d sliding blocks, want 5 and 3", got.BlocksUsed, got.SlideBlocksUsed)
	}
	for i := 0; i < 20; i++ {
		step(t, c, 1, 1)
		if got, most := c.Stats().SlideBlocksUsed, 2+l.SlideBlocksFor(c.Len(1), 0); got > most {
			t.Fatalf("at %d tokens: %d sliding blocks in use", c.Len(1), got)
		}
	}
	if err := c.Truncate(1, 0); err != nil {
		t.Fatalf("Truncate to 0: %v", err)
	}
	if err := c.Remove(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(1); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats(); got.BlocksUsed != 0 || got.SlideBlocksUsed != 0 || c.FreeSlideBlocks() != 16 {
		t.Errorf("after removing both: %d full, %d sliding blocks in use", got.BlocksUsed, got.SlideBlocksUsed)
	}
}

// TestSlidingPoolFull: a sliding pool smaller than the full one runs out
// with a *FullError, and a budget bounds both pools' bytes.
func TestSlidingPoolFull(t *testing.T) {
	c := slidingCache(t, 6, Options{Blocks: 16, SlideBlocks: 3})
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	var full *FullError
	if _, err := c.Reserve([]Append{{Seq: 0, N: 13}}); !errors.As(err, &full) || full.Total != 3 {
		t.Errorf("13 tokens in a 3-block sliding pool: %v", err)
	}
	step(t, c, 0, 9)
	for i := 0; i < 40; i++ { // decoding keeps 2 or 3 sliding blocks
		step(t, c, 0, 1)
	}
	l := c.Layout()
	budget := l.SeqCostChunked(30, 1) + l.StateBytes
	b := slidingCache(t, 6, Options{Budget: budget})
	if st := b.Stats(); st.Blocks != l.BlocksForBudget(budget, 0) || st.SlideBlocks != l.SlideBlocksForBudget(budget, 0) || st.SlideBlocks > st.Blocks {
		t.Errorf("a budget of %d: pools of %d and %d blocks", budget, st.Blocks, st.SlideBlocks)
	}
	if err := b.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	step(t, b, 0, 1)
	for b.Len(0) < 30 {
		step(t, b, 0, 1)
		if in := b.InUseBytes(); in > budget {
			t.Fatalf("at %d tokens %d bytes in use, budget %d", b.Len(0), in, budget)
		}
	}
	if b.CanGrow(0, 4) {
		t.Errorf("the budget holds %d tokens, CanGrow(4) says 34 fit", 30)
	}
}
