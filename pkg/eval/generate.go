package eval

import (
	"context"
	"fmt"
	"strings"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// GenItem is one prompt decoded greedily under every cache.
type GenItem struct {
	Prompt []int
	// MaxTokens bounds the generated tokens.
	MaxTokens int
	// Line stops at the first newline (the probe suites' answers are one
	// line); the output then ends with it.
	Line bool
	// Until stops at the first of these strings; the output then ends
	// before it.
	Until []string
	// Exact makes the prompt attend to its own exact keys and values (Hugging
	// Face QuantizedCache's prefill); decoding reads the cache as stored.
	Exact bool
}

// GenOutput is one cache's greedy output.
type GenOutput struct {
	Text   string `json:"output"`
	Tokens int    `json:"tokens"`
	// Diverge is the index of the first token that differs from the
	// baseline's output, -1 when they agree.
	Diverge int `json:"diverge"`
	// LogLik are a multiple-choice item's log-likelihoods, one per choice
	// (mc.go); nil for generations.
	LogLik []float64 `json:"loglik,omitempty"`
}

// Generate decodes it greedily with a fresh cache of each layout, side by
// side: one forward per step for every cache still generating (the first
// layout is the baseline). A cache stops at a stop token of the model, at
// MaxTokens, (Line) at the end of its first line, or (Until) at a stop
// string.
func Generate(ctx context.Context, r *runtime.Runner, layouts []*kvcache.Layout, it GenItem) ([]GenOutput, error) {
	m := r.Model()
	if len(it.Prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrOptions)
	}
	maxNew := it.MaxTokens
	if m.ContextLen > 0 {
		maxNew = min(maxNew, m.ContextLen-len(it.Prompt))
	}
	if maxNew <= 0 {
		return nil, fmt.Errorf("%w: a %d-token prompt leaves no room in the model's %d-token context", ErrOptions, len(it.Prompt), m.ContextLen)
	}
	stop := map[int]bool{}
	for _, id := range m.StopIDs {
		stop[id] = true
	}
	type run struct {
		cache *kvcache.Cache
		dec   interface {
			Next(int) string
			Flush() string
		}
		text strings.Builder
		ids  []int
		done bool
	}
	runs := make([]*run, len(layouts))
	batch := make([]runtime.Entry, 0, len(layouts))
	for i, l := range layouts {
		c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(len(it.Prompt) + maxNew)})
		if err != nil {
			return nil, err
		}
		_ = c.AddSeq(0)
		dec := m.Tokenizer.NewDecoder()
		dec.Next(it.Prompt[len(it.Prompt)-1]) // the continuation decodes after the prompt's last token
		dec.Flush()
		runs[i] = &run{cache: c, dec: dec}
		batch = append(batch, runtime.Entry{Cache: c, Seq: 0, Tokens: it.Prompt, Exact: it.Exact})
	}
	active := make([]int, len(runs)) // which run each batch entry is
	for i := range active {
		active[i] = i
	}
	for len(batch) > 0 {
		logits, err := r.Forward(ctx, batch)
		if err != nil {
			return nil, err
		}
		next := batch[:0]
		nextActive := active[:0]
		for k, e := range active {
			ru := runs[e]
			id := runtime.Argmax(logits[k])
			if stop[id] {
				ru.done = true
				continue
			}
			ru.ids = append(ru.ids, id)
			ru.text.WriteString(ru.dec.Next(id))
			_, until := cutUntil(ru.text.String(), it.Until)
			if it.Line && strings.Contains(ru.text.String(), "\n") || until || len(ru.ids) >= maxNew {
				ru.done = true
				continue
			}
			next = append(next, runtime.Entry{Cache: ru.cache, Seq: 0, Tokens: []int{id}})
			nextActive = append(nextActive, e)
		}
		batch, active = next, nextActive
	}
	out := make([]GenOutput, len(runs))
	for i, ru := range runs {
		text := ru.text.String() + ru.dec.Flush()
		if it.Line {
			if j := strings.IndexByte(text, '\n'); j >= 0 {
				text = text[:j+1]
			}
		}
		text, _ = cutUntil(text, it.Until)
		out[i] = GenOutput{Text: text, Tokens: len(ru.ids), Diverge: -1}
		if i > 0 {
			out[i].Diverge = divergence(runs[0].ids, ru.ids)
		}
	}
	return out, nil
}
