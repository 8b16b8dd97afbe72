package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// EngineTarget runs requests on one pool of kvq's in-process engine: each
// generated token is one chunk, timed when the engine step that made it
// ended.
type EngineTarget struct {
	Engine *engine.Engine
	// Cache names the pool (engine.Request.Cache).
	Cache string
}

var _ Target = (*EngineTarget)(nil)

// Name is the pool's cache spec.
func (t *EngineTarget) Name() string { return t.Cache }

// Do implements Target. Requests are greedy; the engine's refusals and
// failures are errors.
func (t *EngineTarget) Do(ctx context.Context, r Request, chunk func(int, time.Time)) (Response, error) {
	prompt := r.Prompt
	if len(prompt) == 0 {
		return Response{}, fmt.Errorf("%w: request %d has no token ids (in-process targets need them)", ErrWorkload, r.Index)
	}
	st, err := t.Engine.Submit(ctx, engine.Request{Cache: t.Cache, Prompt: prompt, MaxTokens: r.MaxTokens, IgnoreEOS: r.IgnoreEOS})
	if err != nil {
		return Response{}, err
	}
	for {
		tok, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Response{}, err
		}
		chunk(1, tok.Time)
	}
	res := st.Result()
	switch res.FinishReason {
	case engine.FinishAbort, engine.FinishError:
		return Response{}, fmt.Errorf("engine: request %s: %w", res.FinishReason, res.Err)
	}
	return Response{InputTokens: res.PromptTokens, OutputTokens: len(res.Tokens), FinishReason: res.FinishReason}, nil
}

// ModelTokenizer adapts a loaded model's tokenizer and chat template to
// Tokenizer (and SpecialTokens: control, unused and unknown ids are special).
func ModelTokenizer(m *runtime.Model) Tokenizer { return modelTokenizer{m} }

type modelTokenizer struct{ m *runtime.Model }

func (t modelTokenizer) Encode(text string) []int { return t.m.Tokenizer.Encode(text, true) }
func (t modelTokenizer) Decode(ids []int) string  { return t.m.Tokenizer.Decode(ids) }
func (t modelTokenizer) Vocab() int               { return t.m.Vocab }

func (t modelTokenizer) Chat(msgs []Message) ([]int, string, error) {
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return t.m.ChatPrompt(cm)
}

func (t modelTokenizer) Special(id int) bool {
	switch t.m.Tokenizer.TokenType(id) {
	case tokenizer.Control, tokenizer.Unused, tokenizer.Unknown:
		return true
	}
	return id >= t.m.Tokenizer.VocabSize()
}
