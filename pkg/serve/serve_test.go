package serve_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// engineText runs req on the engine directly and decodes its tokens as
// the continuation of its prompt.
func engineRun(t *testing.T, e *engine.Engine, req engine.Request) engine.Result {
	t.Helper()
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// asJSON is s as a JSON string decodes: encoding/json writes U+FFFD for
// each byte of invalid UTF-8.
func asJSON(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func continuation(e *engine.Engine, prompt, toks []int) string {
	tok := e.Model().Tokenizer
	last := prompt[len(prompt)-1]
	return strings.TrimPrefix(tok.Decode(append([]int{last}, toks...)), tok.Decode([]int{last}))
}

// TestCompletions: a greedy completion's text is the engine's tokens
// decoded; streamed, its chunks are whole characters that concatenate to
// the same text, one chunk per token, the last with the finish reason,
// then a usage-only chunk; usage counts the prompt's and the generated
// tokens; the cache is in the field and the header.
func TestCompletions(t *testing.T) {
	f := newServer(t, serve.Options{})
	const prompt = "the weather in the north"
	ids := f.e.Model().Tokenizer.Encode(prompt, true)
	res := engineRun(t, f.e, engine.Request{Prompt: ids, MaxTokens: 40, IgnoreEOS: true})
	want := continuation(f.e, ids, res.Tokens)

	body := map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": true}
	code, hdr, b := f.post(t, "/v1/completions", body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	c := decode(t, b)
	if c.Object != "text_completion" || c.Model != "tiny" || !strings.HasPrefix(c.ID, "cmpl-") || c.Created == 0 || len(c.Choices) != 1 {
		t.Errorf("response envelope %s", b)
	}
	if c.text() != asJSON(want) || c.finish() != "length" {
		t.Errorf("text %q (%s), want %q (length)", c.text(), c.finish(), want)
	}
	if c.Usage == nil || c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens != 40 || c.Usage.TotalTokens != len(ids)+40 {
		t.Errorf("usage %+v, want %d + 40", c.Usage, len(ids))
	}
	if c.Cache != "fp16" || hdr.Get("X-KVQ-Cache") != "fp16" {
		t.Errorf("cache: field %q, header %q, want fp16", c.Cache, hdr.Get("X-KVQ-Cache"))
	}

	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	code, hdr, b = f.post(t, "/v1/completions", body)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: status %d, content type %q", code, hdr.Get("Content-Type"))
	}
	chunks := sse(t, b)
	if len(chunks) != 41 {
		t.Fatalf("%d chunks, want 40 token chunks and a usage chunk", len(chunks))
	}
	var got strings.Builder
	for i, ch := range chunks[:40] {
		if ch.Object != "text_completion" || ch.ID != chunks[0].ID || ch.Cache != "fp16" || ch.Usage != nil {
			t.Errorf("chunk %d envelope: %+v", i, ch)
		}
		if txt := ch.text(); strings.ContainsRune(txt, utf8.RuneError) && i < 39 && !strings.ContainsRune(want, utf8.RuneError) {
			t.Errorf("chunk %d %q splits a character", i, txt)
		}
		if (ch.finish() != "") != (i == 39) {
			t.Errorf("chunk %d finish reason %q", i, ch.finish())
		}
		got.WriteString(ch.text())
	}
	if got.String() != c.text() {
		t.Errorf("streamed text %q, not streamed %q", got.String(), c.text())
	}
	u := chunks[40]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 40 || u.Usage.PromptTokens != len(ids) {
		t.Errorf("usage chunk %+v", u)
	}
	if !strings.Contains(string(b), `"choices":[]`) {
		t.Errorf("usage chunk's choices not an empty array")
	}

	// Token ids as the prompt, the model id naming a cache.
	code, hdr, b = f.post(t, "/v1/completions", map[string]any{"model": "tiny@int8", "prompt": ids, "max_tokens": 3, "temperature": 0, "ignore_eos": true})
	if c := decode(t, b); code != 200 || c.Cache != "int8" || hdr.Get("X-KVQ-Cache") != "int8" || c.Usage.PromptTokens != len(ids) || c.Model != "tiny@int8" {
		t.Errorf("token-id prompt on tiny@int8: %d %s", code, b)
	}
	waitIdle(t, f.e)
}

// TestChat: the prompt is the chat template's rendering (string content
// and text parts alike); streamed, a role chunk comes first and the
// deltas concatenate to the message of the same request not streamed.
func TestChat(t *testing.T) {
	f := newServer(t, serve.Options{})
	m := f.e.Model()
	ids, _, err := m.ChatPrompt([]chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	res := engineRun(t, f.e, engine.Request{Prompt: ids, MaxTokens: 30, IgnoreEOS: true})
	want := asJSON(continuation(f.e, ids, res.Tokens))

	body := map[string]any{"messages": []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}},
		"max_completion_tokens": 30, "temperature": 0, "ignore_eos": true}
	code, _, b := f.post(t, "/v1/chat/completions", body)
	c := decode(t, b)
	if code != 200 || c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Choices[0].Message == nil || c.Choices[0].Message.Role != "assistant" {
		t.Fatalf("chat: %d %s", code, b)
	}
	if c.text() != want || c.finish() != "length" || c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens != 30 || c.Model != "tiny" {
		t.Errorf("chat text %q (%s, usage %+v), want %q", c.text(), c.finish(), c.Usage, want)
	}

	// Content as text parts renders the same prompt.
	body["messages"] = []map[string]any{{"role": "system", "content": []map[string]any{{"type": "text", "text": "be brief"}}}, {"role": "user", "content": "hello there"}}
	_, _, b = f.post(t, "/v1/chat/completions", body)
	if c2 := decode(t, b); c2.text() != c.text() || c2.Usage.PromptTokens != len(ids) {
		t.Errorf("text parts: %q, %d prompt tokens; want %q, %d", c2.text(), c2.Usage.PromptTokens, c.text(), len(ids))
	}

	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	_, _, b = f.post(t, "/v1/chat/completions", body)
	chunks := sse(t, b)
	if len(chunks) != 32 {
		t.Fatalf("%d chunks, want a role chunk, 30 token chunks and a usage chunk", len(chunks))
	}
	if d := chunks[0].Choices[0].Delta; d == nil || d.Role == nil || *d.Role != "assistant" || d.Content == nil || *d.Content != "" {
		t.Errorf("first chunk %+v, want the role", chunks[0].Choices[0])
	}
	var got strings.Builder
	for _, ch := range chunks[1:31] {
		if ch.Object != "chat.completion.chunk" || ch.Cache != "fp16" {
			t.Errorf("chunk envelope %+v", ch)
		}
		got.WriteString(ch.text())
	}
	if got.String() != c.text() || chunks[30].finish() != "length" {
		t.Errorf("streamed %q (%s), not streamed %q", got.String(), chunks[30].finish(), c.text())
	}
	if u := chunks[31]; len(u.Choices) != 0 || u.Usage.CompletionTokens != 30 {
		t.Errorf("usage chunk %+v", u)
	}
}

// TestLogprobs: the legacy format has one entry per generated token in
// each of its four lists, top alternatives in order with the chosen token
// among them (greedy: the first), offsets where the tokens' texts start;
// the chat format gives each token's bytes and exactly top_logprobs
// alternatives.
func TestLogprobs(t *testing.T) {
	f := newServer(t, serve.Options{})
	code, _, b := f.post(t, "/v1/completions", map[string]any{"prompt": "in the", "max_tokens": 12, "temperature": 0, "ignore_eos": true, "logprobs": 3})
	c := decode(t, b)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var lp struct {
		Tokens        []string          `json:"tokens"`
		TokenLogprobs []float64         `json:"token_logprobs"`
		TopLogprobs   []json.RawMessage `json:"top_logprobs"`
		TextOffset    []int             `json:"text_offset"`
	}
	if err := json.Unmarshal(c.Choices[0].Logprobs, &lp); err != nil {
		t.Fatal(err)
	}
	if len(lp.Tokens) != 12 || len(lp.TokenLogprobs) != 12 || len(lp.TopLogprobs) != 12 || len(lp.TextOffset) != 12 {
		t.Fatalf("logprobs lists of %d, %d, %d, %d entries, want 12", len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset))
	}
	if strings.Join(lp.Tokens, "") != c.text() && !strings.ContainsRune(c.text(), utf8.RuneError) {
		t.Errorf("tokens %q do not make the text %q", lp.Tokens, c.text())
	}
	for i, raw := range lp.TopLogprobs {
		keys, vals := orderedObject(t, raw)
		if len(keys) == 0 || len(keys) > 3 {
			t.Errorf("token %d: %d alternatives, want 1..3 (3 asked, texts may coincide)", i, len(keys))
			continue
		}
		if float32(vals[0]) != float32(lp.TokenLogprobs[i]) || keys[0] != lp.Tokens[i] && !strings.ContainsRune(keys[0], utf8.RuneError) {
			t.Errorf("token %d %q (%g): greedy, but the first alternative is %q (%g)", i, lp.Tokens[i], lp.TokenLogprobs[i], keys[0], vals[0])
		}
		if !slices.IsSortedFunc(vals, func(a, b float64) int { return -cmpFloat(a, b) }) || vals[0] > 0 {
			t.Errorf("token %d alternatives %v not sorted most likely first", i, vals)
		}
		if i > 0 && lp.TextOffset[i] < lp.TextOffset[i-1] {
			t.Errorf("text offsets %v decrease", lp.TextOffset)
		}
	}
	if lp.TextOffset[0] != 0 {
		t.Errorf("first text offset %d, want 0", lp.TextOffset[0])
	}

	code, _, b = f.post(t, "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 6, "temperature": 0, "ignore_eos": true, "logprobs": true, "top_logprobs": 2})
	if code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}
	c = decode(t, b)
	var clp struct {
		Content []struct {
			Token       string  `json:"token"`
			Logprob     float64 `json:"logprob"`
			Bytes       []int   `json:"bytes"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
				Bytes   []int   `json:"bytes"`
			} `json:"top_logprobs"`
		} `json:"content"`
	}
	if err := json.Unmarshal(c.Choices[0].Logprobs, &clp); err != nil {
		t.Fatal(err)
	}
	if len(clp.Content) != 6 {
		t.Fatalf("chat logprobs: %d entries, want 6", len(clp.Content))
	}
	var raw []byte
	for i, e := range clp.Content {
		for _, x := range e.Bytes {
			raw = append(raw, byte(x))
		}
		if len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Logprob != e.Logprob || e.TopLogprobs[1].Logprob > e.TopLogprobs[0].Logprob || len(e.TopLogprobs[0].Bytes) == 0 {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if got := asJSON(string(raw)); got != c.text() {
		t.Errorf("the tokens' bytes make %q, the content is %q", got, c.text())
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// orderedObject reads a JSON object's keys and number values in order.
func orderedObject(t *testing.T, raw json.RawMessage) ([]string, []float64) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("top_logprobs entry %s is not an object", raw)
	}
	var keys []string
	var vals []float64
	for dec.More() {
		k, _ := dec.Token()
		var v float64
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys, vals = append(keys, k.(string)), append(vals, v)
	}
	return keys, vals
}

// TestEchoScoring: echo with logprobs and max_tokens 0 returns the prompt
// as the text and its tokens' log-probabilities, the first null, equal to
// the engine's PromptLogprobs; with max_tokens > 0 the prompt's entries
// come first, then the generated tokens'.
func TestEchoScoring(t *testing.T) {
	f := newServer(t, serve.Options{})
	const prompt = "the north wind and the sun were disputing"
	ids := f.e.Model().Tokenizer.Encode(prompt, true)
	res := engineRun(t, f.e, engine.Request{Prompt: ids, MaxTokens: 0, PromptLogprobs: true})

	code, _, b := f.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 0, "echo": true, "logprobs": 0})
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	c := decode(t, b)
	var lp struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	json.Unmarshal(c.Choices[0].Logprobs, &lp)
	if c.text() != prompt || c.Usage.CompletionTokens != 0 || c.Usage.PromptTokens != len(ids) || c.finish() != "length" {
		t.Errorf("echo: text %q, usage %+v, finish %s", c.text(), c.Usage, c.finish())
	}
	if len(lp.TokenLogprobs) != len(ids) || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil || len(lp.TextOffset) != len(ids) {
		t.Fatalf("echo logprobs: %d entries (first %v), want %d with the first null", len(lp.TokenLogprobs), lp.TokenLogprobs[0], len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if got := lp.TokenLogprobs[i]; got == nil || float32(*got) != res.PromptLogprobs[i] {
			t.Errorf("prompt token %d: %v, engine %g", i, got, res.PromptLogprobs[i])
		}
	}
	if strings.Join(lp.Tokens, "") != prompt {
		t.Errorf("echoed tokens %q do not make the prompt", lp.Tokens)
	}

	_, _, b = f.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 4, "echo": true, "logprobs": 1, "temperature": 0, "ignore_eos": true})
	c = decode(t, b)
	json.Unmarshal(c.Choices[0].Logprobs, &lp)
	if len(lp.Tokens) != len(ids)+4 || !strings.HasPrefix(c.text(), prompt) || lp.TextOffset[len(ids)] != len(prompt) {
		t.Errorf("echo with generation: %d entries, text %q, offset of the first generated %d", len(lp.Tokens), c.text(), lp.TextOffset[len(ids)])
	}
	for i := 1; i < len(ids); i++ {
		if float32(*lp.TokenLogprobs[i]) != res.PromptLogprobs[i] {
			t.Errorf("prompt token %d with generation: %g, engine %g", i, *lp.TokenLogprobs[i], res.PromptLogprobs[i])
		}
	}
	if math.IsNaN(*lp.TokenLogprobs[len(ids)]) {
		t.Errorf("generated token without a log-probability")
	}

	// logprobs 3: each prompt token's top_logprobs hold the three
	// likeliest tokens there and the token itself, as vLLM's
	// prompt_logprobs.
	_, _, b = f.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 0, "echo": true, "logprobs": 3})
	c = decode(t, b)
	lp.TopLogprobs = nil
	json.Unmarshal(c.Choices[0].Logprobs, &lp)
	top := engineRun(t, f.e, engine.Request{Prompt: ids, MaxTokens: 0, PromptLogprobs: true, PromptTopLogprobs: 3})
	for i := 1; i < len(ids); i++ {
		m := lp.TopLogprobs[i]
		// (alternatives whose bytes JSON writes as the same replacement
		// character count once)
		if v, ok := m[lp.Tokens[i]]; !ok || float32(v) > top.PromptTop[i][0].Logprob || len(m) < 2 || len(m) > 4 {
			t.Errorf("prompt token %d: top_logprobs %v, want up to 3 alternatives and %q", i, m, lp.Tokens[i])
		}
		best := math.Inf(-1)
		for _, v := range m {
			best = math.Max(best, v)
		}
		if float32(best) != top.PromptTop[i][0].Logprob {
			t.Errorf("prompt token %d: best alternative %g, engine %g", i, best, top.PromptTop[i][0].Logprob)
		}
	}
}

// TestStop: a stop string cuts the text before its first occurrence,
// finish_reason stop and stop_reason the string, the same streamed; the
// cancelled engine request frees its sequence. With
// include_stop_str_in_output the text keeps the stop string.
func TestStop(t *testing.T) {
	f := newServer(t, serve.Options{})
	base := map[string]any{"prompt": "once upon a time", "max_tokens": 60, "temperature": 0, "ignore_eos": true}
	_, _, b := f.post(t, "/v1/completions", base)
	full := decode(t, b).text()
	// A stop string of two ASCII letters from the middle of the text (the
	// random model's text is mostly other bytes).
	stop, at := "", -1
	for i := len(full) / 3; i+2 <= len(full); i++ {
		s := full[i : i+2]
		if s[0] > ' ' && s[0] < 0x7f && s[1] > ' ' && s[1] < 0x7f {
			stop, at = s, strings.Index(full, s)
			break
		}
	}
	if at <= 0 {
		t.Fatalf("no ASCII pair in %q to stop at", full)
	}
	for i := range 4 {
		stream, include := i%2 == 1, i >= 2
		req := map[string]any{"stop": []string{"\x00never", stop}, "stream": stream}
		if include {
			req["include_stop_str_in_output"] = true
		}
		want := full[:at]
		if include {
			want = full[:at+len(stop)]
		}
		for k, v := range base {
			req[k] = v
		}
		_, _, b := f.post(t, "/v1/completions", req)
		var text, finish, reason string
		var usageTokens int
		if stream {
			chunks := sse(t, b)
			for _, ch := range chunks {
				text += ch.text()
				if ch.finish() != "" {
					finish, reason = ch.finish(), *ch.Choices[0].StopReason
				}
			}
		} else {
			c := decode(t, b)
			text, finish, usageTokens = c.text(), c.finish(), c.Usage.CompletionTokens
			if c.Choices[0].StopReason != nil {
				reason = *c.Choices[0].StopReason
			}
			if usageTokens >= 60 || usageTokens == 0 {
				t.Errorf("stopped after %d tokens", usageTokens)
			}
		}
		if text != want || finish != "stop" || reason != stop {
			t.Errorf("stream %v, include %v, stop %q: text %q (%s, %q), want %q", stream, include, stop, text, finish, reason, want)
		}
	}
	waitIdle(t, f.e)
}

// TestModels: the list holds the name and NAME@CACHE per cache, each
// retrievable; an unknown id is a 404.
func TestModels(t *testing.T) {
	f := newServer(t, serve.Options{})
	code, _, b := f.get(t, "/v1/models")
	var l struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
			Cache   string `json:"kvq_cache"`
			MaxLen  int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &l); err != nil || code != 200 || l.Object != "list" {
		t.Fatalf("models: %d %s", code, b)
	}
	var ids []string
	for _, d := range l.Data {
		ids = append(ids, d.ID)
		if d.Object != "model" || d.OwnedBy == "" || d.MaxLen != 512 {
			t.Errorf("model entry %+v", d)
		}
	}
	if want := []string{"tiny", "tiny@fp16", "tiny@int8"}; !slices.Equal(ids, want) || !slices.Equal(f.s.ModelIDs(), want) {
		t.Errorf("model ids %v (ModelIDs %v), want %v", ids, f.s.ModelIDs(), want)
	}
	if l.Data[2].Cache != "int8" {
		t.Errorf("tiny@int8's cache %q", l.Data[2].Cache)
	}
	if code, _, b := f.get(t, "/v1/models/tiny@int8"); code != 200 || !strings.Contains(string(b), `"id":"tiny@int8"`) {
		t.Errorf("GET /v1/models/tiny@int8: %d %s", code, b)
	}
	if code, _, _ := f.get(t, "/v1/models/nope"); code != 404 {
		t.Errorf("GET /v1/models/nope: %d", code)
	}
	if got := serve.DefaultModelName("/models/Llama-3.1-8B/"); got != "Llama-3.1-8B" {
		t.Errorf("DefaultModelName(dir) = %q", got)
	}
	if got := serve.DefaultModelName("/m/stories260K.gguf"); got != "stories260K" {
		t.Errorf("DefaultModelName(gguf) = %q", got)
	}
}

// TestBatch: a list of prompts on /v1/completions returns one choice per
// prompt, in order with its index, each the text the prompt gets alone,
// and the usage summed; streamed, the chunks carry each choice's index.
func TestBatch(t *testing.T) {
	f := newServer(t, serve.Options{})
	prompts := []any{"once upon a time", []int{65, 66, 67}, "the cat"}
	base := map[string]any{"max_tokens": 8, "temperature": 0, "ignore_eos": true}
	var alone []string
	promptTokens := 0
	for _, p := range prompts {
		req := map[string]any{"prompt": p}
		for k, v := range base {
			req[k] = v
		}
		_, _, b := f.post(t, "/v1/completions", req)
		c := decode(t, b)
		alone = append(alone, c.text())
		promptTokens += c.Usage.PromptTokens
	}
	for _, stream := range []bool{false, true} {
		req := map[string]any{"prompt": prompts, "stream": stream}
		if stream {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
		for k, v := range base {
			req[k] = v
		}
		code, _, b := f.post(t, "/v1/completions", req)
		if code != 200 {
			t.Fatalf("stream %v: %d %s", stream, code, b)
		}
		texts := make([]string, len(prompts))
		finishes := 0
		var c completion
		if stream {
			for _, ch := range sse(t, b) {
				for _, cc := range ch.Choices {
					if cc.Index < 0 || cc.Index >= len(prompts) || cc.Text == nil {
						t.Fatalf("chunk choice %+v", cc)
					}
					texts[cc.Index] += *cc.Text
					if cc.FinishReason != nil {
						finishes++
					}
				}
				if ch.Usage != nil {
					c.Usage = ch.Usage
				}
			}
		} else {
			c = decode(t, b)
			if len(c.Choices) != len(prompts) {
				t.Fatalf("%d choices for %d prompts: %s", len(c.Choices), len(prompts), b)
			}
			for i, cc := range c.Choices {
				if cc.Index != i {
					t.Errorf("choice %d has index %d", i, cc.Index)
				}
				texts[i] = *cc.Text
				if cc.FinishReason != nil {
					finishes++
				}
			}
		}
		if !slices.Equal(texts, alone) || finishes != len(prompts) {
			t.Errorf("stream %v: texts %q (%d finished), want %q", stream, texts, finishes, alone)
		}
		if c.Usage == nil || c.Usage.PromptTokens != promptTokens || c.Usage.CompletionTokens != 8*len(prompts) || c.Usage.TotalTokens != promptTokens+8*len(prompts) {
			t.Errorf("stream %v: usage %+v, want %d prompt tokens and %d completion tokens", stream, c.Usage, promptTokens, 8*len(prompts))
		}
	}
	// One prompt of the batch too long names its index.
	long := make([]int, 600)
	for i := range long {
		long[i] = 65
	}
	code, _, b := f.post(t, "/v1/completions", map[string]any{"prompt": []any{[]int{65}, long}})
	wantError(t, "batch with a long prompt", code, b, 400, "invalid_request_error", "context_length_exceeded", "prompt", "prompt[1]")
	code, _, b = f.post(t, "/v1/completions", map[string]any{"prompt": []any{"a", 3}})
	wantError(t, "batch of mixed items", code, b, 400, "invalid_request_error", "invalid_type", "prompt", "prompt[1]")
	waitIdle(t, f.e)
}
