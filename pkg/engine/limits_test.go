package engine_test

import (
	"context"
	"errors"
	"math"
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
