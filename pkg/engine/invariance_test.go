package engine_test

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// logprobRun is a request's generated tokens with their log-probabilities
// and prompt log-probabilities.
type logprobRun struct {
	ids      []int
	lps      []float32
	prompt   []float32
	finished string
}

func runLogprobs(t *testing.T, e *engine.Engine, req engine.Request) logprobRun {
	t.Helper()
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Error(err)
		return logprobRun{}
	}
	var out logprobRun
	for {
		tok, err := st.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Error(err)
			return out
		}
		out.ids = append(out.ids, tok.ID)
		out.lps = append(out.lps, tok.Logprob)
	}
	res := st.Result()
	out.prompt, out.finished = res.PromptLogprobs, res.FinishReason
	return out
}

// TestLogprobsBatchInvariant: a request's log-probabilities, generated and
// prompt ones, are bit-identical whether it runs alone or in steps shared
// with other requests of other lengths — prefill chunks and decodes in the
// same step, row counts on both sides of the matrix kernels' thresholds
// (the packed prefill path from 32 rows with AVX-512, 64 or 256 with AVX2;
// the 4-token blocks) — for every weight type.
func TestLogprobsBatchInvariant(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q80} {
		t.Run(dt.String(), func(t *testing.T) {
			m, err := modeltest.RandomModel(runtime.Config{Dim: 64, Hidden: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 97, ContextLen: 512}, dt, 7)
			if err != nil {
				t.Fatal(err)
			}
			opts := engine.Options{Caches: specs(t, "fp16"), Chunk: 48, MaxSeqs: 16, BatchInvariant: true}
			rng := rand.New(rand.NewPCG(5, 6))
			var reqs []engine.Request
			for i := range 12 {
				reqs = append(reqs, engine.Request{Prompt: prompt(rng, 3+rng.IntN(150), m.Vocab), MaxTokens: 6 + rng.IntN(20),
					IgnoreEOS: true, Logprobs: true, PromptLogprobs: i%3 == 0})
			}
			alone := start(t, m, opts)
			want := make([]logprobRun, len(reqs))
			for i, r := range reqs {
				want[i] = runLogprobs(t, alone, r)
			}
			e := start(t, m, opts)
			got := make([]logprobRun, len(reqs))
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = runLogprobs(t, e, r)
				}()
			}
			wg.Wait()
			for i := range reqs {
				if !sameBits(got[i].lps, want[i].lps) || !sameBits(got[i].prompt, want[i].prompt) || len(got[i].ids) != len(want[i].ids) {
					t.Errorf("request %d (%d prompt tokens): together %v %v, alone %v %v", i, len(reqs[i].Prompt), got[i].ids, got[i].lps, want[i].ids, want[i].lps)
				}
			}
		})
	}
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
