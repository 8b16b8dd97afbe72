// Package toolcall reads the function calls a chat model writes in its
// output, in the forms of the families whose templates render tools:
// Hermes and Qwen ("<tool_call>{...}</tool_call>"), Llama 3.1 (a JSON
// object {"name": ..., "parameters": {...}}, after "<|python_tag|>" or
// alone) and Mistral ("[TOOL_CALLS] [{...}]", "[TOOL_CALLS]name[ARGS]{...}").
//
// First is lenient, for scoring (pkg/eval's tool-call metric): it finds
// the first call anywhere in a text. Parse is strict, for serving (as
// vLLM's tool parsers): it reads every call of a response in its family's
// form and tells the calls from the text around them.
package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Call is a function call: its name and its arguments, decoded JSON with
// numbers as json.Number ({} when the call has none).
type Call struct {
	Name      string
	Arguments any
}

// First reads the first function call in s in any of these forms: a JSON
// object {"name": ..., "arguments": {...}} (or "parameters", as Llama 3.1
// writes it; an OpenAI-style {"function": {"name", "arguments"}} wrapper,
// and arguments given as a JSON string, are unwrapped); the same after
// Llama 3.1's "<|python_tag|>"; Qwen/Hermes "<tool_call>{...}</tool_call>";
// Mistral "[TOOL_CALLS] [{...}]" and "[TOOL_CALLS]name[ARGS]{...}"; a JSON
// array of calls (its first); any of these inside a ``` fence or after
// leading prose. Missing or null arguments are {}.
func First(s string) (Call, error) {
	s = strings.TrimSpace(s)
	if _, rest, ok := strings.Cut(s, "<tool_call>"); ok {
		s, _, _ = strings.Cut(rest, "</tool_call>")
	} else if _, rest, ok := strings.Cut(s, "<|python_tag|>"); ok {
		s = rest
	} else if _, rest, ok := strings.Cut(s, "[TOOL_CALLS]"); ok {
		s = strings.TrimSpace(rest)
		if name, args, ok := strings.Cut(s, "[ARGS]"); ok && !strings.ContainsAny(name, "[{\"") {
			v, err := firstJSON(args)
			if err != nil {
				return Call{}, fmt.Errorf("[TOOL_CALLS]%s[ARGS]: %w", strings.TrimSpace(name), err)
			}
			return Call{Name: strings.TrimSpace(name), Arguments: orEmptyObject(v)}, nil
		}
	}
	v, err := firstJSON(stripFence(s))
	if err != nil {
		return Call{}, err
	}
	if list, ok := v.([]any); ok {
		if len(list) == 0 {
			return Call{}, errors.New("no tool call: empty list of calls")
		}
		v = list[0]
	}
	return fromJSON(v)
}

// Family is a model family's way of writing tool calls.
type Family string

// The families Parse reads.
const (
	Hermes  Family = "hermes"  // Hermes, Qwen 2.5/3: <tool_call>{"name", "arguments"}</tool_call>, one per call
	Llama   Family = "llama3"  // Llama 3.1/3.2: [<|python_tag|>]{"name", "parameters"}, calls separated by ";"
	Mistral Family = "mistral" // Mistral: [TOOL_CALLS] followed by a JSON list of calls, or name[ARGS]{...} per call
)

// Detect returns the family whose tool-call markers a chat template
// writes, or "" when it names none (Parse then tries each form).
func Detect(template string) Family {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes
	case strings.Contains(template, "[TOOL_CALLS]"):
		return Mistral
	case strings.Contains(template, "<|python_tag|>"), strings.Contains(template, "ipython"):
		return Llama
	}
	return ""
}

// Parse reads the calls in a model's response s written in family f's
// form ("": whichever form s starts or marks), and content, the text
// before the first call. When s holds no calls, or a call that does not
// parse, it returns no calls and content s (as vLLM's parsers do: a
// malformed call is text).
func Parse(f Family, s string) (calls []Call, content string) {
	if f == "" {
		switch {
		case strings.Contains(s, "<tool_call>"):
			f = Hermes
		case strings.Contains(s, "[TOOL_CALLS]"):
			f = Mistral
		default:
			f = Llama
		}
	}
	var err error
	switch f {
	case Hermes:
		calls, content, err = parseHermes(s)
	case Mistral:
		calls, content, err = parseMistral(s)
	case Llama:
		calls, err = parseLlama(s)
	}
	if err != nil || len(calls) == 0 {
		return nil, s
	}
	return calls, content
}

// parseHermes reads every <tool_call>{...}</tool_call>; the last may be
// unclosed (the response ended inside it).
func parseHermes(s string) ([]Call, string, error) {
	content, rest, ok := strings.Cut(s, "<tool_call>")
	if !ok {
		return nil, s, nil
	}
	var calls []Call
	for ok {
		var body string
		body, rest, _ = strings.Cut(rest, "</tool_call>")
		v, err := decodeOne(body)
		if err != nil {
			return nil, s, err
		}
		c, err := fromJSON(v)
		if err != nil {
			return nil, s, err
		}
		calls = append(calls, c)
		_, rest, ok = strings.Cut(rest, "<tool_call>")
	}
	return calls, content, nil
}

// parseMistral reads what follows each [TOOL_CALLS]: a JSON list of calls
// (or one call), or name[ARGS]{...}.
func parseMistral(s string) ([]Call, string, error) {
	content, rest, ok := strings.Cut(s, "[TOOL_CALLS]")
	if !ok {
		return nil, s, nil
	}
	var calls []Call
	for _, seg := range strings.Split(rest, "[TOOL_CALLS]") {
		seg = strings.TrimSpace(seg)
		if name, args, ok := strings.Cut(seg, "[ARGS]"); ok && !strings.ContainsAny(name, "[{\"") {
			v, err := decodeOne(args)
			if err != nil {
				return nil, s, err
			}
			calls = append(calls, Call{Name: strings.TrimSpace(name), Arguments: orEmptyObject(v)})
			continue
		}
		dec := jsonDecoder(seg)
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, s, err
		}
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		for _, it := range list {
			c, err := fromJSON(it)
			if err != nil {
				return nil, s, err
			}
			calls = append(calls, c)
		}
	}
	return calls, content, nil
}

// parseLlama reads a response that is calls only: after an optional
// <|python_tag|>, JSON objects separated by ";" (or spaces), and perhaps
// an end token (<|eom_id|>, <|eot_id|>).
func parseLlama(s string) ([]Call, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<|python_tag|>")
	for _, end := range []string{"<|eom_id|>", "<|eot_id|>"} {
		s = strings.TrimSuffix(strings.TrimSpace(s), end)
	}
	if !strings.HasPrefix(strings.TrimSpace(s), "{") {
		return nil, nil
	}
	var calls []Call
	for s = strings.TrimSpace(s); s != ""; {
		dec := jsonDecoder(s)
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		c, err := fromJSON(v)
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
		s = strings.TrimSpace(s[dec.InputOffset():])
		s = strings.TrimSpace(strings.TrimPrefix(s, ";"))
	}
	return calls, nil
}

// decodeOne decodes the one JSON value s holds, spaces around it allowed.
func decodeOne(s string) (any, error) {
	dec := jsonDecoder(s)
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the call (at byte %d)", dec.InputOffset())
	}
	return v, nil
}

// firstJSON decodes the first JSON object or array in s, trying each "{"
// or "[" in turn (at most 64) so that prose before the call is skipped.
func firstJSON(s string) (any, error) {
	var lastErr error
	for tries := 0; tries < 64; tries++ {
		i := strings.IndexAny(s, "{[")
		if i < 0 {
			break
		}
		dec := jsonDecoder(s[i:])
		var v any
		if lastErr = dec.Decode(&v); lastErr == nil {
			return v, nil
		}
		s = s[i+1:]
	}
	if lastErr != nil {
		return nil, fmt.Errorf("no tool call: %w", lastErr)
	}
	return nil, errors.New("no tool call: no JSON object in the text")
}

// fromJSON reads a call from a decoded JSON object.
func fromJSON(v any) (Call, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Call{}, fmt.Errorf("no tool call: %s is not an object", shortJSON(v))
	}
	if f, ok := obj["function"].(map[string]any); ok {
		obj = f
	}
	name, ok := obj["name"].(string)
	if !ok || name == "" {
		return Call{}, fmt.Errorf("no tool call: %s has no \"name\"", shortJSON(obj))
	}
	args, ok := obj["arguments"]
	if !ok {
		args = obj["parameters"]
	}
	if str, ok := args.(string); ok {
		parsed, err := decodeOne(str)
		if err != nil {
			return Call{}, fmt.Errorf("tool call %q: arguments string: not JSON: %w", name, err)
		}
		args = parsed
	}
	return Call{Name: name, Arguments: orEmptyObject(args)}, nil
}

func orEmptyObject(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

// jsonDecoder reads JSON values from s, numbers as json.Number.
func jsonDecoder(s string) *json.Decoder {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec
}

// stripFence removes a ``` or ```json fence around s (as
// eval.StripJSONFence).
func stripFence(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{"```json", "```Json", "```JSON", "```"} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.TrimSpace(strings.TrimSuffix(s, "```"))
}

// shortJSON renders v as compact JSON, cut to 60 bytes.
func shortJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
