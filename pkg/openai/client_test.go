package openai_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/openai"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// kvqServer runs kvq serve's handler over a tiny model (fp16 and int8
// caches) on a loopback port.
func kvqServer(t *testing.T, apiKey string) (*engine.Engine, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	caches, _ := quant.Formats().ParseList("fp16,int8")
	e, err := engine.New(m, engine.Options{Caches: caches})
	if err != nil {
		t.Fatal(err)
	}
	ectx, stop := context.WithCancel(context.Background())
	edone := make(chan error, 1)
	go func() { edone <- e.Run(ectx) }()
	s, err := serve.New(e, serve.Options{APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- s.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-sdone
		stop()
		<-edone
	})
	if err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, "http://" + ln.Addr().String()
}

// TestAgainstServe: the client streams from kvq serve (chunks in order,
// text equal to the same request not streamed, usage, cache), chats,
// lists the models, scores a prompt as the engine does, and reports an
// error response with its status and message.
func TestAgainstServe(t *testing.T) {
	e, url := kvqServer(t, "k3y")
	c := &openai.Client{BaseURL: url, APIKey: "k3y", Model: "tiny@int8", Timeout: 20 * time.Second}
	ctx := context.Background()

	models, err := c.Models(ctx)
	if err != nil || len(models) != 3 || models[0].ID != "tiny" || models[2].Cache != "int8" || models[0].MaxModelLen != 512 {
		t.Fatalf("Models = %+v, %v", models, err)
	}

	req := openai.CompletionRequest{Prompt: "the sun", MaxTokens: 12, Temperature: openai.Ptr(0.0), IgnoreEOS: true}
	var chunks []openai.Chunk
	got, err := c.Complete(ctx, req, func(ch openai.Chunk) { chunks = append(chunks, ch) })
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 12 || got.Chunks != 12 || got.CompletionTokens != 12 || got.PromptTokens == 0 || got.Cache != "int8" || got.FinishReason != "length" {
		t.Errorf("streamed: %d chunks, %+v", len(chunks), got)
	}
	var joined strings.Builder
	for i, ch := range chunks {
		joined.WriteString(ch.Text)
		if i > 0 && ch.Time.Before(chunks[i-1].Time) {
			t.Errorf("chunk %d arrived before chunk %d", i, i-1)
		}
	}
	if !(got.Start.Before(got.FirstChunk) && got.FirstChunk.Equal(chunks[0].Time) && got.LastChunk.Equal(chunks[11].Time)) {
		t.Errorf("times: start %v, first %v, last %v", got.Start, got.FirstChunk, got.LastChunk)
	}
	req.NoStream = true
	plain, err := c.Complete(ctx, req, nil)
	if err != nil || plain.Text != got.Text || joined.String() != got.Text || plain.CompletionTokens != 12 || plain.Cache != "int8" {
		t.Errorf("not streamed %q (%v), streamed %q / %q", plain.Text, err, got.Text, joined.String())
	}

	chat, err := c.Chat(ctx, openai.ChatRequest{Model: "tiny", Messages: []openai.Message{{Role: "user", Content: "hi"}}, MaxTokens: 5, Temperature: openai.Ptr(0.0), IgnoreEOS: true, Logprobs: true, TopLogprobs: 2}, nil)
	if err != nil || chat.CompletionTokens != 5 || chat.Cache != "fp16" || len(chat.Logprobs) != 5 || len(chat.Logprobs[0].Top) != 2 || chat.Logprobs[0].Bytes == nil {
		t.Errorf("Chat = %+v, %v", chat, err)
	}

	const prompt = "the north wind and the sun"
	lps, err := c.PromptLogprobs(ctx, prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := e.Model().Tokenizer.Encode(prompt, true)
	st, _ := e.Submit(ctx, engine.Request{Cache: "int8", Prompt: ids, PromptLogprobs: true})
	res, _ := st.Wait(ctx)
	if len(lps) != len(ids) || !math.IsNaN(lps[0].Logprob) {
		t.Fatalf("PromptLogprobs: %d entries (first %v), want %d from NaN", len(lps), lps, len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if float32(lps[i].Logprob) != res.PromptLogprobs[i] {
			t.Errorf("token %d: %g, engine %g", i, lps[i].Logprob, res.PromptLogprobs[i])
		}
	}

	_, err = c.Complete(ctx, openai.CompletionRequest{Model: "gpt-4", Prompt: "x"}, nil)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "gpt-4") {
		t.Errorf("unknown model: %v", err)
	}
	bad := &openai.Client{BaseURL: url + "/v1", APIKey: "nope"}
	if _, err := bad.Models(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("wrong key: %v", err)
	}
}

// TestSSE: a vLLM-like stream with comments, pings, CRLF line ends, a
// first chunk of empty text and a usage-only last chunk: the chunks
// carrying choices are reported, the text concatenates, the usage sets
// the counts and not the end time.
func TestSSE(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		write := func(s string) {
			fmt.Fprint(w, s)
			fl.Flush()
		}
		write(": ping\r\n\r\n")
		write(`data: {"id":"cmpl-1","model":"m","choices":[{"index":0,"text":"","finish_reason":null}]}` + "\r\n\r\n")
		write("event: message\ndata: {\"choices\":[{\"index\":0,\"text\":\"Hel\"}]}\n\n")
		write(":keep-alive\n\n")
		write("data:{\"choices\":[{\"index\":0,\"text\":\"lo\",\"finish_reason\":\"stop\"}]}\n\n")
		time.Sleep(300 * time.Millisecond) // long enough that scheduling delays on a loaded machine do not matter
		write(`data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\n")
		write("data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := &openai.Client{BaseURL: srv.URL}
	var texts []string
	comp, err := c.Complete(context.Background(), openai.CompletionRequest{Prompt: "x"}, func(ch openai.Chunk) { texts = append(texts, ch.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, "|") != "|Hel|lo" || comp.Text != "Hello" || comp.Chunks != 3 || comp.FinishReason != "stop" || comp.ID != "cmpl-1" {
		t.Errorf("chunks %q, completion %+v", texts, comp)
	}
	if comp.PromptTokens != 7 || comp.CompletionTokens != 3 {
		t.Errorf("usage %d + %d, want 7 + 3", comp.PromptTokens, comp.CompletionTokens)
	}
	if time.Since(comp.LastChunk) < 250*time.Millisecond {
		t.Errorf("the usage-only chunk moved the end time")
	}

	// A stream that ends without choices fails, as vLLM's benchmark counts it.
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer empty.Close()
	if _, err := (&openai.Client{BaseURL: empty.URL}).Complete(context.Background(), openai.CompletionRequest{Prompt: "x"}, nil); !errors.Is(err, openai.ErrNoChoices) {
		t.Errorf("no choices: %v", err)
	}
	// An error event in the stream.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\",\"code\":500}}\n\ndata: [DONE]\n\n")
	}))
	defer broken.Close()
	_, err = (&openai.Client{BaseURL: broken.URL}).Complete(context.Background(), openai.CompletionRequest{Prompt: "x"}, nil)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 0 || apiErr.Message != "engine died" || apiErr.Code != "500" {
		t.Errorf("error event: %v", err)
	}
}

// failing fails the first n round trips with a connection error.
type failing struct {
	n     atomic.Int32
	calls atomic.Int32
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	if f.n.Add(-1) >= 0 {
		return nil, errors.New("connection refused (test)")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRetries: 5xx responses and connection errors are retried up to
// Retries times, 4xx never; the error says the status and the server's
// message (JSON or text); the timeout bounds an attempt, which is not
// retried (the server may have the request).
func TestRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case strings.Contains(r.URL.Path, "models") && n <= 2:
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"message":"warming up","type":"server_error","param":null,"code":null}}`)
		case strings.Contains(r.URL.Path, "models"):
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case strings.Contains(r.URL.Path, "completions") && r.URL.Path == "/v1/chat/completions":
			time.Sleep(300 * time.Millisecond)
		default:
			w.WriteHeader(400)
			fmt.Fprint(w, "bad things\n")
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var apiErr *openai.Error

	if _, err := (&openai.Client{BaseURL: srv.URL, Retries: 1, RetryDelay: time.Millisecond}).Models(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Message != "warming up" || !strings.Contains(err.Error(), "503") {
		t.Errorf("after one retry: %v", err)
	}
	calls.Store(0)
	if ms, err := (&openai.Client{BaseURL: srv.URL, Retries: 2, RetryDelay: time.Millisecond}).Models(ctx); err != nil || len(ms) != 1 || calls.Load() != 3 {
		t.Errorf("after two retries: %v, %v, %d calls", ms, err, calls.Load())
	}
	calls.Store(0)
	_, err := (&openai.Client{BaseURL: srv.URL, Retries: 3, RetryDelay: time.Millisecond}).Complete(ctx, openai.CompletionRequest{Prompt: "x"}, nil)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "bad things" || calls.Load() != 1 {
		t.Errorf("400: %v after %d calls", err, calls.Load())
	}

	ft := &failing{}
	ft.n.Store(2)
	calls.Store(2) // the server answers models at once
	if _, err := (&openai.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: ft}, Retries: 2, RetryDelay: time.Millisecond}).Models(ctx); err != nil || ft.calls.Load() != 3 {
		t.Errorf("connection errors: %v after %d attempts", err, ft.calls.Load())
	}
	ft.calls.Store(0)
	ft.n.Store(5)
	if _, err := (&openai.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: ft}, Retries: 1, RetryDelay: time.Millisecond}).Models(ctx); err == nil || !strings.Contains(err.Error(), "connection refused") || ft.calls.Load() != 2 {
		t.Errorf("connection errors past the retries: %v after %d attempts", err, ft.calls.Load())
	}

	calls.Store(0)
	startT := time.Now()
	_, err = (&openai.Client{BaseURL: srv.URL, Timeout: 50 * time.Millisecond, Retries: 2}).Chat(ctx, openai.ChatRequest{Messages: []openai.Message{{Role: "user", Content: "x"}}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout") || time.Since(startT) > 250*time.Millisecond || calls.Load() != 1 {
		t.Errorf("timeout (not retried): %v after %v, %d calls", err, time.Since(startT), calls.Load())
	}
}

// TestStaleConnection: a server that drops a kept-alive connection when
// the next request arrives on it, without answering (the race of a server
// closing idle connections, as llama-server does, with a client reusing
// one), costs no request: it goes again on a new connection, without
// Client.Retries.
func TestStaleConnection(t *testing.T) {
	type key struct{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(key{}).(*atomic.Int32).Add(1) > 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		fmt.Fprint(w, `{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, key{}, new(atomic.Int32))
	}
	srv.Start()
	defer srv.Close()
	c := &openai.Client{BaseURL: srv.URL, HTTP: &http.Client{}}
	for i := 0; i < 5; i++ {
		if _, err := c.Complete(context.Background(), openai.CompletionRequest{Prompt: "x", MaxTokens: 1, NoStream: true}, nil); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}
