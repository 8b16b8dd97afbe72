package runtime

import (
	"context"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	MaxTokens int
	Sampler   *Sampler // nil: greedy
	// StopAtEOS ends generation at the model's stop tokens (EOS, end of
	// turn), which are not included in the output.
	StopAtEOS bool
	// OnToken, when set, is called with each generated token as it is produced.
	OnToken func(id int) error
}

// GenerateStats describes one generation.
type GenerateStats struct {
	PromptTokens    int
	GeneratedTokens int
	Prefill         time.Duration
	Decode          time.Duration // all decode steps
	KV              kvcache.Stats
}

// PrefillTokensPerSec is prompt tokens over prefill time.
func (s GenerateStats) PrefillTokensPerSec() float64 {
	return perSec(s.PromptTokens, s.Prefill)
}

// DecodeTokensPerSec is decode steps over decode time. The first generated
// token comes from prefill, so steps = GeneratedTokens-1.
func (s GenerateStats) DecodeTokensPerSec() float64 {
	return perSec(max(0, s.GeneratedTokens-1), s.Decode)
}

func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate feeds prompt to sequence seq of cache (which must exist and may
// already hold a prefix) and samples up to MaxTokens tokens. An empty
// prompt fails with ErrEmptyPrompt: there is nothing to predict from.
func (r *Runner) Generate(ctx context.Context, cache *kvcache.Cache, seq kvcache.SeqID, prompt []int, opts GenerateOptions) ([]int, GenerateStats, error) {
	st := GenerateStats{PromptTokens: len(prompt)}
	if len(prompt) == 0 {
		return nil, st, ErrEmptyPrompt
	}
	sampler := opts.Sampler
	if sampler == nil {
		sampler, _ = NewSampler(0, 1, 0)
	}
	stop := map[int]bool{}
	if opts.StopAtEOS {
		for _, id := range r.m.StopIDs {
			stop[id] = true
		}
	}
	var out []int
	t0 := time.Now()
	logits, err := r.Forward(ctx, []Entry{{Cache: cache, Seq: seq, Tokens: prompt}})
	st.Prefill = time.Since(t0)
	if err != nil {
		return nil, st, err
	}
	t1 := time.Now()
	for len(out) < opts.MaxTokens {
		next := sampler.Sample(logits[0])
		if stop[next] {
			break
		}
		out = append(out, next)
		if opts.OnToken != nil {
			if err := opts.OnToken(next); err != nil {
				return out, st, err
			}
		}
		if len(out) == opts.MaxTokens {
			break
		}
		if logits, err = r.Forward(ctx, []Entry{{Cache: cache, Seq: seq, Tokens: []int{next}}}); err != nil {
			st.GeneratedTokens = len(out)
			return out, st, err
		}
	}
	st.Decode = time.Since(t1)
	st.GeneratedTokens = len(out)
	st.KV = cache.Stats()
	return out, st, nil
}
