package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// TestEngineTarget drives the in-process engine through Run: every request
// completes with the asked number of tokens, each a chunk, and the
// concurrency cap holds in the engine too.
func TestEngineTarget(t *testing.T) {
	m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 256}, tensor.F16, 7)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := quant.Formats().ParseSpec("int8")
	e, err := engine.New(m, engine.Options{Caches: []quant.Spec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	tok := fakeTok{}
	reqs, err := bench.Fixed(tok, 12, 30, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
				if st := e.Stats(); len(st) > 0 {
					peak = max(peak, st[0].Running)
				}
			}
		}
	}()
	if err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := bench.Run(context.Background(), &bench.EngineTarget{Engine: e, Cache: "int8"}, reqs, bench.Load{Concurrency: 4}, bench.RunOptions{})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 12 {
		t.Fatalf("%d records", len(res.Records))
	}
	for _, r := range res.Records {
		if !r.OK() || r.OutputTokens != 9 || r.Chunks != 9 || r.InputTokens != len(reqs[r.Index].Prompt) || r.TTFT() <= 0 {
			t.Errorf("record %+v", r)
		}
	}
	if peak > 4 {
		t.Errorf("engine ran %d at once under a cap of 4", peak)
	}
}

// fakeTok is a tokenizer over the random model's 97 ids.
type fakeTok struct{}

func (fakeTok) Encode(s string) []int {
	out := []int{1}
	for _, b := range []byte(s) {
		out = append(out, 2+int(b)%95)
	}
	return out
}
func (fakeTok) Decode(ids []int) string { return string(make([]byte, len(ids))) }
func (fakeTok) Vocab() int              { return 97 }
func (fakeTok) Chat([]bench.Message) ([]int, string, error) {
	return nil, "", nil
}
