package serve_test

import (
	"encoding/json"
	"testing"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// hermesTemplate renders tools and tool calls as Hermes and Qwen do.
const hermesTemplate = `{{ bos_token }}{% if tools %}<|system|><tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>{% endif %}` +
	`{% for m in messages %}<|{{ m.role }}|>{% if m.content %}{{ m.content }}{% endif %}` +
	`{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% endif %}` +
	`{% if m.tool_call_id %}[{{ m.tool_call_id }}]{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}`

// TestTools: tools are rendered through the model's chat template (so
// is a conversation's tool_calls, arguments sent as a JSON string, and a
// tool result's tool_call_id); tool_choice "none" renders them too;
// responses are read for calls, streamed the same; what needs
// constrained decoding is refused.
func TestTools(t *testing.T) {
	m := loadModel(t)
	m.ChatTemplate = hermesTemplate
	f := start(t, startEngine(t, m, engine.Options{Chunk: 32}), serve.Options{})
	const tools = `[{"type": "function", "function": {"name": "weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]`
	user := []chat.Message{{Role: "user", Content: "Weather in Paris?"}}
	promptLen := func(msgs []chat.Message, extra map[string]any) int {
		t.Helper()
		ids, _, err := m.ChatPromptExtra(msgs, extra)
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	plain := promptLen(user, nil)
	withTools := promptLen(user, map[string]any{"tools": json.RawMessage(tools)})
	if withTools <= plain {
		t.Fatalf("the template does not render tools: %d ≤ %d tokens", withTools, plain)
	}
	ask := `{"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 12, "temperature": 0, "ignore_eos": true`
	var texts []string
	for _, tc := range []struct {
		name, extra string
		want        int
	}{
		{"no tools", ``, plain},
		{"tools", `, "tools": ` + tools, withTools},
		{"tools, tool_choice auto", `, "tools": ` + tools + `, "tool_choice": "auto"`, withTools},
		{"tools, tool_choice none", `, "tools": ` + tools + `, "tool_choice": "none"`, withTools},
		{"tools, streamed", `, "tools": ` + tools + `, "stream": true, "stream_options": {"include_usage": true}`, withTools},
	} {
		code, _, b := f.post(t, "/v1/chat/completions", ask+tc.extra+`}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.name, code, b)
		}
		var c completion
		text := ""
		if tc.name == "tools, streamed" {
			for _, ch := range sse(t, b) {
				text += ch.text()
				if ch.Usage != nil {
					c.Usage = ch.Usage
				}
			}
		} else {
			c = decode(t, b)
			text = c.text()
			if c.finish() != "length" {
				t.Errorf("%s: finish %q (the random model writes no call)", tc.name, c.finish())
			}
		}
		if c.Usage == nil || c.Usage.PromptTokens != tc.want {
			t.Errorf("%s: usage %+v, want %d prompt tokens", tc.name, c.Usage, tc.want)
		}
		texts = append(texts, text)
	}
	for i := 2; i < len(texts); i++ {
		if texts[i] != texts[1] {
			t.Errorf("response %d %q differs from %q", i, texts[i], texts[1])
		}
	}
	// A conversation with a call and its result: the arguments string is
	// decoded for the template, as vLLM does.
	conv := []chat.Message{
		user[0],
		{Role: "assistant", Fields: map[string]any{"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "weather", "arguments": map[string]any{"city": "Paris"}}}}}},
		{Role: "tool", Content: "sunny", Fields: map[string]any{"tool_call_id": "c1"}},
	}
	want := promptLen(conv, map[string]any{"tools": json.RawMessage(tools)})
	body := `{"messages": [{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "content": "sunny", "tool_call_id": "c1"}], "tools": ` + tools + `, "max_tokens": 1}`
	code, _, b := f.post(t, "/v1/chat/completions", body)
	if c := decode(t, b); code != 200 || c.Usage == nil || c.Usage.PromptTokens != want {
		t.Errorf("conversation with a call: %d %s, want %d prompt tokens", code, b, want)
	}
	for _, tc := range []struct {
		name, extra, code, param string
		words                    []string
	}{
		{"tool_choice required", `, "tools": ` + tools + `, "tool_choice": "required"`, "invalid_value", "tool_choice", []string{"required", "not supported"}},
		{"tool_choice named", `, "tools": ` + tools + `, "tool_choice": {"type": "function", "function": {"name": "weather"}}`, "invalid_value", "tool_choice", []string{"not supported"}},
		{"tool_choice unknown", `, "tool_choice": "sometimes"`, "invalid_value", "tool_choice", nil},
		{"tools not a list", `, "tools": {"type": "function"}`, "invalid_type", "tools", nil},
		{"tool of another type", `, "tools": [{"type": "retrieval"}]`, "invalid_value", "tools", []string{"function"}},
		{"tool without a name", `, "tools": [{"type": "function", "function": {}}]`, "invalid_value", "tools", []string{"name"}},
	} {
		code, _, b := f.post(t, "/v1/chat/completions", ask+tc.extra+`}`)
		wantError(t, tc.name, code, b, 400, "invalid_request_error", tc.code, tc.param, tc.words...)
	}
	code, _, b = f.post(t, "/v1/chat/completions", `{"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{"}}]}]}`)
	wantError(t, "call arguments not JSON", code, b, 400, "invalid_request_error", "invalid_value", "messages", "arguments")
	waitIdle(t, f.e)
}
