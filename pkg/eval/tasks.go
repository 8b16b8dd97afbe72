package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// A tasks file (--tasks FILE.jsonl) holds one task per line, the
// "business replay" and "risk" sets of a rollout:
//
//	{"id": "refund-17", "prompt": "…", "reference": "…", "metric": "f1"}
//	{"messages": [{"role": "user", "content": "…"}], "tools": [...],
//	 "reference": {"name": "lookup", "arguments": {"id": 7}}, "metric": "tool-call"}
//
// Keys: prompt (text, tokenized with the model's BOS) or messages (a chat,
// rendered with the model's chat template, tools included, generation
// prompt appended); reference (a string, or any JSON value for json-exact
// and tool-call); metric (one name or a list, see Metrics); optional id,
// suite (default: the file's base name), max_tokens (default: the
// reference's tokens plus 8, at least 16), schema (json-schema's schema;
// default: the reference), stop_at_newline, until (a list of strings the
// output is cut before, as lm-eval's generation until). Unknown keys, a malformed line,
// an unknown metric, a reference a metric cannot use or a schema that does
// not compile is an error naming the file and line, and nothing runs.

type taskLine struct {
	ID        string            `json:"id"`
	Suite     string            `json:"suite"`
	Prompt    *string           `json:"prompt"`
	Messages  []taskMessage     `json:"messages"`
	Tools     json.RawMessage   `json:"tools"`
	Reference json.RawMessage   `json:"reference"`
	Metric    json.RawMessage   `json:"metric"`
	MaxTokens int               `json:"max_tokens"`
	Schema    json.RawMessage   `json:"schema"`
	Line      bool              `json:"stop_at_newline"`
	Until     []string          `json:"until"`
	Meta      map[string]string `json:"meta"`
}

type taskMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// maxTaskLine is the longest line a tasks file may have.
const maxTaskLine = 64 << 20

// ParseTasks reads a tasks file's bytes; name is the file in errors and
// the default suite name. Every line is checked before any is returned.
func ParseTasks(data []byte, name string) ([]Suite, error) {
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	var order []string
	suites := map[string]*Suite{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), maxTaskLine)
	n, ln := 0, 0
	for sc.Scan() {
		ln++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		t, suite, err := parseTaskLine(text, base)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrTasks, name, ln, err)
		}
		s := suites[suite]
		if s == nil {
			s = &Suite{Name: suite, Kind: "user"}
			suites[suite] = s
			order = append(order, suite)
		}
		t.Index = len(s.Tasks)
		s.Tasks = append(s.Tasks, t)
		n++
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%w: %s:%d: a line longer than %d MiB, the most a task line may hold", ErrTasks, name, ln+1, maxTaskLine>>20)
	} else if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTasks, name, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s has no tasks", ErrTasks, name)
	}
	out := make([]Suite, 0, len(order))
	for _, k := range order {
		out = append(out, *suites[k])
	}
	return out, nil
}

func parseTaskLine(text []byte, base string) (Task, string, error) {
	var l taskLine
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Task{}, "", fmt.Errorf("not a task object: %w", err)
	}
	if dec.More() {
		return Task{}, "", fmt.Errorf("more than one JSON value on the line")
	}
	switch {
	case l.Prompt == nil && len(l.Messages) == 0:
		return Task{}, "", fmt.Errorf(`neither "prompt" nor "messages"`)
	case l.Prompt != nil && len(l.Messages) > 0:
		return Task{}, "", fmt.Errorf(`both "prompt" and "messages"`)
	case len(l.Tools) > 0 && len(l.Messages) == 0:
		return Task{}, "", fmt.Errorf(`"tools" needs "messages" (a chat rendered with the model's template)`)
	case l.MaxTokens < 0 || l.MaxTokens > math.MaxInt32:
		return Task{}, "", fmt.Errorf("max_tokens %d (valid: 0, the reference's length, to %d, the positions kvq addresses)", l.MaxTokens, math.MaxInt32)
	}
	for i, m := range l.Messages {
		if m.Role == "" {
			return Task{}, "", fmt.Errorf("message %d has no role", i+1)
		}
	}
	metrics, err := parseMetrics(l.Metric)
	if err != nil {
		return Task{}, "", err
	}
	ref, err := referenceText(l.Reference)
	if err != nil {
		return Task{}, "", err
	}
	suite := l.Suite
	if suite == "" {
		suite = base
	}
	t := Task{Suite: suite, ID: l.ID, Reference: ref, Metrics: metrics, MaxTokens: l.MaxTokens, Line: l.Line, Until: l.Until, Schema: l.Schema, Meta: l.Meta}
	if l.Prompt != nil {
		t.Prompt = *l.Prompt
	}
	for _, m := range l.Messages {
		t.Messages = append(t.Messages, chat.Message{Role: m.Role, Content: m.Content})
	}
	t.Tools = l.Tools
	for _, m := range metrics {
		if err := checkReference(m, &t); err != nil {
			return Task{}, "", err
		}
	}
	return t, suite, nil
}

// parseMetrics reads "metric": a name or a list of names.
func parseMetrics(raw json.RawMessage) ([]Metric, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf(`no "metric" (valid: %s)`, metricNames())
	}
	var names []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		names = []string{one}
	} else if err := json.Unmarshal(raw, &names); err != nil || len(names) == 0 {
		return nil, fmt.Errorf(`"metric" must be a name or a non-empty list of names`)
	}
	var out []Metric
	for _, n := range names {
		m, err := ParseMetric(n)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func metricNames() string {
	var s []string
	for _, m := range Metrics() {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

// referenceText is the reference as text: a JSON string's value, or any
// other JSON value as written.
func referenceText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	return string(bytes.TrimSpace(raw)), nil
}

// checkReference refuses a reference (or schema) metric m cannot use.
func checkReference(m Metric, t *Task) error {
	switch m {
	case MetricRefusal, MetricNoRefusal, MetricJSONValid:
		return nil
	case MetricJSONSchema:
		schema := t.Schema
		if len(schema) == 0 {
			schema = json.RawMessage(t.Reference)
		}
		if len(schema) == 0 {
			return fmt.Errorf(`json-schema needs "schema" (or the schema as "reference")`)
		}
		if _, err := CompileJSONSchema(schema); err != nil {
			return err
		}
		return nil
	case MetricRegex:
		if _, err := regexp.Compile(t.Reference); err != nil {
			return fmt.Errorf("%w: regexp %q: %w", ErrReference, t.Reference, err)
		}
	}
	if t.Reference == "" && m != MetricCitation {
		return fmt.Errorf(`metric %s needs a "reference"`, m)
	}
	switch m {
	case MetricJSONExact:
		if !json.Valid([]byte(t.Reference)) {
			return fmt.Errorf("%w: json-exact reference is not JSON", ErrReference)
		}
	case MetricToolCall:
		// Scoring the reference against itself parses it.
		if _, err := ScoreOutput(MetricToolCall, t.Reference, t.Reference, ScoreOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// prepare renders chat tasks with m's template and tokenizes every task's
// prompt, so that a model without a template fails before any work.
func prepare(m *runtime.Model, suites []Suite) error {
	for si := range suites {
		for ti := range suites[si].Tasks {
			t := &suites[si].Tasks[ti]
			if t.ids != nil {
				continue
			}
			if len(t.Messages) == 0 {
				t.ids = m.Tokenizer.Encode(t.Prompt, true)
			} else {
				var extra map[string]any
				if len(t.Tools) > 0 {
					extra = map[string]any{"tools": t.Tools}
				}
				ids, text, err := m.ChatPromptExtra(t.Messages, extra)
				if err != nil {
					return fmt.Errorf("%w: suite %s task %d: %w", ErrTasks, t.Suite, t.Index+1, err)
				}
				t.ids, t.Prompt = ids, text
			}
			// A max_tokens the model cannot hold was cut to its context
			// without a word.
			if c := m.ContextLen; c > 0 && t.MaxTokens > c-len(t.ids) {
				return fmt.Errorf("%w: suite %s task %d: max_tokens %d plus its %d-token prompt exceed the model's %d-token context", ErrTasks, t.Suite, t.Index+1, t.MaxTokens, len(t.ids), c)
			}
		}
	}
	return nil
}
