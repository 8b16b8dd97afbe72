package eval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// TestCompareGreedyEmptyPrompt checks that an empty prompt is an options
// error, not a panic or a run per spec.
func TestCompareGreedyEmptyPrompt(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int4")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	calls := 0
	out, err := eval.CompareGreedy(context.Background(), r, nil, 4, specs, func(int, eval.Continuation) { calls++ })
	if !errors.Is(err, eval.ErrOptions) || len(out) != 0 || calls != 0 {
		t.Errorf("CompareGreedy(empty prompt) = %d continuations, %d callbacks, %v; want none and ErrOptions", len(out), calls, err)
	}
}
