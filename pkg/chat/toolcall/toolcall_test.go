package toolcall

import (
	"encoding/json"
	"testing"
)

// canon is v as JSON with sorted keys (numbers as written).
func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func canonText(t *testing.T, s string) string {
	t.Helper()
	v, err := decodeOne(s)
	if err != nil {
		t.Fatal(err)
	}
	return canon(t, v)
}

func TestFirst(t *testing.T) {
	args := `{"city": "Paris", "unit": "c"}`
	tests := []struct {
		name, in string
		wantName string
		wantArgs string // JSON; "" means an error is expected
	}{
		{"plain arguments", `{"name": "weather", "arguments": ` + args + `}`, "weather", args},
		{"plain parameters", `{"name": "weather", "parameters": ` + args + `}`, "weather", args},
		{"llama python_tag", `<|python_tag|>{"name": "weather", "parameters": ` + args + `}<|eom_id|>`, "weather", args},
		{"hermes tool_call", "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": " + args + "}\n</tool_call>", "weather", args},
		{"mistral list", `[TOOL_CALLS] [{"name": "weather", "arguments": ` + args + `}, {"name": "other", "arguments": {}}]`, "weather", args},
		{"mistral v11", `[TOOL_CALLS]weather[ARGS]` + args, "weather", args},
		{"array first call", `[{"name": "weather", "arguments": ` + args + `}, {"name": "b"}]`, "weather", args},
		{"fenced", "```json\n{\"name\": \"weather\", \"arguments\": " + args + "}\n```", "weather", args},
		{"prose with brackets first", `I [think] this: {"name": "weather", "arguments": ` + args + `}`, "weather", args},
		{"openai wrapper, string arguments", `{"type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}`, "weather", args},
		{"no arguments", `{"name": "now"}`, "now", `{}`},
		{"null arguments", `{"name": "now", "arguments": null}`, "now", `{}`},
		{"no JSON", `call weather(Paris)`, "", ""},
		{"no name", `{"arguments": {}}`, "", ""},
		{"empty list", `[]`, "", ""},
		{"bad arguments string", `{"name": "f", "arguments": "{"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := First(tt.in)
			if tt.wantArgs == "" {
				if err == nil {
					t.Errorf("First(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got.Name != tt.wantName || canon(t, got.Arguments) != canonText(t, tt.wantArgs) {
				t.Errorf("First(%q) = %q %s, %v, want %q %s", tt.in, got.Name, shortJSON(got.Arguments), err, tt.wantName, tt.wantArgs)
			}
		})
	}
}

// TestParse: every call of a response in its family's form, the text
// before them as content; malformed or absent calls leave the text alone.
func TestParse(t *testing.T) {
	args := `{"city": "Paris", "n": 2}`
	tests := []struct {
		name    string
		f       Family
		in      string
		calls   []string // name + " " + canonical arguments
		content string
	}{
		{"hermes two", Hermes, "Checking.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": " + args + "}\n</tool_call>\n<tool_call>{\"name\": \"now\"}</tool_call>", []string{`weather {"city":"Paris","n":2}`, `now {}`}, "Checking.\n"},
		{"hermes unclosed", Hermes, `<tool_call>{"name": "now", "arguments": {}}`, []string{`now {}`}, ""},
		{"hermes malformed is text", Hermes, `<tool_call>{"name": "now", </tool_call>`, nil, `<tool_call>{"name": "now", </tool_call>`},
		{"hermes none", Hermes, `Paris is sunny.`, nil, `Paris is sunny.`},
		{"llama tag", Llama, `<|python_tag|>{"name": "weather", "parameters": ` + args + `}<|eom_id|>`, []string{`weather {"city":"Paris","n":2}`}, ""},
		{"llama bare two", Llama, ` {"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}`, []string{`a {}`, `b {"x":1}`}, ""},
		{"llama prose is text", Llama, `The call is {"name": "a"}`, nil, `The call is {"name": "a"}`},
		{"llama object without name is text", Llama, `{"answer": 4}`, nil, `{"answer": 4}`},
		{"mistral list", Mistral, `Sure. [TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]`, []string{`a {"x":1}`, `b {}`}, "Sure. "},
		{"mistral v11", Mistral, `[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}`, []string{`a {"x":1}`, `b {}`}, ""},
		{"unknown family: hermes marker", "", `<tool_call>{"name": "a", "arguments": {}}</tool_call>`, []string{`a {}`}, ""},
		{"unknown family: mistral marker", "", `[TOOL_CALLS][{"name": "a", "arguments": {}}]`, []string{`a {}`}, ""},
		{"unknown family: bare JSON", "", `{"name": "a", "arguments": {"x": 1}}`, []string{`a {"x":1}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, content := Parse(tt.f, tt.in)
			var got []string
			for _, c := range calls {
				got = append(got, c.Name+" "+canon(t, c.Arguments))
			}
			if len(got) != len(tt.calls) || content != tt.content {
				t.Fatalf("Parse(%s, %q) = %q, content %q; want %q, %q", tt.f, tt.in, got, content, tt.calls, tt.content)
			}
			for i := range got {
				if got[i] != tt.calls[i] {
					t.Errorf("Parse(%s, %q) call %d = %s, want %s", tt.f, tt.in, i, got[i], tt.calls[i])
				}
			}
		})
	}
}

func TestDetect(t *testing.T) {
	for tmpl, want := range map[string]Family{
		`{{- '<tool_call>\n' }}{{ tool_call | tojson }}`:      Hermes,
		`{{- '[TOOL_CALLS]' + tool_calls | tojson }}`:         Mistral,
		`{%- if builtin_tools %}<|python_tag|>{% endif %}`:    Llama,
		`{%- for m in messages %}{{ m.content }}{% endfor %}`: "",
	} {
		if got := Detect(tmpl); got != want {
			t.Errorf("Detect(%q) = %q, want %q", tmpl, got, want)
		}
	}
}
