package engine_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestSubmitHugeMaxTokens: a MaxTokens so large that prompt + MaxTokens
// overflows is refused as a request past the context, with or without a
// known context length, instead of being admitted.
func TestSubmitHugeMaxTokens(t *testing.T) {
	unknown, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*runtime.Model{testModel(t), unknown} {
		e := start(t, m, engine.Options{Caches: specs(t, "fp16")})
		for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt32} {
			_, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: n})
			if !errors.Is(err, engine.ErrRequest) {
				t.Errorf("context %d: Submit(MaxTokens %d) = %v, want ErrRequest", m.ContextLen, n, err)
			}
		}
	}
}

// TestMaxWaitingBurst: a burst of simultaneous submissions while the
// engine is busy admits exactly MaxWaiting to the queue and refuses the
// rest with ErrBusy (a statistics check let bursts through); when the
// queue drains, requests are taken again.
func TestMaxWaitingBurst(t *testing.T) {
	const limit, burst = 8, 100
	block, blocked := make(chan struct{}), make(chan struct{}, 1)
	stepping := true
	e := start(t, testModel(t), engine.Options{Caches: specs(t, "fp16"), MaxSeqs: 1, MaxWaiting: limit, OnStep: func(engine.StepInfo) {
		if stepping {
			stepping = false
			blocked <- struct{}{}
			<-block // the engine's goroutine stops here: nothing is admitted
		}
	}})
	first, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []*engine.Stream
	busy := 0
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: 2})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, st)
			case errors.Is(err, engine.ErrBusy):
				busy++
			default:
				t.Errorf("Submit = %v, want nil or ErrBusy", err)
			}
		}()
	}
	wg.Wait()
	close(block)
	if len(accepted) != limit || busy != burst-limit {
		t.Errorf("burst of %d with MaxWaiting %d: %d accepted, %d busy; want %d and %d", burst, limit, len(accepted), busy, limit, burst-limit)
	}
	for _, st := range append(accepted, first) {
		if _, err := st.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Drained: the queue takes requests again.
	if _, err := e.Submit(context.Background(), engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: 2}); err != nil {
		t.Errorf("Submit after the queue drained = %v", err)
	}
}
