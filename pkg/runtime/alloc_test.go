package runtime_test

import (
	"context"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// TestDecodeStepAllocs counts the heap allocations of one decode step of
// the built-in model, at a short and at a long context (where attention
// fans out over the workers) and with a float and an integer cache. What a
// step allocates is its plan (kvcache.Cache.Reserve), the batch's groups
// and the logits it returns (7 to 10 objects); the matrix products, the KV writes, SwiGLU
// and the attention fan-out allocate nothing (a closure passed to
// par.Workers.For is an allocation per call: 3 per layer before).
func TestDecodeStepAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the built-in model")
	}
	if testutil.Race {
		t.Skip("the race detector's sync.Pool drops items at random; make test counts allocations in its runs without -race")
	}
	_, _, gguf := testutil.Stories260K(t)
	m, err := runtime.Load(context.Background(), gguf, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	for _, spec := range []string{"fp16", "int8"} {
		for _, depth := range []int{4, 100} {
			r := newRunner(t, m)
			c := newCache(t, r, spec, 2*(depth/16+8))
			if err := c.AddSeq(0); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: tokens(depth, m.Vocab, 1), Logits: runtime.NoLogits}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Fork(1, 0); err != nil {
				t.Fatal(err)
			}
			step := 0
			allocs := testing.AllocsPerRun(20, func() {
				step++
				if _, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 1, Tokens: []int{step % m.Vocab}}}); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s at depth %d: %v allocations a step", spec, depth, allocs)
			if max := 12.0; allocs > max {
				t.Errorf("%s at depth %d: a decode step allocates %v times, want at most %v", spec, depth, allocs, max)
			}
		}
	}
}
