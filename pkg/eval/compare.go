package eval

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// Continuation is one cache format's generation of a prompt.
type Continuation struct {
	Spec   quant.Spec
	Tokens []int
	Stats  runtime.GenerateStats
	// Diverge is the index of the first token that differs from the first
	// continuation (the baseline), or -1 if none does (within the shorter
	// length, and the lengths agree).
	Diverge int
}

// CompareGreedy generates up to maxTokens tokens greedily from prompt with
// runner r and a fresh cache of each spec in turn (the first is the
// baseline), sharing the model's weights, and reports where each
// continuation first departs from the baseline. The specs run one after
// another, so that each continuation's Stats time that cache alone.
// onDone, when set, is called after each spec finishes.
func CompareGreedy(ctx context.Context, r *runtime.Runner, prompt []int, maxTokens int, specs []quant.Spec, onDone func(i int, c Continuation)) ([]Continuation, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt (no tokens)", ErrOptions)
	}
	out := make([]Continuation, 0, len(specs))
	for i, spec := range specs {
		l, err := kvcache.NewLayout(r.Model().Geometry(), spec, 0)
		if err != nil {
			return out, fmt.Errorf("cache %s: %w", spec.String(), err)
		}
		cache, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(prompt) + maxTokens)})
		if err != nil {
			return out, fmt.Errorf("cache %s: %w", spec.String(), err)
		}
		if err := cache.AddSeq(0); err != nil {
			return out, err
		}
		toks, st, err := r.Generate(ctx, cache, 0, prompt, runtime.GenerateOptions{MaxTokens: maxTokens, StopAtEOS: true})
		if err != nil {
			return out, fmt.Errorf("cache %s: %w", spec.String(), err)
		}
		c := Continuation{Spec: spec, Tokens: toks, Stats: st, Diverge: -1}
		if i > 0 {
			c.Diverge = divergence(out[0].Tokens, toks)
		}
		out = append(out, c)
		if onDone != nil {
			onDone(i, c)
		}
	}
	return out, nil
}

// Text decodes the continuation with m's tokenizer as a continuation of
// prompt's last token (so that a leading space survives): text is the
// whole continuation and agreed its tokens before Diverge (all of them
// when Diverge is -1). prompt must not be empty.
func (c Continuation) Text(m *runtime.Model, prompt []int) (text, agreed string) {
	last := prompt[len(prompt)-1:]
	lead := m.Tokenizer.Decode(last)
	decode := func(toks []int) string {
		return strings.TrimPrefix(m.Tokenizer.Decode(append(slices.Clip(last), toks...)), lead)
	}
	text = decode(c.Tokens)
	if c.Diverge < 0 {
		return text, text
	}
	return text, decode(c.Tokens[:c.Diverge])
}

// divergence is the first index where a and b differ, or -1 if equal.
func divergence(a, b []int) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}
