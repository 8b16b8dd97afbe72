package engine_test

import (
	"context"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestStepAllocs: a decode step of one sequence allocates, beyond what
// the runner's Stream allocates for the same one-token step, less than
// half an object per token: the engine reuses its plan, batch, picks and
// statistics from step to step, and what is left is the stream's token
// queue growing by doubling (about log2(64) objects over 64 tokens). The
// per-token figure is the difference between a request of 65 tokens and
// one of 1 (its prefill alone), over 64; before the reuse it was about 8.
func TestStepAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector's sync.Pool drops items at random: allocations are counted without -race")
	}
	const steps = 64
	m := testModel(t)
	ctx := context.Background()

	// The runner alone: one-token steps as the engine runs them (the
	// last row's logits, a context with a Done channel).
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := kvcache.NewLayout(m.Geometry(), specs(t, "fp16")[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.NewCache(l, kvcache.Options{Blocks: 4 * l.BlocksFor(m.ContextLen)})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tok := []int{5}
	batch := []runtime.Entry{{Cache: c, Seq: 1, Tokens: tok, Logits: runtime.LastLogits}}
	fn := func(int, int, []float32) error { return nil }
	runner := testing.AllocsPerRun(5, func() {
		_ = c.Remove(1)
		if err := c.AddSeq(1); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < steps; i++ {
			tok[0] = 1 + i%(m.Vocab-1)
			if err := r.Stream(sctx, batch, fn); err != nil {
				t.Fatal(err)
			}
		}
	}) / steps

	e := start(t, m, engine.Options{Caches: specs(t, "fp16")})
	generate := func(n int) func() {
		return func() {
			st, err := e.Submit(ctx, engine.Request{Prompt: []int{1, 2, 3}, MaxTokens: n, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := st.Wait(ctx)
			if err != nil || len(res.Tokens) != n {
				t.Fatalf("%d tokens, %v, %v", len(res.Tokens), err, res.Err)
			}
		}
	}
	one := testing.AllocsPerRun(5, generate(1))
	many := testing.AllocsPerRun(5, generate(1+steps))
	perTok := (many - one) / steps
	t.Logf("allocations per decode token: engine %.2f, the runner's Stream %.2f", perTok, runner)
	if perTok-runner > 0.5 {
		t.Errorf("an engine decode step allocates %.2f objects per token beyond the runner's %.2f (at most 0.5)", perTok-runner, runner)
	}
}
