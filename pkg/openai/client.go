package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Client talks to one OpenAI-compatible server.
type Client struct {
	// BaseURL is the server, "http://host:port", with or without a
	// trailing "/v1".
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer KEY".
	APIKey string
	// Model is the model id sent when a request names none; empty sends
	// none (vLLM and kvq serve then use their default model).
	Model string
	// HTTP sends the requests; nil uses http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each attempt of a request, a stream's reading
	// included; 0 means none (the context still applies).
	Timeout time.Duration
	// Retries is how many times a request is sent again after it failed
	// to connect or got a 5xx status (default 0: never), waiting
	// RetryDelay (default 100 ms) and then twice as long each time.
	Retries    int
	RetryDelay time.Duration
}

// Ptr returns a pointer to v, for the optional fields of requests.
func Ptr[T any](v T) *T { return &v }

// Error is an error response, or an error event inside a stream.
type Error struct {
	// StatusCode is the HTTP status; 0 for an error event in a stream.
	StatusCode int
	// Method and URL are the request's.
	Method, URL string
	// Message, Type, Param and Code are the server's error object; Message
	// is the body's text when the body is not OpenAI's error JSON.
	Message, Type, Param, Code string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "openai: %s %s: ", e.Method, e.URL)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "%d %s: ", e.StatusCode, http.StatusText(e.StatusCode))
	} else {
		b.WriteString("error in the stream: ")
	}
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	b.WriteString(msg)
	var extra []string
	for _, kv := range [][2]string{{"type", e.Type}, {"param", e.Param}, {"code", e.Code}} {
		if kv[1] != "" {
			extra = append(extra, kv[0]+" "+kv[1])
		}
	}
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, ", ") + ")")
	}
	return b.String()
}

// Model is an entry of GET /v1/models.
type Model struct {
	ID      string
	OwnedBy string
	Created int64
	// MaxModelLen is vLLM's (and kvq's) context length; 0 when absent.
	MaxModelLen int
	// Cache is kvq serve's cache for the id ("" elsewhere).
	Cache string
}

// CompletionRequest is a POST /v1/completions.
type CompletionRequest struct {
	// Model overrides Client.Model.
	Model string
	// Prompt is the text; PromptTokens, when set, is sent instead (token
	// ids).
	Prompt       string
	PromptTokens []int
	// MaxTokens is sent when positive (else the server's default: 16 for
	// OpenAI, vLLM and kvq); put max_tokens 0 in Extra to send 0.
	MaxTokens int
	// Temperature, TopP and Seed are sent when set.
	Temperature, TopP *float64
	Seed              *int64
	Stop              []string
	// IgnoreEOS sends vLLM's ignore_eos (when true).
	IgnoreEOS bool
	// Logprobs asks for that many alternatives per token (OpenAI's legacy
	// logprobs; 0 returns the chosen tokens' only).
	Logprobs *int
	// Echo returns the prompt in the text (and its tokens' log-
	// probabilities with Logprobs).
	Echo bool
	// NoStream sends stream false: one response, no chunks.
	NoStream bool
	// Extra fields go into the body as they are (top_k, min_p, ...); they
	// override the fields above.
	Extra map[string]any
}

// Message is a chat message.
type Message struct {
	Role, Content string
}

// ChatRequest is a POST /v1/chat/completions.
type ChatRequest struct {
	Model     string
	Messages  []Message
	MaxTokens int // sent as max_tokens when positive
	// Temperature, TopP and Seed are sent when set.
	Temperature, TopP *float64
	Seed              *int64
	Stop              []string
	IgnoreEOS         bool
	// Logprobs asks for the tokens' log-probabilities, TopLogprobs for
	// that many alternatives each.
	Logprobs    bool
	TopLogprobs int
	NoStream    bool
	Extra       map[string]any
}

// Chunk is one streamed message that carried a choice.
type Chunk struct {
	// Time is when the message had been read.
	Time time.Time
	// Text is the choice's text (completions) or delta content (chat).
	Text string
	// FinishReason is set on the chunk that ends the choice.
	FinishReason string
	// Logprobs are the chunk's tokens', when asked for.
	Logprobs []TokenLogprob
}

// Completion is a finished request.
type Completion struct {
	ID, Model string
	// Cache is kvq serve's kvq_cache field ("" from other servers).
	Cache        string
	Text         string
	FinishReason string
	// PromptTokens and CompletionTokens are the server's usage; 0 when it
	// sent none.
	PromptTokens, CompletionTokens int
	// Start is taken just before the request is sent; FirstChunk and
	// LastChunk are the times of the first and last messages that carried
	// a choice (both the response's arrival when not streamed). Chunks
	// counts those messages.
	Start, FirstChunk, LastChunk time.Time
	Chunks                       int
	// Logprobs are the tokens' log-probabilities, when asked for: with
	// echo, the prompt's tokens first.
	Logprobs []TokenLogprob
}

// TokenLogprob is a token's log-probability and its alternatives.
type TokenLogprob struct {
	Token string
	// Logprob is NaN where the server sent null (an echoed prompt's first
	// token, which nothing precedes).
	Logprob float64
	// Bytes are the token's bytes (chat only; nil elsewhere).
	Bytes []byte
	// Offset is the token's text_offset (completions), -1 when absent.
	Offset int
	// Top are the alternatives, most likely first.
	Top []TopLogprob
}

// TopLogprob is an alternative token.
type TopLogprob struct {
	Token   string
	Logprob float64
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// url joins the base URL and a path under /v1.
func (c *Client) url(path string) string {
	base := strings.TrimRight(c.BaseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base + path
}

// do sends a request, with the retries of Client.Retries, and hands a 2xx
// response to read; other statuses become *Error.
// start, when not nil, gets the time just before each attempt is sent.
func (c *Client) do(ctx context.Context, method, path string, body []byte, stream bool, read func(*http.Response) error, start *time.Time) error {
	url := c.url(path)
	delay := c.RetryDelay
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if c.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, c.Timeout)
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(actx, method, url, rd)
		if err != nil {
			cancel()
			return fmt.Errorf("openai: %s %s: %w", method, url, err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		// A request sent on a kept-alive connection that the server had
		// just closed never reached it: net/http sends it again on a new
		// connection for requests marked idempotent (an empty key is not
		// sent). Servers such as llama-server close idle connections.
		req.Header["X-Idempotency-Key"] = nil
		if stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		if c.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.APIKey)
		}
		if start != nil {
			*start = time.Now()
		}
		resp, err := c.http().Do(req)
		if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // its text repeats the method and URL this error names
		}
		if err != nil {
			timedOut := actx.Err() != nil && ctx.Err() == nil
			cancel()
			switch {
			case ctx.Err() != nil:
				return fmt.Errorf("openai: %s %s: %w", method, url, ctx.Err())
			case timedOut:
				return fmt.Errorf("openai: %s %s: no response within the timeout of %v: %w", method, url, c.Timeout, context.DeadlineExceeded)
			case attempt < c.Retries:
				if err := sleep(ctx, delay<<attempt); err != nil {
					return fmt.Errorf("openai: %s %s: %w", method, url, err)
				}
				continue
			}
			return fmt.Errorf("openai: %s %s: %w", method, url, err)
		}
		if resp.StatusCode >= 500 && attempt < c.Retries {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			cancel()
			if err := sleep(ctx, delay<<attempt); err != nil {
				return fmt.Errorf("openai: %s %s: %w", method, url, err)
			}
			continue
		}
		if resp.StatusCode/100 != 2 {
			err := responseError(resp, method, url)
			resp.Body.Close()
			cancel()
			return err
		}
		err = read(resp)
		resp.Body.Close()
		if err != nil && actx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("openai: %s %s: response not complete within the timeout of %v: %w", method, url, c.Timeout, context.DeadlineExceeded)
		}
		cancel()
		return err
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errorObject is OpenAI's error body; vLLM sends code as a number.
type errorObject struct {
	Error *struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

func (o *errorObject) toError(status int, method, url string) *Error {
	e := &Error{StatusCode: status, Method: method, URL: url, Message: o.Error.Message, Type: o.Error.Type}
	e.Param, e.Code = rawString(o.Error.Param), rawString(o.Error.Code)
	return e
}

// rawString is a JSON string's value, a number's text, or "" for null.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if r := strings.TrimSpace(string(raw)); r != "null" {
		return r
	}
	return ""
}

func responseError(resp *http.Response, method, url string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var o errorObject
	if json.Unmarshal(b, &o) == nil && o.Error != nil {
		return o.toError(resp.StatusCode, method, url)
	}
	msg := strings.TrimSpace(string(b))
	if !utf8.ValidString(msg) || len(msg) > 500 {
		msg = strings.ToValidUTF8(msg[:min(len(msg), 500)], "?")
	}
	return &Error{StatusCode: resp.StatusCode, Method: method, URL: url, Message: msg}
}

// Models lists the server's models.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	var out []Model
	err := c.do(ctx, http.MethodGet, "/models", nil, false, func(resp *http.Response) error {
		var l struct {
			Data []struct {
				ID          string `json:"id"`
				OwnedBy     string `json:"owned_by"`
				Created     int64  `json:"created"`
				MaxModelLen int    `json:"max_model_len"`
				Cache       string `json:"kvq_cache"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			return fmt.Errorf("%w: GET %s: %v", ErrProtocol, c.url("/models"), err)
		}
		for _, m := range l.Data {
			out = append(out, Model{ID: m.ID, OwnedBy: m.OwnedBy, Created: m.Created, MaxModelLen: m.MaxModelLen, Cache: m.Cache})
		}
		return nil
	}, nil)
	return out, err
}

// Complete sends a completion request; streamed (unless NoStream), each
// chunk carrying a choice is passed to onChunk (which may be nil) as it
// arrives.
func (c *Client) Complete(ctx context.Context, req CompletionRequest, onChunk func(Chunk)) (Completion, error) {
	body := map[string]any{}
	if m := cmp(req.Model, c.Model); m != "" {
		body["model"] = m
	}
	if req.PromptTokens != nil {
		body["prompt"] = req.PromptTokens
	} else {
		body["prompt"] = req.Prompt
	}
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	sampling(body, req.Temperature, req.TopP, req.Seed, req.Stop, req.IgnoreEOS)
	if req.Logprobs != nil {
		body["logprobs"] = *req.Logprobs
	}
	if req.Echo {
		body["echo"] = true
	}
	return c.send(ctx, "/completions", body, !req.NoStream, req.Extra, onChunk)
}

// Chat sends a chat completion request, like Complete.
func (c *Client) Chat(ctx context.Context, req ChatRequest, onChunk func(Chunk)) (Completion, error) {
	body := map[string]any{}
	if m := cmp(req.Model, c.Model); m != "" {
		body["model"] = m
	}
	msgs := make([]map[string]string, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = map[string]string{"role": m.Role, "content": m.Content}
	}
	body["messages"] = msgs
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	sampling(body, req.Temperature, req.TopP, req.Seed, req.Stop, req.IgnoreEOS)
	if req.Logprobs {
		body["logprobs"] = true
		if req.TopLogprobs > 0 {
			body["top_logprobs"] = req.TopLogprobs
		}
	}
	return c.send(ctx, "/chat/completions", body, !req.NoStream, req.Extra, onChunk)
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sampling(body map[string]any, temp, topP *float64, seed *int64, stop []string, ignoreEOS bool) {
	if temp != nil {
		body["temperature"] = *temp
	}
	if topP != nil {
		body["top_p"] = *topP
	}
	if seed != nil {
		body["seed"] = *seed
	}
	if len(stop) > 0 {
		body["stop"] = stop
	}
	if ignoreEOS {
		body["ignore_eos"] = true
	}
}

// PromptLogprobs scores prompt teacher-forced: each of its tokens'
// log-probability given the ones before it (the first is NaN), with topK
// alternatives (vLLM and kvq serve return the topK likeliest and the
// token itself). It sends echo with logprobs and max_tokens 1, not 0,
// which vLLM refuses (kvq serve takes either), and drops the generated
// token: the prompt's tokens are the first usage.prompt_tokens entries,
// or, from a server without usage, those whose text offset lies inside
// the prompt.
func (c *Client) PromptLogprobs(ctx context.Context, prompt string, topK int) ([]TokenLogprob, error) {
	return c.promptLogprobs(ctx, CompletionRequest{Prompt: prompt}, topK, utf8.RuneCountInString(prompt))
}

// PromptTokenLogprobs is PromptLogprobs for a prompt of token ids, sent
// as they are (the server adds no BOS): the scores of exactly these
// tokens, one entry each.
func (c *Client) PromptTokenLogprobs(ctx context.Context, ids []int, topK int) ([]TokenLogprob, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("openai: PromptTokenLogprobs: no tokens")
	}
	lps, err := c.promptLogprobs(ctx, CompletionRequest{PromptTokens: ids}, topK, -1)
	if err != nil {
		return nil, err
	}
	if len(lps) < len(ids) {
		return nil, fmt.Errorf("%w: POST %s: echo returned %d log-probabilities for a %d-token prompt", ErrProtocol, c.url("/completions"), len(lps), len(ids))
	}
	return lps[:len(ids)], nil
}

func (c *Client) promptLogprobs(ctx context.Context, req CompletionRequest, topK, runes int) ([]TokenLogprob, error) {
	req.MaxTokens, req.Echo, req.Logprobs, req.Temperature, req.NoStream = 1, true, &topK, Ptr(0.0), true
	comp, err := c.Complete(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	n := comp.PromptTokens
	if n <= 0 || n > len(comp.Logprobs) {
		n = 0
		switch {
		case runes >= 0:
			for n < len(comp.Logprobs) && comp.Logprobs[n].Offset >= 0 && comp.Logprobs[n].Offset < runes {
				n++
			}
		default:
			n = len(req.PromptTokens)
		}
	}
	if n == 0 || n > len(comp.Logprobs) {
		return nil, fmt.Errorf("%w: POST %s: echo returned no log-probabilities for the prompt", ErrProtocol, c.url("/completions"))
	}
	return comp.Logprobs[:n], nil
}

// send posts body and reads the response, streamed or not.
func (c *Client) send(ctx context.Context, path string, body map[string]any, stream bool, extra map[string]any, onChunk func(Chunk)) (Completion, error) {
	body["stream"] = stream
	if stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Completion{}, fmt.Errorf("openai: encoding the request: %w", err)
	}
	var comp Completion
	url := c.url(path)
	err = c.do(ctx, http.MethodPost, path, b, stream, func(resp *http.Response) error {
		if !stream || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			if err := decodeResponse(resp.Body, &comp); err != nil {
				return fmt.Errorf("%w: POST %s: %v", ErrProtocol, url, err)
			}
			comp.FirstChunk = time.Now()
			comp.LastChunk, comp.Chunks = comp.FirstChunk, 1
			return nil
		}
		return readStream(resp.Body, &comp, onChunk, http.MethodPost, url)
	}, &comp.Start)
	if err == nil && comp.Chunks == 0 {
		err = fmt.Errorf("%w: POST %s", ErrNoChoices, url)
	}
	return comp, err
}

// wire is a response or a chunk of either endpoint.
type wire struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Cache   string `json:"kvq_cache"`
	Choices []struct {
		Text    *string `json:"text"`
		Message *struct {
			Content *string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// text returns the first choice's text, finish reason and log-probabilities.
func (w *wire) choice() (text, finish string, lps []TokenLogprob, err error) {
	ch := w.Choices[0]
	switch {
	case ch.Text != nil:
		text = *ch.Text
	case ch.Message != nil && ch.Message.Content != nil:
		text = *ch.Message.Content
	case ch.Delta != nil && ch.Delta.Content != nil:
		text = *ch.Delta.Content
	}
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	lps, err = parseLogprobs(ch.Logprobs)
	return text, finish, lps, err
}

func (w *wire) into(comp *Completion) {
	comp.ID = cmp(comp.ID, w.ID)
	comp.Model = cmp(comp.Model, w.Model)
	comp.Cache = cmp(comp.Cache, w.Cache)
	if w.Usage != nil {
		comp.PromptTokens, comp.CompletionTokens = w.Usage.PromptTokens, w.Usage.CompletionTokens
	}
}

func decodeResponse(r io.Reader, comp *Completion) error {
	var w wire
	if err := json.NewDecoder(r).Decode(&w); err != nil {
		return err
	}
	w.into(comp)
	if len(w.Choices) == 0 {
		return nil
	}
	text, finish, lps, err := w.choice()
	if err != nil {
		return err
	}
	comp.Text, comp.FinishReason, comp.Logprobs = text, finish, lps
	return nil
}

// maxEvent bounds one server-sent event's data.
const maxEvent = 16 << 20

// readStream reads server-sent events until [DONE] or the end of the
// body.
func readStream(body io.Reader, comp *Completion, onChunk func(Chunk), method, url string) error {
	ev := newEvents(body)
	var text strings.Builder
	for {
		data, err := ev.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("openai: %s %s: reading the stream: %w", method, url, err)
		}
		now := time.Now()
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		var w wire
		if err := json.Unmarshal(data, &w); err != nil {
			return fmt.Errorf("%w: %s %s: stream message %q: %v", ErrProtocol, method, url, truncate(string(data), 80), err)
		}
		if len(w.Error) > 0 && string(w.Error) != "null" {
			var o errorObject
			if json.Unmarshal(data, &o) == nil && o.Error != nil {
				return o.toError(0, method, url)
			}
			return &Error{Method: method, URL: url, Message: rawString(w.Error)}
		}
		w.into(comp)
		if len(w.Choices) == 0 {
			continue // usage only: no end time (vLLM's rule)
		}
		t, finish, lps, err := w.choice()
		if err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrProtocol, method, url, err)
		}
		if comp.Chunks == 0 {
			comp.FirstChunk = now
		}
		comp.LastChunk = now
		comp.Chunks++
		text.WriteString(t)
		comp.Logprobs = append(comp.Logprobs, lps...)
		if finish != "" {
			comp.FinishReason = finish
		}
		if onChunk != nil {
			onChunk(Chunk{Time: now, Text: t, FinishReason: finish, Logprobs: lps})
		}
	}
	comp.Text = text.String()
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// parseLogprobs reads either format: the legacy completions object
// {tokens, token_logprobs, top_logprobs, text_offset} or chat's
// {content: [{token, logprob, bytes, top_logprobs}]}.
func parseLogprobs(raw json.RawMessage) ([]TokenLogprob, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var lp struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
		Content       []chatLogprob        `json:"content"`
	}
	if err := json.Unmarshal(raw, &lp); err != nil {
		return nil, fmt.Errorf("logprobs: %v", err)
	}
	var out []TokenLogprob
	for _, c := range lp.Content {
		t := TokenLogprob{Token: c.Token, Logprob: c.Logprob, Offset: -1}
		if c.Bytes != nil {
			t.Bytes = make([]byte, len(c.Bytes))
			for i, b := range c.Bytes {
				t.Bytes[i] = byte(b)
			}
		}
		for _, a := range c.TopLogprobs {
			t.Top = append(t.Top, TopLogprob{Token: a.Token, Logprob: a.Logprob})
		}
		out = append(out, t)
	}
	for i, tok := range lp.Tokens {
		t := TokenLogprob{Token: tok, Logprob: math.NaN(), Offset: -1}
		if i < len(lp.TokenLogprobs) && lp.TokenLogprobs[i] != nil {
			t.Logprob = *lp.TokenLogprobs[i]
		}
		if i < len(lp.TextOffset) {
			t.Offset = lp.TextOffset[i]
		}
		if i < len(lp.TopLogprobs) {
			for k, v := range lp.TopLogprobs[i] {
				t.Top = append(t.Top, TopLogprob{Token: k, Logprob: v})
			}
			slices.SortStableFunc(t.Top, func(a, b TopLogprob) int {
				switch {
				case a.Logprob > b.Logprob:
					return -1
				case a.Logprob < b.Logprob:
					return 1
				}
				return strings.Compare(a.Token, b.Token)
			})
		}
		out = append(out, t)
	}
	return out, nil
}

type chatLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}
