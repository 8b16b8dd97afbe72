package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string
	Content string
	// Fields holds the message's other keys, as transformers passes them
	// through: "tool_calls" (a list of {"id", "type", "function": {"name",
	// "arguments"}}), "tool_call_id" and "name" on a tool result,
	// "reasoning_content", and so on. Values are as for Options.Extra.
	// Templates see them after role and content, in Fields' key order
	// (sorted, or the object order of a json.RawMessage value). The keys
	// "role" and "content" are reserved.
	Fields map[string]any
}

// Options are the variables a chat template sees besides the messages.
type Options struct {
	// AddGenerationPrompt asks the template to end with the header that
	// opens the assistant's reply.
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the tokenizer's special tokens, as the
	// template variables bos_token and eos_token.
	BOSToken, EOSToken string
	// Now is the clock behind strftime_now; nil means time.Now.
	Now func() time.Time
	// Extra holds further template variables, such as "tools",
	// "documents", "date_string" or "enable_thinking". Values may be nil,
	// bool, integers, floats, strings, slices, maps with string keys, or
	// json.RawMessage (decoded with object key order kept; Go maps are
	// visited in sorted key order, since Go does not keep insertion order).
	// "tools" and "documents" default to none, as in transformers. The
	// names of the other built-in variables are reserved.
	Extra map[string]any
}

// Errors returned by Render. Failures carry a *SyntaxError,
// *UnsupportedError, *RaiseError or *RenderError, which wrap these
// sentinels where one applies.
var (
	// ErrUndefined reports a use of an undefined value that Jinja rejects:
	// arithmetic, attribute or item access, or a call.
	ErrUndefined = kvqerr.New("chat: undefined value")
	// ErrType reports an operation on values of the wrong type.
	ErrType = kvqerr.New("chat: type error")
	// ErrLimit reports a render that ran past the output, step, range or
	// recursion limits that keep a hostile template from running away.
	ErrLimit = kvqerr.New("chat: render limit exceeded")
	// ErrExtra reports an Options.Extra or Message.Fields entry that
	// cannot be used.
	ErrExtra = errors.New("chat: invalid extra variable")
)

// SyntaxError is a malformed template, at a 1-based line and column
// (counted in characters).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("chat: syntax error at %d:%d: %s", e.Line, e.Col, e.Msg)
}

// UnsupportedError is a Jinja feature this package does not implement,
// such as {% include %}, an unknown filter or a strftime directive.
type UnsupportedError struct {
	Line, Col int
	Feature   string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("chat: unsupported feature at %d:%d: %s", e.Line, e.Col, e.Feature)
}

// RaiseError is the message a template passed to raise_exception.
type RaiseError struct {
	Msg string
}

func (e *RaiseError) Error() string { return e.Msg }

// RenderError is a failure while rendering, at the 1-based line and column
// of the expression that failed. Err is a *RaiseError, an
// *UnsupportedError or wraps ErrUndefined, ErrType or ErrLimit.
type RenderError struct {
	Line, Col int
	Err       error
}

func (e *RenderError) Error() string {
	var ue *UnsupportedError
	if errors.As(e.Err, &ue) {
		return ue.Error()
	}
	return fmt.Sprintf("chat: render error at %d:%d: %s", e.Line, e.Col, strings.TrimPrefix(e.Err.Error(), "chat: "))
}

func (e *RenderError) Unwrap() error { return e.Err }

// Template is a compiled chat template. It is immutable and safe for
// concurrent use by multiple goroutines.
type Template struct {
	src  string // the source after newline normalization
	body []node
}

// Compile parses a chat template.
func Compile(src string) (*Template, error) {
	src = normalizeNewlines(src)
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	body, err := p.parseTemplate()
	if err != nil {
		return nil, err
	}
	return &Template{src: src, body: body}, nil
}

// Render compiles template and renders it for msgs, as transformers'
// apply_chat_template(msgs, tokenize=False) does.
func Render(template string, msgs []Message, opts Options) (string, error) {
	t, err := Compile(template)
	if err != nil {
		return "", err
	}
	return t.Render(msgs, opts)
}

// reserved are the variables Render always defines.
var reserved = [...]string{"messages", "add_generation_prompt", "bos_token", "eos_token",
	"raise_exception", "strftime_now", "namespace", "range", "dict"}

// Render renders the template for msgs.
func (t *Template) Render(msgs []Message, opts Options) (string, error) {
	root := newScope(nil)
	messages := make([]any, len(msgs))
	for i, m := range msgs {
		d, err := messageDict(m)
		if err != nil {
			return "", fmt.Errorf("%w: messages[%d]: %w", ErrExtra, i, err)
		}
		messages[i] = d
	}
	root.vars["tools"] = nil
	root.vars["documents"] = nil
	for k, v := range opts.Extra {
		for _, r := range reserved {
			if k == r {
				return "", fmt.Errorf("%w: %q is reserved", ErrExtra, k)
			}
		}
		cv, err := fromGo(v)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrExtra, k, err)
		}
		root.vars[k] = cv
	}
	root.vars["messages"] = messages
	root.vars["add_generation_prompt"] = opts.AddGenerationPrompt
	root.vars["bos_token"] = opts.BOSToken
	root.vars["eos_token"] = opts.EOSToken
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	for name, f := range globals(now) {
		root.vars[name] = f
	}

	var out strings.Builder
	r := &renderer{t: t, out: &out}
	if _, err := r.exec(t.body, root); err != nil {
		return "", err
	}
	return out.String(), nil
}

// messageDict converts m to the dict a template sees.
func messageDict(m Message) (*dict, error) {
	d := newDict(2 + len(m.Fields))
	d.set("role", m.Role)
	d.set("content", m.Content)
	if len(m.Fields) == 0 {
		return d, nil
	}
	fields, err := fromGo(m.Fields)
	if err != nil {
		return nil, err
	}
	fd := fields.(*dict)
	for _, k := range fd.keys {
		if k == "role" || k == "content" {
			return nil, fmt.Errorf("field %q is reserved", k)
		}
		d.set(k, fd.vals[k])
	}
	return d, nil
}

// position converts a byte offset in the normalized source to a 1-based
// line and character column.
func position(src string, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	line = 1 + strings.Count(src[:off], "\n")
	start := strings.LastIndexByte(src[:off], '\n') + 1
	col = 1 + len([]rune(src[start:off]))
	return line, col
}

// normalizeNewlines turns \r\n and \r into \n and drops one trailing
// newline, as Jinja does with keep_trailing_newline=False.
func normalizeNewlines(s string) string {
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return strings.TrimSuffix(s, "\n")
}
