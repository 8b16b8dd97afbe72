package serve_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// wantError checks an OpenAI error response: status, type, code, param
// and words of the message.
func wantError(t *testing.T, name string, code int, b []byte, status int, typ, errCode, param string, words ...string) {
	t.Helper()
	var e apiErr
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Errorf("%s: status %d, body %s: not an OpenAI error", name, code, b)
		return
	}
	got := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if code != status || e.Error.Type != typ || got(e.Error.Code) != errCode || got(e.Error.Param) != param || e.Error.Message == "" {
		t.Errorf("%s: %d %s/%s param %q (%s); want %d %s/%s param %q", name, code, e.Error.Type, got(e.Error.Code), got(e.Error.Param), e.Error.Message, status, typ, errCode, param)
	}
	for _, w := range words {
		if !strings.Contains(e.Error.Message, w) {
			t.Errorf("%s: message %q lacks %q", name, e.Error.Message, w)
		}
	}
}

// TestErrors: every refusal has its status and an OpenAI error body that
// names the parameter; unknown fields are ignored.
func TestErrors(t *testing.T) {
	f := newServer(t, serve.Options{MaxBodyBytes: 4096})
	long := make([]int, 600)
	for i := range long {
		long[i] = 65
	}
	for _, tc := range []struct {
		name, path       string
		body             string
		status           int
		typ, code, param string
		words            []string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt": "a", `, 400, "invalid_request_error", "invalid_json", "", []string{"malformed JSON"}},
		{"empty body", "/v1/completions", ``, 400, "invalid_request_error", "invalid_json", "", nil},
		{"not an object", "/v1/completions", `["a"]`, 400, "invalid_request_error", "invalid_json", "", []string{"JSON object"}},
		{"wrong type", "/v1/completions", `{"prompt": "a", "max_tokens": "ten"}`, 400, "invalid_request_error", "invalid_type", "max_tokens", []string{"integer", "string"}},
		{"wrong nested type", "/v1/completions", `{"prompt": "a", "stream_options": {"include_usage": "yes"}}`, 400, "invalid_request_error", "invalid_type", "stream_options.include_usage", nil},
		{"wrong prompt type", "/v1/completions", `{"prompt": {"text": "a"}}`, 400, "invalid_request_error", "invalid_type", "prompt", nil},
		{"bad token id", "/v1/completions", `{"prompt": [1, "x"]}`, 400, "invalid_request_error", "invalid_type", "prompt", []string{"prompt[1]"}},
		{"token outside the vocabulary", "/v1/completions", `{"prompt": [1, 99999], "max_tokens": 1}`, 400, "invalid_request_error", "invalid_value", "", []string{"99999"}},
		{"suffix", "/v1/completions", `{"prompt": "a", "suffix": "b"}`, 400, "invalid_request_error", "invalid_value", "suffix", []string{"not supported"}},
		{"stream_options without stream", "/v1/completions", `{"prompt": "a", "stream_options": {"include_usage": true}}`, 400, "invalid_request_error", "invalid_value", "stream_options", []string{"stream"}},
		{"chat stream_options without stream", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "stream": false, "stream_options": {"include_usage": true}}`, 400, "invalid_request_error", "invalid_value", "stream_options", []string{"stream"}},
		{"response_format json_object", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_object"}}`, 400, "invalid_request_error", "invalid_value", "response_format", []string{"not supported", "json_object"}},
		{"response_format json_schema", "/v1/completions", `{"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}`, 400, "invalid_request_error", "invalid_value", "response_format", []string{"not supported"}},
		{"response_format not an object", "/v1/completions", `{"prompt": "a", "response_format": "json"}`, 400, "invalid_request_error", "invalid_type", "response_format", nil},
		{"no prompt", "/v1/completions", `{"max_tokens": 1}`, 400, "invalid_request_error", "invalid_value", "prompt", nil},
		{"wrong stop type", "/v1/completions", `{"prompt": "a", "stop": 3}`, 400, "invalid_request_error", "invalid_type", "stop", nil},
		{"n 2", "/v1/completions", `{"prompt": "a", "n": 2}`, 400, "invalid_request_error", "invalid_value", "n", nil},
		{"negative temperature", "/v1/completions", `{"prompt": "a", "temperature": -1}`, 400, "invalid_request_error", "invalid_value", "temperature", nil},
		{"top_p 0", "/v1/completions", `{"prompt": "a", "top_p": 0}`, 400, "invalid_request_error", "invalid_value", "top_p", nil},
		{"logprobs 30", "/v1/completions", `{"prompt": "a", "logprobs": 30}`, 400, "invalid_request_error", "invalid_value", "logprobs", nil},
		{"max_tokens 0 without echo", "/v1/completions", `{"prompt": "a", "max_tokens": 0}`, 400, "invalid_request_error", "invalid_value", "max_tokens", []string{"echo"}},
		{"penalty", "/v1/completions", `{"prompt": "a", "presence_penalty": 0.5}`, 400, "invalid_request_error", "invalid_value", "presence_penalty", nil},
		{"unknown model", "/v1/completions", `{"model": "gpt-4", "prompt": "a"}`, 404, "invalid_request_error", "model_not_found", "model", []string{"gpt-4", "tiny@int8"}},
		{"unknown cache", "/v1/completions", `{"model": "tiny@int3", "prompt": "a"}`, 404, "invalid_request_error", "model_not_found", "model", nil},
		{"prompt too long", "/v1/completions", mustJSON(map[string]any{"prompt": long, "max_tokens": 10}), 400, "invalid_request_error", "context_length_exceeded", "prompt", []string{"512", "610", "600"}},
		{"max_tokens too many", "/v1/completions", `{"prompt": "a", "max_tokens": 600}`, 400, "invalid_request_error", "context_length_exceeded", "max_tokens", []string{"512", "600"}},
		{"body too large", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 5000) + `"}`, 413, "invalid_request_error", "request_too_large", "", []string{"4096"}},
		{"chat without messages", "/v1/chat/completions", `{"messages": []}`, 400, "invalid_request_error", "invalid_value", "messages", nil},
		{"chat wrong content", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 5}]}`, 400, "invalid_request_error", "invalid_type", "messages", nil},
		{"chat image part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}`, 400, "invalid_request_error", "invalid_value", "messages", []string{"image_url"}},
		{"chat top_logprobs without logprobs", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}`, 400, "invalid_request_error", "invalid_value", "top_logprobs", nil},
		{"chat logprobs wrong type", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "logprobs": 2}`, 400, "invalid_request_error", "invalid_type", "logprobs", nil},
		{"chat max_completion_tokens 0", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 0}`, 400, "invalid_request_error", "invalid_value", "max_completion_tokens", nil},
		{"unknown path", "/v1/embeddings", `{}`, 404, "invalid_request_error", "not_found", "", []string{"/v1/embeddings"}},
	} {
		code, _, b := f.post(t, tc.path, tc.body)
		wantError(t, tc.name, code, b, tc.status, tc.typ, tc.code, tc.param, tc.words...)
	}
	// Unknown fields are ignored.
	if code, _, b := f.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 1, "frobnicate": {"x": [1]}, "user": "u1", "suffix": null, "response_format": {"type": "text"}}`); code != 200 {
		t.Errorf("unknown fields: %d %s", code, b)
	}
	// Wrong methods.
	code, hdr, b := f.get(t, "/v1/completions")
	wantError(t, "GET /v1/completions", code, b, 405, "invalid_request_error", "method_not_allowed", "")
	if hdr.Get("Allow") != "POST" {
		t.Errorf("405 Allow header %q", hdr.Get("Allow"))
	}
	code, _, b = f.post(t, "/v1/models", `{}`)
	wantError(t, "POST /v1/models", code, b, 405, "invalid_request_error", "method_not_allowed", "")
	code, _, b = f.get(t, "/nope")
	wantError(t, "GET /nope", code, b, 404, "invalid_request_error", "not_found", "")
	waitIdle(t, f.e)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestAPIKey: /v1/ needs the key (401 without it or with another),
// /health and /metrics do not.
func TestAPIKey(t *testing.T) {
	f := newServer(t, serve.Options{APIKey: "sekret-key"})
	body := `{"prompt": "a", "max_tokens": 1}`
	code, _, b := f.post(t, "/v1/completions", body)
	wantError(t, "no key", code, b, 401, "authentication_error", "invalid_api_key", "")
	code, _, b = f.post(t, "/v1/completions", body, "Authorization", "Bearer sekret-kez")
	wantError(t, "wrong key", code, b, 401, "authentication_error", "invalid_api_key", "")
	if strings.Contains(string(b), "sekret") {
		t.Errorf("the error echoes a key: %s", b)
	}
	code, _, b = f.post(t, "/v1/completions", body, "Authorization", "sekret-key")
	wantError(t, "key without Bearer", code, b, 401, "authentication_error", "invalid_api_key", "")
	if code, _, b := f.post(t, "/v1/completions", body, "Authorization", "Bearer sekret-key"); code != 200 {
		t.Errorf("right key: %d %s", code, b)
	}
	if code, _, _ := f.get(t, "/v1/models"); code != 401 {
		t.Errorf("GET /v1/models without a key: %d", code)
	}
	for _, p := range []string{"/health", "/metrics"} {
		if code, _, _ := f.get(t, p); code != 200 {
			t.Errorf("GET %s without a key: %d", p, code)
		}
	}
}

// TestCapacityErrors: a request no pool can ever hold is 413; a full
// waiting queue is 429; an engine that is not running is 503 (and
// /health says so); a model without a chat template refuses chat.
func TestCapacityErrors(t *testing.T) {
	m := loadModel(t)
	sp := specs(t, "fp16")
	l, _ := kvcache.NewLayout(m.Geometry(), sp[0], 0)
	small := start(t, startEngine(t, m, engine.Options{Caches: sp, Budget: l.SeqCost(100)}), serve.Options{})
	code, _, b := small.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 300}`)
	wantError(t, "over the pool", code, b, 413, "invalid_request_error", "kv_cache_too_small", "", "fp16")

	// One running sequence at a time, slow steps: a second request waits,
	// a third finds the queue full.
	slow := start(t, startEngine(t, m, engine.Options{Caches: sp, MaxSeqs: 1, OnStep: func(engine.StepInfo) { time.Sleep(2 * time.Millisecond) }}), serve.Options{MaxWaiting: 1})
	done := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _ := slow.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 150, "ignore_eos": true}`)
			done <- code
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for slow.e.Stats()[0].Waiting < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	code, _, b = slow.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 1}`)
	wantError(t, "queue full", code, b, 429, "rate_limit_error", "rate_limit_exceeded", "", "waiting")
	for range 2 {
		if c := <-done; c != 200 {
			t.Errorf("queued request: %d", c)
		}
	}

	e, err := engine.New(m, engine.Options{Caches: sp}) // never run
	if err != nil {
		t.Fatal(err)
	}
	idle := start(t, e, serve.Options{})
	code, _, b = idle.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 1}`)
	wantError(t, "engine not running", code, b, 503, "server_error", "engine_unavailable", "")
	if code, _, _ := idle.get(t, "/health"); code != 503 {
		t.Errorf("/health with the engine stopped: %d", code)
	}
	if code, _, _ := small.get(t, "/health"); code != 200 {
		t.Errorf("/health: %d", code)
	}

	m2 := loadModel(t)
	m2.ChatTemplate = ""
	plain := start(t, startEngine(t, m2, engine.Options{Caches: sp}), serve.Options{})
	code, _, b = plain.post(t, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	wantError(t, "no chat template", code, b, 400, "invalid_request_error", "no_chat_template", "messages", "chat template", "/v1/completions")
}

// TestPanicRecovered: a handler's panic is a 500 with an error body, and
// the server goes on serving.
func TestPanicRecovered(t *testing.T) {
	f := newServer(t, serve.Options{})
	serve.SetTestHook(f.s, func(r *http.Request) {
		if r.Header.Get("X-Panic") != "" {
			panic("boom")
		}
	})
	code, _, b := f.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 1}`, "X-Panic", "1")
	wantError(t, "panic", code, b, 500, "server_error", "internal_error", "")
	if code, _, b := f.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 1}`); code != 200 {
		t.Errorf("after a panic: %d %s", code, b)
	}
}

// TestOptions: New refuses routes it cannot follow.
func TestOptions(t *testing.T) {
	e := startEngine(t, loadModel(t), engine.Options{})
	for _, r := range []map[string]float64{{"int4": 0.1}, {"int8": 1.5}, {"int8": 0.6, "fp16": 0.6}, {"int8": -0.1}} {
		if _, err := serve.New(e, serve.Options{Route: r}); err == nil {
			t.Errorf("New with route %v: no error", r)
		}
	}
	if _, err := serve.New(e, serve.Options{ModelName: "a@b"}); err == nil {
		t.Errorf("New with a model name holding '@': no error")
	}
	s, err := serve.New(e, serve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := s.ModelIDs(); ids[0] != "tiny" {
		t.Errorf("default model name %q, want the directory's base name", ids[0])
	}
}
