package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"

	"github.com/kvqlabs/kvq/pkg/chat"
)

// apiError is an error response: OpenAI's {"error": {...}} with a status.
type apiError struct {
	status              int
	message, typ, param string
	code                string
}

func (e *apiError) Error() string { return e.message }

// Error types and codes of the responses.
const (
	typeInvalid = "invalid_request_error"
	typeAuth    = "authentication_error"
	typeLimit   = "rate_limit_error"
	typeServer  = "server_error"
)

func badParam(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), typ: typeInvalid, param: param, code: "invalid_value"}
}

// streamOptions are OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// sampling holds the fields both endpoints share. Pointers tell a field
// given (even as null) from a field absent only where the default
// depends on it.
type sampling struct {
	Model            string          `json:"model"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	Seed             *int64          `json:"seed"`
	Stop             json.RawMessage `json:"stop"`
	Stream           bool            `json:"stream"`
	StreamOptions    *streamOptions  `json:"stream_options"`
	N                *int            `json:"n"`
	BestOf           *int            `json:"best_of"`
	IgnoreEOS        bool            `json:"ignore_eos"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	LogitBias        map[string]any  `json:"logit_bias"`
	MaxTokens        *int            `json:"max_tokens"`
	// IncludeStop keeps the stop string that ended a response in its
	// text (vLLM's include_stop_str_in_output).
	IncludeStop    bool            `json:"include_stop_str_in_output"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	sampling
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   json.RawMessage `json:"suffix"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// The keys of a tool-calling conversation, passed to the template.
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
	Name       json.RawMessage `json:"name"`
}

// decodeJSON parses a request body into v. Unknown fields are ignored, as
// OpenAI and vLLM do; a field of the wrong type is an error naming it.
func decodeJSON(body []byte, v any) *apiError {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ) && typ.Field == "":
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("the request body must be a JSON object, not %s", typ.Value), typ: typeInvalid, code: "invalid_json"}
	case errors.As(err, &typ):
		// The path names the embedded struct sampling by its Go name.
		field := strings.TrimPrefix(typ.Field, "sampling.")
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("%s: expected %s, got %s", field, jsonKind(typ.Type), typ.Value), typ: typeInvalid, param: field, code: "invalid_type"}
	case errors.As(err, &syn):
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err), typ: typeInvalid, code: "invalid_json"}
	case len(bytes.TrimSpace(body)) == 0:
		return &apiError{status: http.StatusBadRequest, message: "empty request body: expected a JSON object", typ: typeInvalid, code: "invalid_json"}
	default:
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("malformed JSON: %v", err), typ: typeInvalid, code: "invalid_json"}
	}
}

// jsonKind names a Go type as the JSON value it decodes.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func isNull(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

// prompt is a completion's prompt: text, or token ids.
type prompt struct {
	text string
	ids  []int
	isID bool
}

// parsePrompts reads prompt: a string, an array of token ids, or an
// array of either (a batch: one choice per prompt, as vLLM answers it).
func parsePrompts(raw json.RawMessage) ([]prompt, *apiError) {
	if isNull(raw) {
		return nil, badParam("prompt", "prompt: required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []prompt{{text: s}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, &apiError{status: http.StatusBadRequest, message: "prompt: expected a string or an array of token ids", typ: typeInvalid, param: "prompt", code: "invalid_type"}
	}
	if len(items) == 0 {
		return nil, badParam("prompt", "prompt: empty array")
	}
	first := bytes.TrimSpace(items[0])
	if len(first) == 0 || (first[0] != '"' && first[0] != '[') {
		p, e := parseIDs(raw)
		if e != nil {
			return nil, e
		}
		return []prompt{p}, nil
	}
	out := make([]prompt, len(items))
	for i, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && it[0] == '"':
			if json.Unmarshal(it, &out[i].text) != nil {
				return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("prompt[%d]: malformed string", i), typ: typeInvalid, param: "prompt", code: "invalid_type"}
			}
		case len(it) > 0 && it[0] == '[':
			p, e := parseIDs(it)
			if e != nil {
				e.message = fmt.Sprintf("prompt[%d]: %s", i, strings.TrimPrefix(e.message, "prompt: "))
				return nil, e
			}
			out[i] = p
		default:
			return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("prompt[%d]: expected a string or an array of token ids, as prompt[0], got %s", i, truncate(string(it), 40)), typ: typeInvalid, param: "prompt", code: "invalid_type"}
		}
	}
	return out, nil
}

func parseIDs(raw json.RawMessage) (prompt, *apiError) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return prompt{}, &apiError{status: http.StatusBadRequest, message: "prompt: expected an array of token ids", typ: typeInvalid, param: "prompt", code: "invalid_type"}
	}
	if len(items) == 0 {
		return prompt{}, badParam("prompt", "prompt: empty array")
	}
	ids := make([]int, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &ids[i]); err != nil {
			return prompt{}, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("prompt[%d]: expected an integer token id, got %s", i, truncate(string(it), 40)), typ: typeInvalid, param: "prompt", code: "invalid_type"}
		}
	}
	return prompt{ids: ids, isID: true}, nil
}

// parseStop reads stop: null, a string, or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, &apiError{status: http.StatusBadRequest, message: "stop: expected a string or an array of strings", typ: typeInvalid, param: "stop", code: "invalid_type"}
	}
	return list, nil
}

// parseMessages reads the chat messages: a role, and content as a string,
// null, or an array of {"type": "text", "text": ...} parts.
func parseMessages(msgs []chatMessage) ([]chat.Message, *apiError) {
	if len(msgs) == 0 {
		return nil, badParam("messages", "messages: at least one message is required")
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return nil, badParam("messages", "messages[%d].role: required", i)
		}
		out[i].Role = m.Role
		fields, e := messageFields(i, m)
		if e != nil {
			return nil, e
		}
		out[i].Fields = fields
		if isNull(m.Content) {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out[i].Content = s
			continue
		}
		var parts []struct {
			Type string          `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].content: expected a string or an array of content parts", i), typ: typeInvalid, param: "messages", code: "invalid_type"}
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "text" {
				return nil, badParam("messages", "messages[%d].content[%d].type %q: only text parts are supported", i, j, p.Type)
			}
			var t string
			if json.Unmarshal(p.Text, &t) != nil {
				return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].content[%d].text: expected a string", i, j), typ: typeInvalid, param: "messages", code: "invalid_type"}
			}
			if j > 0 {
				b.WriteString("\n") // as vLLM joins text parts
			}
			b.WriteString(t)
		}
		out[i].Content = b.String()
	}
	return out, nil
}

// messageFields are a message's tool_calls, tool_call_id and name for
// the template. Arguments given as a JSON string, as OpenAI sends them,
// are decoded to an object, as vLLM does: templates write them with
// tojson.
func messageFields(i int, m chatMessage) (map[string]any, *apiError) {
	var f map[string]any
	set := func(k string, v any) {
		if f == nil {
			f = map[string]any{}
		}
		f[k] = v
	}
	if !isNull(m.ToolCallID) {
		set("tool_call_id", m.ToolCallID)
	}
	if !isNull(m.Name) {
		set("name", m.Name)
	}
	if isNull(m.ToolCalls) {
		return f, nil
	}
	dec := json.NewDecoder(bytes.NewReader(m.ToolCalls))
	dec.UseNumber()
	var calls []map[string]any
	if dec.Decode(&calls) != nil {
		return nil, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("messages[%d].tool_calls: expected an array of objects", i), typ: typeInvalid, param: "messages", code: "invalid_type"}
	}
	list := make([]any, len(calls))
	for k, c := range calls {
		if fn, ok := c["function"].(map[string]any); ok {
			if a, ok := fn["arguments"].(string); ok {
				d := json.NewDecoder(strings.NewReader(a))
				d.UseNumber()
				var v any
				if d.Decode(&v) != nil {
					return nil, badParam("messages", "messages[%d].tool_calls[%d].function.arguments: not JSON", i, k)
				}
				fn["arguments"] = v
			}
		}
		list[k] = c
	}
	set("tool_calls", list)
	return f, nil
}

// tools are a chat request's tools, checked: the template variable, and
// whether the response is read for calls.
type tools struct {
	extra map[string]any // {"tools": [...]}, or nil
	parse bool           // tool_choice "auto" with tools
	one   bool           // parallel_tool_calls false: the first call only
}

// parseTools reads tools (an array of {"type": "function", "function":
// {"name", ...}}) and tool_choice. "auto" (the default with tools) reads
// the response for calls; "none" renders the tools and reads no calls;
// "required" and a named function need constrained decoding, which this
// server does not have: they are refused.
func parseTools(raw, choice json.RawMessage) (tools, *apiError) {
	var t tools
	mode := ""
	if !isNull(choice) {
		if json.Unmarshal(choice, &mode) != nil {
			var named struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(choice, &named) != nil {
				return t, &apiError{status: http.StatusBadRequest, message: `tool_choice: expected "none", "auto", "required" or an object`, typ: typeInvalid, param: "tool_choice", code: "invalid_type"}
			}
			return t, badParam("tool_choice", "tool_choice naming a function: not supported (it needs constrained decoding, which this server does not have; use \"auto\")")
		}
		switch mode {
		case "none", "auto":
		case "required":
			return t, badParam("tool_choice", "tool_choice \"required\": not supported (it needs constrained decoding, which this server does not have; use \"auto\")")
		default:
			return t, badParam("tool_choice", "tool_choice %q: expected \"none\", \"auto\" or \"required\"", mode)
		}
	}
	if isNull(raw) {
		return t, nil
	}
	var list []struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return t, &apiError{status: http.StatusBadRequest, message: `tools: expected an array of {"type": "function", "function": {...}}`, typ: typeInvalid, param: "tools", code: "invalid_type"}
	}
	for i, tl := range list {
		switch {
		case tl.Type != "function":
			return t, badParam("tools", "tools[%d].type %q: only \"function\" tools are supported", i, tl.Type)
		case tl.Function == nil || tl.Function.Name == "":
			return t, badParam("tools", "tools[%d].function.name: required", i)
		}
	}
	if len(list) == 0 {
		return t, nil
	}
	return tools{extra: map[string]any{"tools": raw}, parse: mode != "none"}, nil
}

// options is what a request asks of the sampler and the stream, checked.
type options struct {
	temperature, topP float64
	seed              uint64
	seeded            bool
	stops             []string
	stream, usage     bool
	includeStop       bool
}

// check validates the shared fields.
func (s *sampling) check() (options, *apiError) {
	o := options{temperature: 1, topP: 1, stream: s.Stream, includeStop: s.IncludeStop}
	if s.StreamOptions != nil {
		if !s.Stream {
			// As vLLM: stream_options without stream is a mistake.
			return o, badParam("stream_options", "stream_options: only with stream true")
		}
		o.usage = s.StreamOptions.IncludeUsage
	}
	if e := checkResponseFormat(s.ResponseFormat); e != nil {
		return o, e
	}
	if s.Temperature != nil {
		o.temperature = *s.Temperature
	}
	if s.TopP != nil {
		o.topP = *s.TopP
	}
	switch {
	case math.IsNaN(o.temperature) || math.IsInf(o.temperature, 0) || o.temperature < 0:
		return o, badParam("temperature", "temperature %v: must be a finite number ≥ 0", o.temperature)
	case !(o.topP > 0 && o.topP <= 1):
		return o, badParam("top_p", "top_p %v: must be in (0, 1]", o.topP)
	case s.N != nil && *s.N != 1:
		return o, badParam("n", "n %d: this server returns one choice per request (n 1)", *s.N)
	case s.BestOf != nil && *s.BestOf != 1:
		return o, badParam("best_of", "best_of %d: not supported (only 1)", *s.BestOf)
	case s.PresencePenalty != nil && *s.PresencePenalty != 0:
		return o, badParam("presence_penalty", "presence_penalty: not supported (only 0)")
	case s.FrequencyPenalty != nil && *s.FrequencyPenalty != 0:
		return o, badParam("frequency_penalty", "frequency_penalty: not supported (only 0)")
	case len(s.LogitBias) > 0:
		return o, badParam("logit_bias", "logit_bias: not supported")
	case s.MaxTokens != nil && *s.MaxTokens < 0:
		return o, badParam("max_tokens", "max_tokens %d: must be ≥ 0", *s.MaxTokens)
	}
	if s.Seed != nil {
		o.seed, o.seeded = uint64(*s.Seed), true
	}
	stops, err := parseStop(s.Stop)
	if err != nil {
		return o, err
	}
	o.stops = stops
	return o, nil
}

// checkResponseFormat accepts response_format null or {"type": "text"}:
// this server has no constrained decoding, so json_object and json_schema
// are refused rather than ignored.
func checkResponseFormat(raw json.RawMessage) *apiError {
	if isNull(raw) {
		return nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return &apiError{status: http.StatusBadRequest, message: `response_format: expected an object {"type": ...}`, typ: typeInvalid, param: "response_format", code: "invalid_type"}
	}
	switch f.Type {
	case "text":
		return nil
	case "json_object", "json_schema", "structural_tag":
		return badParam("response_format", "response_format type %q: not supported (this server has no constrained decoding; only \"text\")", f.Type)
	}
	return badParam("response_format", "response_format type %q: unknown (only \"text\" is supported)", f.Type)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
