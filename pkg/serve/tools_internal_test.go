package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/chat/toolcall"
)

// TestToolHold: streamed in any pieces, the content sent is the text
// before the calls, none of a call's text goes out as content, the calls
// come whole at the end, and a text without calls goes out unchanged.
func TestToolHold(t *testing.T) {
	tests := []struct {
		name    string
		f       toolcall.Family
		text    string
		content string
		calls   []string // name + " " + arguments
	}{
		{"hermes", toolcall.Hermes, "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\", \"n\": 2}}\n</tool_call>", "Let me check.\n", []string{`weather {"city":"Paris","n":2}`}},
		{"hermes two", toolcall.Hermes, `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": "é"}}</tool_call>`, "", []string{`a {}`, `b {"x":"é"}`}},
		{"hermes text with a tag-like word", toolcall.Hermes, "use a <tool> or <tool_c and more", "use a <tool> or <tool_c and more", nil},
		{"hermes malformed call is text", toolcall.Hermes, `ok <tool_call>{"name": </tool_call>`, `ok <tool_call>{"name": </tool_call>`, nil},
		{"llama bare", toolcall.Llama, ` {"name": "a", "parameters": {"q": 1}}`, "", []string{`a {"q":1}`}},
		{"llama python_tag", toolcall.Llama, `<|python_tag|>{"name": "a", "parameters": {}}`, "", []string{`a {}`}},
		{"llama prose", toolcall.Llama, `Paris is {sunny}.`, `Paris is {sunny}.`, nil},
		{"mistral", toolcall.Mistral, `Sure [TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}]`, "Sure ", []string{`a {"x":1}`}},
		{"unknown family, JSON that is no call", "", `{"answer": 4}`, `{"answer": 4}`, nil},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 3, 7, 1000} {
			h := &toolHold{f: tt.f}
			var sent strings.Builder
			for i := 0; i < len(tt.text); i += size {
				piece := h.push(tt.text[i:min(i+size, len(tt.text))])
				if len(tt.calls) > 0 && strings.ContainsAny(piece, "{<[") {
					t.Errorf("%s, pieces of %d: call text %q sent as content", tt.name, size, piece)
				}
				sent.WriteString(piece)
			}
			rest, calls := h.end()
			sent.WriteString(rest)
			var got []string
			for _, c := range calls {
				b, _ := json.Marshal(c.Arguments)
				got = append(got, c.Name+" "+string(b))
			}
			if sent.String() != tt.content || strings.Join(got, "|") != strings.Join(tt.calls, "|") {
				t.Errorf("%s, pieces of %d: content %q, calls %q; want %q, %q", tt.name, size, sent.String(), got, tt.content, tt.calls)
			}
		}
	}
}

// TestToolCallsOut: calls go out as OpenAI's tool_calls: a fresh id each,
// type function, the arguments as JSON text (numbers as written, no HTML
// escapes), an index only in a delta.
func TestToolCallsOut(t *testing.T) {
	s := &Server{idBase: "x"}
	calls, _ := toolcall.Parse(toolcall.Hermes, `<tool_call>{"name": "f", "arguments": {"n": 1.50, "s": "<a&b>"}}</tool_call><tool_call>{"name": "g"}</tool_call>`)
	out := s.toolCalls(calls, false)
	b, err := marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"chatcmpl-tool-x1","type":"function","function":{"name":"f","arguments":"{\"n\":1.50,\"s\":\"<a&b>\"}"}},{"id":"chatcmpl-tool-x2","type":"function","function":{"name":"g","arguments":"{}"}}]`
	if string(b) != want {
		t.Errorf("tool_calls\n%s\nwant\n%s", b, want)
	}
	if got := (&job{one: true}).firstCalls(calls); len(got) != 1 || got[0].Name != "f" {
		t.Errorf("parallel_tool_calls false kept %+v", got)
	}
	if got := (&job{}).firstCalls(calls); len(got) != 2 {
		t.Errorf("parallel tool calls: kept %+v", got)
	}
	d := s.toolCalls(calls, true)
	if d[0].Index == nil || *d[0].Index != 0 || d[1].Index == nil || *d[1].Index != 1 {
		t.Errorf("delta indexes %v %v", d[0].Index, d[1].Index)
	}
}
