package bench

import (
	"context"
	"time"

	"github.com/kvqlabs/kvq/pkg/openai"
)

// EndpointTarget sends a workload's requests to an OpenAI-compatible
// server, streamed, as vllm bench serve does: the prompt as token ids
// when the workload made it so (Request.TokenIDs: the random and fixed
// datasets) or has no text, else as text (chat: always text), TTFT
// from the first streamed chunk, output tokens from the server's usage
// (else counted with Tokenizer). It is safe for concurrent use when the
// Client is.
type EndpointTarget struct {
	// Label names the endpoint in the report.
	Label  string
	Client *openai.Client
	// Chat sends /v1/chat/completions (the prompt as one user message, or
	// the request's messages) instead of /v1/completions.
	Chat bool
	// Tokenizer counts output tokens when the server reports none.
	Tokenizer Tokenizer
}

var _ Target = (*EndpointTarget)(nil)

// Name is the endpoint's label.
func (t *EndpointTarget) Name() string { return t.Label }

// Do implements Target. Requests are greedy (temperature 0).
func (t *EndpointTarget) Do(ctx context.Context, r Request, chunk func(int, time.Time)) (Response, error) {
	zero := 0.0
	on := func(ch openai.Chunk) { chunk(1, ch.Time) }
	var comp openai.Completion
	var err error
	if t.Chat {
		msgs := []openai.Message{{Role: "user", Content: r.Text}}
		if len(r.Messages) > 0 {
			msgs = msgs[:0]
			for _, m := range r.Messages {
				msgs = append(msgs, openai.Message{Role: m.Role, Content: m.Content})
			}
		}
		comp, err = t.Client.Chat(ctx, openai.ChatRequest{Messages: msgs, MaxTokens: r.MaxTokens, Temperature: &zero, IgnoreEOS: r.IgnoreEOS}, on)
	} else {
		req := openai.CompletionRequest{Prompt: r.Text, MaxTokens: r.MaxTokens, Temperature: &zero, IgnoreEOS: r.IgnoreEOS}
		if r.TokenIDs || r.Text == "" {
			req.Prompt, req.PromptTokens = "", r.Prompt
		}
		comp, err = t.Client.Complete(ctx, req, on)
	}
	if err != nil {
		return Response{}, err
	}
	res := Response{InputTokens: comp.PromptTokens, OutputTokens: comp.CompletionTokens, FinishReason: comp.FinishReason}
	if res.InputTokens == 0 {
		res.InputTokens = len(r.Prompt)
	}
	if res.OutputTokens == 0 && comp.Text != "" {
		res.OutputTokens = max(0, len(t.Tokenizer.Encode(comp.Text))-len(t.Tokenizer.Encode("")))
	}
	return res, nil
}
