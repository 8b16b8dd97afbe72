package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestSlidingWindowBudget: on a model whose first layer slides over 8
// positions, the engine admits a request by the memory window-only
// storage holds (kvcache.Layout.SeqCostChunked with its prefill chunk),
// which is less than every layer keeping every position; the request
// runs within that budget, gives the tokens runtime.Generate gives with
// full storage, and one token more than the budget holds is refused.
func TestSlidingWindowBudget(t *testing.T) {
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 512,
		SlidingWindow: 8, SlidingLayers: []bool{true, false}}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	spec := specs(t, "fp16")
	l, err := kvcache.NewLayout(m.Geometry(), spec[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	const chunk, promptLen, gen = 16, 40, 160
	budget := l.SeqCostChunked(promptLen+gen, chunk)
	if !l.Sliding() || budget >= l.SeqCost(promptLen+gen) {
		t.Fatalf("window-only storage %v: budget %d, full storage %d", l.Sliding(), budget, l.SeqCost(promptLen+gen))
	}
	var mu sync.Mutex
	var peak int64
	e := start(t, m, engine.Options{Caches: spec, Budget: budget, Chunk: chunk, OnStep: func(si engine.StepInfo) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range si.Pools {
			peak = max(peak, p.UsedBytes)
		}
	}})
	p := prompt(rand.New(rand.NewPCG(3, 4)), promptLen, m.Vocab)
	res := run(t, e, engine.Request{Prompt: p, MaxTokens: gen, IgnoreEOS: true})
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	full, err := kvcache.NewLayoutWith(m.Geometry(), spec[0], kvcache.LayoutOptions{FullSliding: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewCache(full, kvcache.Options{Blocks: full.BlocksFor(promptLen + gen)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSeq(0); err != nil {
		t.Fatal(err)
	}
	want, _, err := r.Generate(context.Background(), c, 0, p, runtime.GenerateOptions{MaxTokens: gen})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want) {
		t.Errorf("engine (window-only storage) %v, Generate (full storage) %v", res.Tokens, want)
	}
	mu.Lock()
	if peak == 0 || peak > budget {
		t.Errorf("the pool held %d B at most, budget %d", peak, budget)
	}
	mu.Unlock()
	if l.SeqCostChunked(promptLen+gen+chunk, chunk) > budget {
		_, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: gen + chunk, IgnoreEOS: true})
		if !errors.Is(err, engine.ErrTooLarge) {
			t.Errorf("a request past the budget: %v, want ErrTooLarge", err)
		}
	}
}
