package bench

import (
	"context"
	"os"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/openai"
)

// endpointTargets makes a client per endpoint and finds the model id each
// serves.
func (o *Options) endpointTargets(ctx context.Context, tok bench.Tokenizer) ([]namedTarget, error) {
	var out []namedTarget
	for _, e := range o.ends {
		c, err := e.Client(ctx, os.Getenv(o.EndpointKey), o.EndpointMdl, o.Timeout)
		if err != nil {
			return nil, err
		}
		c.Retries = o.Retries
		out = append(out, namedTarget{name: e.Name, t: &endpointTarget{name: e.Name, c: c, chat: o.Chat, tok: tok}})
	}
	return out, nil
}

// endpointTarget sends a workload's requests to an OpenAI-compatible
// server, streamed, as vllm bench serve does: the prompt as text, TTFT
// from the first streamed chunk, output tokens from the server's usage
// (else counted with the local tokenizer).
type endpointTarget struct {
	name string
	c    *openai.Client
	chat bool
	tok  bench.Tokenizer
}

var _ bench.Target = (*endpointTarget)(nil)

func (t *endpointTarget) Name() string { return t.name }

func (t *endpointTarget) Do(ctx context.Context, r bench.Request, chunk func(int, time.Time)) (bench.Response, error) {
	zero := 0.0
	on := func(ch openai.Chunk) { chunk(1, ch.Time) }
	var comp openai.Completion
	var err error
	if t.chat {
		msgs := []openai.Message{{Role: "user", Content: r.Text}}
		if len(r.Messages) > 0 {
			msgs = msgs[:0]
			for _, m := range r.Messages {
				msgs = append(msgs, openai.Message{Role: m.Role, Content: m.Content})
			}
		}
		comp, err = t.c.Chat(ctx, openai.ChatRequest{Messages: msgs, MaxTokens: r.MaxTokens, Temperature: &zero, IgnoreEOS: r.IgnoreEOS}, on)
	} else {
		req := openai.CompletionRequest{Prompt: r.Text, MaxTokens: r.MaxTokens, Temperature: &zero, IgnoreEOS: r.IgnoreEOS}
		if r.Text == "" {
			req.PromptTokens = r.Prompt
		}
		comp, err = t.c.Complete(ctx, req, on)
	}
	if err != nil {
		return bench.Response{}, err
	}
	res := bench.Response{InputTokens: comp.PromptTokens, OutputTokens: comp.CompletionTokens, FinishReason: comp.FinishReason}
	if res.InputTokens == 0 {
		res.InputTokens = len(r.Prompt)
	}
	if res.OutputTokens == 0 && comp.Text != "" {
		res.OutputTokens = max(0, len(t.tok.Encode(comp.Text))-len(t.tok.Encode("")))
	}
	return res, nil
}
