package runtime

import (
	"context"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// GenerationPrompt encodes text as the prompt of a generation: the
// tokenizer's encoding with BOS, or with chat the model's chat template
// over a user message of text, after a system message of system when that
// is not empty. The only error is the chat template's (a model without
// one, a template that fails); the prompt may be empty when the tokenizer
// adds no BOS token.
func (m *Model) GenerationPrompt(text string, chatTemplate bool, system string) ([]int, error) {
	if !chatTemplate {
		return m.Tokenizer.Encode(text, true), nil
	}
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: text})
	prompt, _, err := m.ChatPrompt(msgs)
	return prompt, err
}

// GenerationKV returns the bytes of KV cache a generation of up to
// maxTokens tokens after promptLen prompt tokens needs: the cache of spec
// for what GenerateText writes, or the largest of the caches of compare
// that a greedy comparison makes one at a time (eval.CompareGreedy), when
// that is larger. Candidates whose layout fails are left out (the
// comparison reports them); spec's layout error is returned.
func GenerationKV(g kvcache.Geometry, promptLen, maxTokens int, spec quant.Spec, compare []quant.Spec) (int64, error) {
	layout, err := kvcache.NewLayout(g, spec, 0)
	if err != nil {
		return 0, err
	}
	need := layout.SeqCost(generationWritten(promptLen, maxTokens))
	for _, s := range compare {
		if l, err := kvcache.NewLayout(g, s, 0); err == nil {
			need = max(need, l.SeqCost(promptLen+maxTokens))
		}
	}
	return need, nil
}

// generationWritten is what a generation writes to the cache: the prompt
// and every generated token but the last, which is sampled and never fed
// back.
func generationWritten(promptLen, maxTokens int) int {
	return promptLen + max(0, maxTokens-1)
}

// TextOptions configure GenerateText.
type TextOptions struct {
	// Spec is the cache's format.
	Spec      quant.Spec
	MaxTokens int
	Sampler   *Sampler // nil: greedy
	// OnText, when set, receives the continuation's text as it becomes
	// printable, piece by piece (final false; an error stops the
	// generation and is returned), and then the decoder's remainder with
	// final true once the generation has ended, unless it stopped before
	// the first token. The last call's error is returned when the
	// generation itself succeeded.
	OnText func(piece string, final bool) error
}

// GenerateText generates a continuation of prompt in a fresh cache of
// opts.Spec sized for it, stopping at the model's stop tokens, and
// decodes it to text with the model's tokenizer (as a continuation of the
// prompt's last token, so that a leading space survives). It returns the
// generation's statistics.
func (r *Runner) GenerateText(ctx context.Context, prompt []int, opts TextOptions) (GenerateStats, error) {
	if len(prompt) == 0 {
		return GenerateStats{}, ErrEmptyPrompt
	}
	layout, err := kvcache.NewLayout(r.m.Geometry(), opts.Spec, 0)
	if err != nil {
		return GenerateStats{}, err
	}
	cache, err := r.NewCache(layout, kvcache.Options{Blocks: layout.BlocksFor(generationWritten(len(prompt), opts.MaxTokens))})
	if err != nil {
		return GenerateStats{}, err
	}
	if err := cache.AddSeq(0); err != nil {
		return GenerateStats{}, err
	}
	onText := opts.OnText
	if onText == nil {
		onText = func(string, bool) error { return nil }
	}
	dec := r.m.Tokenizer.NewDecoder()
	dec.Next(prompt[len(prompt)-1]) // the continuation is decoded after the prompt's last token
	dec.Flush()
	produced := false
	_, st, err := r.Generate(ctx, cache, 0, prompt, GenerateOptions{
		MaxTokens: opts.MaxTokens, Sampler: opts.Sampler, StopAtEOS: true,
		OnToken: func(id int) error {
			produced = true
			return onText(dec.Next(id), false)
		},
	})
	if err == nil || produced { // a run stopped in prefill has no text
		if ferr := onText(dec.Flush(), true); err == nil {
			err = ferr
		}
	}
	return st, err
}
