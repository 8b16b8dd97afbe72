package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/chat/toolcall"
	"github.com/kvqlabs/kvq/pkg/engine"
)

// job is one generation request, checked and ready for the engine.
type job struct {
	index    int // the choice's index: the prompt's in a batch
	chat     bool
	model    string // the model id responses carry
	cache    string
	req      engine.Request
	opt      options
	echo     string // completions with echo: the prompt's text
	echoing  bool
	logprobs bool // per-token log-probabilities in the response
	// tools asks a chat response to be read for tool calls in family's
	// form ("": any).
	tools  bool
	family toolcall.Family
	one    bool // parallel_tool_calls false
}

// completions serves POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	var req completionRequest
	if e := decodeJSON(body, &req); e != nil {
		return e
	}
	opt, e := req.check()
	if e != nil {
		return e
	}
	cache, e := s.resolve(r, req.Model)
	if e != nil {
		return e
	}
	setCache(w, cache)
	if !isNull(req.Suffix) {
		return badParam("suffix", "suffix: not supported (this server does not fill in the middle)")
	}
	prompts, e := parsePrompts(req.Prompt)
	if e != nil {
		return e
	}
	maxTokens := 16
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if maxTokens == 0 && !req.Echo {
		return badParam("max_tokens", "max_tokens 0: only with echo (to score the prompt)")
	}
	top := 0
	if req.Logprobs != nil {
		top = *req.Logprobs
		if top < 0 || top > 20 {
			return badParam("logprobs", "logprobs %d: must be in [0, 20]", top)
		}
	}
	lp := req.Logprobs != nil
	if opt.stream && req.Echo && lp {
		return badParam("echo", "echo with logprobs: only without stream (the prompt's log-probabilities come with the result)")
	}
	jobs := make([]*job, len(prompts))
	for i, p := range prompts {
		ids, text := p.ids, p.text
		if p.isID {
			text = s.m.Tokenizer.Decode(ids)
		} else {
			ids = s.m.Tokenizer.Encode(p.text, true)
		}
		what := "prompt"
		if len(prompts) > 1 {
			what = fmt.Sprintf("prompt[%d]", i)
		}
		if len(ids) == 0 {
			return badParam("prompt", "%s: empty (it has no tokens)", what)
		}
		if e := s.checkContext(what, len(ids), maxTokens); e != nil {
			return e
		}
		j := &job{index: i, model: s.modelID(req.Model), cache: cache, opt: opt, echo: text, echoing: req.Echo, logprobs: lp}
		j.req = s.engineRequest(cache, ids, maxTokens, opt, req.IgnoreEOS)
		j.req.Logprobs, j.req.TopLogprobs = lp, top
		j.req.PromptLogprobs = req.Echo && (lp || maxTokens == 0)
		if j.req.PromptLogprobs {
			j.req.PromptTopLogprobs = top
		}
		jobs[i] = j
	}
	return s.generate(w, r, jobs...)
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	var req chatRequest
	if e := decodeJSON(body, &req); e != nil {
		return e
	}
	opt, e := req.check()
	if e != nil {
		return e
	}
	cache, e := s.resolve(r, req.Model)
	if e != nil {
		return e
	}
	setCache(w, cache)
	msgs, e := parseMessages(req.Messages)
	if e != nil {
		return e
	}
	tl, e := parseTools(req.Tools, req.ToolChoice)
	if e != nil {
		return e
	}
	tl.one = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	if s.m.ChatTemplate == "" {
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("model %s has no chat template: use /v1/completions with a prompt", s.name), typ: typeInvalid, param: "messages", code: "no_chat_template"}
	}
	ids, _, err := s.m.ChatPromptExtra(msgs, tl.extra)
	if err != nil {
		return badParam("messages", "messages: %v", err)
	}
	if len(ids) == 0 {
		return badParam("messages", "messages: the chat template rendered no tokens")
	}
	param, maxTokens := "max_tokens", -1
	switch {
	case req.MaxCompletionTokens != nil:
		param, maxTokens = "max_completion_tokens", *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 0 && req.MaxCompletionTokens == nil && req.MaxTokens == nil {
		// vLLM's default: the rest of the context.
		maxTokens = 256
		if c := s.m.ContextLen; c > 0 {
			maxTokens = max(1, c-len(ids))
		}
	}
	if maxTokens < 1 {
		return badParam(param, "%s %d: must be ≥ 1", param, maxTokens)
	}
	lp := req.Logprobs != nil && *req.Logprobs
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	switch {
	case top < 0 || top > 20:
		return badParam("top_logprobs", "top_logprobs %d: must be in [0, 20]", top)
	case top > 0 && !lp:
		return badParam("top_logprobs", "top_logprobs needs logprobs true")
	}
	if e := s.checkContext("messages", len(ids), maxTokens); e != nil {
		return e
	}
	j := &job{chat: true, model: s.modelID(req.Model), cache: cache, opt: opt, logprobs: lp, tools: tl.parse, one: tl.one}
	if tl.parse {
		j.family = toolcall.Detect(s.m.ChatTemplate)
	}
	j.req = s.engineRequest(cache, ids, maxTokens, opt, req.IgnoreEOS)
	j.req.Logprobs, j.req.TopLogprobs = lp, top
	return s.generate(w, r, j)
}

// CacheHeader is the response header that names the cache that served a
// request.
const CacheHeader = "X-KVQ-Cache"

// setCache sets CacheHeader as it is spelled (Header.Set would write
// X-Kvq-Cache; header names are case-insensitive either way).
func setCache(w http.ResponseWriter, cache string) {
	w.Header()[CacheHeader] = []string{cache}
}

func (s *Server) modelID(id string) string {
	if id == "" {
		return s.name
	}
	return id
}

func (s *Server) engineRequest(cache string, ids []int, maxTokens int, o options, ignoreEOS bool) engine.Request {
	seed := o.seed
	if !o.seeded {
		seed = mrand.Uint64()
	}
	return engine.Request{Cache: cache, Prompt: ids, MaxTokens: maxTokens, Temperature: o.temperature, TopP: o.topP, Seed: seed, IgnoreEOS: ignoreEOS}
}

// checkContext refuses a request longer than the model's context, saying
// by how much.
func (s *Server) checkContext(what string, n, maxTokens int) *apiError {
	c := s.m.ContextLen
	if c <= 0 || n <= c && maxTokens <= c-n { // not n+maxTokens, which can overflow
		return nil
	}
	param := "max_tokens"
	if n >= c {
		param, _, _ = strings.Cut(what, "[") // prompt[i] of a batch
	}
	return &apiError{status: http.StatusBadRequest, typ: typeInvalid, param: param, code: "context_length_exceeded",
		message: fmt.Sprintf("this model's maximum context length is %d tokens, and the request needs %d: %d in the %s and %d to generate (max_tokens); shorten the %s or lower max_tokens", c, uint64(n)+uint64(maxTokens), n, what, maxTokens, what)}
}

// submitError maps the engine's refusals.
func submitError(err error) *apiError {
	msg := err.Error()
	switch {
	case errors.Is(err, engine.ErrTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, message: msg, typ: typeInvalid, code: "kv_cache_too_small"}
	case errors.Is(err, engine.ErrRequest):
		return &apiError{status: http.StatusBadRequest, message: msg, typ: typeInvalid, code: "invalid_value"}
	case errors.Is(err, engine.ErrBusy):
		return &apiError{status: http.StatusTooManyRequests, message: strings.TrimPrefix(msg, "engine: ") + "; retry later", typ: typeLimit, code: "rate_limit_exceeded"}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, message: "the engine is not running", typ: typeServer, code: "engine_unavailable"}
	}
	return &apiError{status: http.StatusInternalServerError, message: msg, typ: typeServer, code: "internal_error"}
}

// gone marks a request whose client left: nothing more is written.
var gone = &apiError{message: "client gone"}

// generate submits jobs (one per prompt of a batch, sharing a cache
// and options) and writes their response.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, jobs ...*job) *apiError {
	j0 := jobs[0]
	if lim := s.opts.MaxWaiting; lim > 0 {
		for _, p := range s.e.Stats() {
			if p.Cache == j0.cache && p.Waiting >= lim {
				return &apiError{status: http.StatusTooManyRequests, message: fmt.Sprintf("cache %s has %d requests waiting, the server's limit (max waiting %d); retry later", j0.cache, p.Waiting, lim), typ: typeLimit, code: "rate_limit_exceeded"}
			}
		}
	}
	start := time.Now()
	if e := s.inject(r, jobs, start); e == gone {
		return nil
	} else if e != nil {
		return e
	}
	delayed := s.opts.Fault.Delay > 0 && s.opts.Fault.applies(j0.cache)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // also ends the batch's submitted requests when one is refused
	runs := make([]*run, len(jobs))
	for i, j := range jobs {
		rctx, rcancel := context.WithCancel(ctx)
		g := &run{s: s, j: j, cancel: rcancel, start: time.Now()}
		if delayed {
			g.start = start // the injected delay counts in the TTFT and E2E
		}
		st, err := s.e.Submit(rctx, j.req)
		if err != nil {
			rcancel()
			return submitError(err)
		}
		g.st = st
		g.text = newTextStream(s.m.Tokenizer, j.req.Prompt[len(j.req.Prompt)-1], j.opt.stops)
		g.text.includeStop = j.opt.includeStop
		g.text.offsets = j.logprobs && !j.chat
		defer g.end()
		runs[i] = g
	}
	if j0.opt.stream {
		s.stream(w, r, runs)
		return nil
	}
	return s.collect(w, r, runs)
}

// run reads one request's stream from the engine.
type run struct {
	s      *Server
	j      *job
	st     *engine.Stream
	cancel context.CancelFunc // ends the engine request
	text   *textStream
	start  time.Time
	n      int       // tokens generated
	last   time.Time // the latest token's time
	res    *engine.Result
	ended  bool
	// reuse lets next return its token in one, overwritten by the next
	// call: for a reader done with an event before it reads the next.
	reuse bool
	one   [1]tokenOut
}

// event is what one read brings: usually one token and the text it
// released; finish is set at the end ("stop", "length").
type event struct {
	toks   []tokenOut
	text   string
	finish string
}

// tokenOut is a generated token as responses show it.
type tokenOut struct {
	id      int
	prev    int // the token before it (for its alternatives' pieces)
	piece   string
	offset  int
	logprob float32
	top     []engine.TopLogprob
}

// next returns the next event, gone when the client left, or an error to
// report.
func (g *run) next(ctx context.Context) (event, *apiError) {
	tok, err := g.st.Next(ctx)
	if err == io.EOF {
		res := g.st.Result()
		g.res = &res
		ev := event{text: g.text.flush()}
		switch res.FinishReason {
		case engine.FinishStop:
			ev.finish = "stop"
		case engine.FinishLength:
			ev.finish = "length"
			if g.n == 0 { // scoring only: the prefill completed
				g.s.metrics.prompt(g.j.cache, len(g.j.req.Prompt))
			}
		case engine.FinishAbort:
			return ev, g.abort(ctx, res.Done)
		default:
			g.finish("error", res.Done)
			return ev, &apiError{status: http.StatusInternalServerError, message: fmt.Sprintf("generation failed: %v", res.Err), typ: typeServer, code: "engine_error"}
		}
		g.finish(ev.finish, res.Done)
		return ev, nil
	}
	if err != nil {
		return event{}, g.abort(ctx, time.Now())
	}
	prev := g.text.prev
	piece, off, delta, stopped := g.text.push(tok.ID)
	g.n++
	if g.last.IsZero() {
		g.s.metrics.prompt(g.j.cache, len(g.j.req.Prompt))
	}
	g.s.metrics.token(g.j.cache, g.start, g.last, tok.Time)
	g.last = tok.Time
	t := tokenOut{id: tok.ID, prev: prev, piece: piece, offset: off, logprob: tok.Logprob, top: tok.Top}
	ev := event{text: delta}
	if g.reuse {
		g.one[0] = t
		ev.toks = g.one[:]
	} else {
		ev.toks = []tokenOut{t}
	}
	switch {
	case stopped:
		ev.finish = "stop"
		g.cancel() // the engine frees the sequence at its next step
		g.finish("stop", time.Now())
	case g.n >= g.j.req.MaxTokens:
		ev.text += g.text.flush()
		ev.finish = "length"
		g.finish("length", tok.Time)
	}
	return ev, nil
}

// abort ends a request the engine aborted or whose context ended: gone
// when its client left, 503 when the server or the engine stopped.
func (g *run) abort(ctx context.Context, at time.Time) *apiError {
	g.finish("abort", at)
	if g.s.base.Err() == nil && ctx.Err() != nil {
		return gone
	}
	return &apiError{status: http.StatusServiceUnavailable, message: "the server stopped before the request finished", typ: typeServer, code: "shutting_down"}
}

func (g *run) finish(reason string, at time.Time) {
	if g.ended {
		return
	}
	g.ended = true
	g.s.metrics.finish(g.j.cache, reason, at.Sub(g.start))
}

// end records a request left unfinished (the handler returned early).
func (g *run) end() {
	if !g.ended {
		g.finish("abort", time.Now())
	}
}

// usage is OpenAI's token accounting.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usage sums the token counts of a response's runs.
func usageOf(runs []*run) *usage {
	u := &usage{}
	for _, g := range runs {
		u.PromptTokens += len(g.j.req.Prompt)
		u.CompletionTokens += g.n
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// response is a completion, a chat completion or a chunk of either.
type response struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices any    `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
	Cache   string `json:"kvq_cache"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	StopReason   *string             `json:"stop_reason"`
}

// completionLogprobs is the legacy completions format.
type completionLogprobs struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []*float32 `json:"token_logprobs"`
	TopLogprobs   []topMap   `json:"top_logprobs"`
	TextOffset    []int      `json:"text_offset"`
}

// topMap is an object of token → log-probability in order, most likely
// first (a Go map would sort the keys); nil is null.
type topMap []topEntry

type topEntry struct {
	token   string
	logprob float32
}

func (m topMap) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	seen := map[string]bool{}
	for _, e := range m {
		k, err := marshal(e.token)
		if err != nil {
			return nil, err
		}
		// Two ids of the same text, or of bytes that JSON writes as the
		// same replacement character: keep the likelier (the first).
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		if len(b) > 1 {
			b = append(b, ',')
		}
		v, err := marshal(finite(e.logprob)) // as encoding/json writes a float32
		if err != nil {
			return nil, err
		}
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatOut      `json:"message,omitempty"`
	Delta        *chatDelta    `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	StopReason   *string       `json:"stop_reason"`
}

type chatOut struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"` // null when the response is tool calls only
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

type chatDelta struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

// toolCallOut is a tool call in a message, or in a delta with its index.
type toolCallOut struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text, as OpenAI sends it
}

// firstCalls is calls, or with parallel_tool_calls false its first (as
// vLLM keeps it).
func (j *job) firstCalls(calls []toolcall.Call) []toolcall.Call {
	if j.one && len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// toolCalls are calls as a response carries them, indexed for a delta.
func (s *Server) toolCalls(calls []toolcall.Call, indexed bool) []toolCallOut {
	out := make([]toolCallOut, len(calls))
	for i, c := range calls {
		args := "{}"
		if b, err := marshal(c.Arguments); err == nil {
			args = string(b)
		}
		out[i] = toolCallOut{ID: "chatcmpl-tool-" + s.idBase + strconv.FormatUint(s.idN.Add(1), 16), Type: "function", Function: toolFunction{Name: c.Name, Arguments: args}}
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

// toolHold holds back a streamed chat response's text from where a tool
// call may start, so that the calls go out whole in the final delta and
// their text never goes out as content.
type toolHold struct {
	f    toolcall.Family
	buf  strings.Builder
	sent int
}

// toolMarkers are the texts that start a call, by family.
var toolMarkers = map[toolcall.Family][]string{
	toolcall.Hermes:  {"<tool_call>"},
	toolcall.Mistral: {"[TOOL_CALLS]"},
	toolcall.Llama:   {"<|python_tag|>"},
	"":               {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"},
}

// push adds text and returns the content now safe to send: the text
// before any marker and before any start of one at the end. A Llama
// response (or one of no known family) that starts with "{" is held
// whole: it may be a bare JSON call.
func (h *toolHold) push(text string) string {
	h.buf.WriteString(text)
	s := h.buf.String()
	limit := len(s)
	if h.f == toolcall.Llama || h.f == "" {
		if t := strings.TrimLeft(s, " \t\r\n"); t == "" || t[0] == '{' {
			limit = 0
		}
	}
	for _, m := range toolMarkers[h.f] {
		if i := strings.Index(s, m); i >= 0 {
			limit = min(limit, i)
			continue
		}
		for k := len(m) - 1; k > 0; k-- {
			if strings.HasSuffix(s, m[:k]) {
				limit = min(limit, len(s)-k)
				break
			}
		}
	}
	if limit <= h.sent {
		return ""
	}
	out := s[h.sent:limit]
	h.sent = limit
	return out
}

// end returns the content not yet sent and the response's calls.
func (h *toolHold) end() (string, []toolcall.Call) {
	s := h.buf.String()
	calls, content := toolcall.Parse(h.f, s)
	if len(calls) == 0 {
		content = s
	}
	if len(content) <= h.sent {
		return "", calls
	}
	return content[h.sent:], calls
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Token       string    `json:"token"`
	Logprob     float32   `json:"logprob"`
	Bytes       []int     `json:"bytes"`
	TopLogprobs []chatTop `json:"top_logprobs"`
}

type chatTop struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// piece is id's text after prev (the pieces of alternatives).
func (s *Server) piece(prev, id int) string { return s.m.Tokenizer.TokenPiece(prev, id) }

// legacyLogprobs appends toks to lp in the completions format, offsets
// shifted by base code points (the echoed prompt).
func (s *Server) legacyLogprobs(lp *completionLogprobs, toks []tokenOut, base int) {
	for _, t := range toks {
		v := finite(t.logprob)
		lp.Tokens = append(lp.Tokens, t.piece)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		top := make(topMap, 0, len(t.top)+1)
		chosen := false
		for _, a := range t.top {
			top = append(top, topEntry{s.piece(t.prev, a.ID), a.Logprob})
			chosen = chosen || a.ID == t.id
		}
		if !chosen { // vLLM adds the sampled token to its alternatives
			top = append(top, topEntry{t.piece, t.logprob})
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, base+t.offset)
	}
}

// promptLogprobs is the echoed prompt's part of the legacy format: the
// first token has no log-probability (null), as vLLM writes it; each
// other's top_logprobs holds the requested alternatives and the token
// itself, as vLLM's prompt_logprobs do.
func (s *Server) promptLogprobs(ids []int, lps []float32, tops [][]engine.TopLogprob) *completionLogprobs {
	lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []topMap{}, TextOffset: []int{}}
	prev, off := -1, 0
	for i, id := range ids {
		p := s.piece(prev, id)
		before := prev
		prev = id
		lp.Tokens = append(lp.Tokens, p)
		lp.TextOffset = append(lp.TextOffset, off)
		off += utf8.RuneCountInString(p)
		if i == 0 || i >= len(lps) {
			lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
			lp.TopLogprobs = append(lp.TopLogprobs, nil)
			continue
		}
		v := finite(lps[i])
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		top := topMap{}
		chosen := false
		if i < len(tops) {
			for _, a := range tops[i] {
				top = append(top, topEntry{s.piece(before, a.ID), a.Logprob})
				chosen = chosen || a.ID == id
			}
		}
		if !chosen {
			top = append(top, topEntry{p, v})
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
	}
	return lp
}

func (s *Server) chatLogprobs(toks []tokenOut) *chatLogprobs {
	out := &chatLogprobs{Content: []chatLogprob{}}
	for _, t := range toks {
		e := chatLogprob{Token: t.piece, Logprob: finite(t.logprob), Bytes: byteList(t.piece), TopLogprobs: []chatTop{}}
		for _, a := range t.top {
			p := s.piece(t.prev, a.ID)
			e.TopLogprobs = append(e.TopLogprobs, chatTop{Token: p, Logprob: finite(a.Logprob), Bytes: byteList(p)})
		}
		out.Content = append(out.Content, e)
	}
	return out
}

func (s *Server) newID(chat bool) string {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	return prefix + s.idBase + strconv.FormatUint(s.idN.Add(1), 16)
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	p := new(string) // not &s: s would be moved to the heap on every call
	*p = s
	return p
}

// collect runs a response's requests to their ends and writes one
// response, a choice per request.
func (s *Server) collect(w http.ResponseWriter, r *http.Request, runs []*run) *apiError {
	j := runs[0].j
	resp := response{ID: s.newID(j.chat), Model: j.model, Cache: j.cache}
	var chatChoices []chatChoice
	var choices []completionChoice
	for _, g := range runs {
		text, toks, finish, e := g.all(r.Context())
		if e == gone {
			return nil
		}
		if e != nil {
			return e
		}
		if j.chat {
			c := chatChoice{Index: g.j.index, Message: &chatOut{Role: "assistant", Content: &text}, FinishReason: &finish, StopReason: strp(g.text.stop)}
			if j.tools {
				if calls, content := toolcall.Parse(j.family, text); len(calls) > 0 {
					calls = j.firstCalls(calls)
					c.Message.Content, c.Message.ToolCalls = strp(content), s.toolCalls(calls, false)
					finish = "tool_calls" // as vLLM, whatever ended the response
				}
			}
			if j.logprobs {
				c.Logprobs = s.chatLogprobs(toks)
			}
			chatChoices = append(chatChoices, c)
			continue
		}
		c, e := s.completionChoice(r, g, text, toks, finish)
		if e != nil {
			return e
		}
		choices = append(choices, c)
	}
	resp.Created, resp.Usage = time.Now().Unix(), usageOf(runs)
	if j.chat {
		resp.Object, resp.Choices = "chat.completion", chatChoices
	} else {
		resp.Object, resp.Choices = "text_completion", choices
	}
	s.writeJSON(w, http.StatusOK, resp)
	return nil
}

// all reads g to its end: its text, tokens and finish reason.
func (g *run) all(ctx context.Context) (string, []tokenOut, string, *apiError) {
	g.reuse = true // each event's tokens are copied before the next read
	var text strings.Builder
	var toks []tokenOut
	finish := ""
	for finish == "" {
		ev, e := g.next(ctx)
		if e != nil {
			return "", nil, "", e
		}
		text.WriteString(ev.text)
		toks = append(toks, ev.toks...)
		finish = ev.finish
	}
	return text.String(), toks, finish, nil
}

// completionChoice is g's choice in a completion: its text, after the
// echoed prompt, and its log-probabilities; gone when the client left.
func (s *Server) completionChoice(r *http.Request, g *run, text string, toks []tokenOut, finish string) (completionChoice, *apiError) {
	j := g.j
	c := completionChoice{Index: j.index, Text: text, FinishReason: &finish, StopReason: strp(g.text.stop)}
	base := 0
	if j.echoing {
		c.Text = j.echo + c.Text
		base = utf8.RuneCountInString(j.echo)
	}
	if j.logprobs {
		c.Logprobs = &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []topMap{}, TextOffset: []int{}}
		if j.echoing {
			if g.res == nil { // cut by a stop string: the result follows the cancellation
				res, err := g.st.Wait(r.Context())
				if err != nil {
					return c, gone // the client left
				}
				g.res = &res
			}
			c.Logprobs = s.promptLogprobs(j.req.Prompt, g.res.PromptLogprobs, g.res.PromptTop)
		}
		s.legacyLogprobs(c.Logprobs, toks, base)
	}
	return c, nil
}

// runEvent is an event of one of a stream's runs.
type runEvent struct {
	g    *run
	ev   event
	stop string // the run's stop string as of the event
	e    *apiError
}

// stream writes a response's server-sent events as they come, the
// events of a batch's requests interleaved, each choice with its index.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, runs []*run) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	// Every event is encoded into one buffer, reused: "data: ", the JSON
	// (as marshal writes it) and its line feed, and a blank line.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	send := func(v any) {
		buf.Reset()
		buf.WriteString("data: ")
		if err := enc.Encode(v); err != nil {
			s.log.Error("serve: encoding a chunk", "err", err)
			return
		}
		buf.WriteByte('\n')
		w.Write(buf.Bytes())
	}
	done := func() {
		io.WriteString(w, "data: [DONE]\n\n")
		_ = rc.Flush()
	}
	j := runs[0].j
	id, created := s.newID(j.chat), time.Now().Unix()
	chunk := func(choices any) response {
		obj := "text_completion"
		if j.chat {
			obj = "chat.completion.chunk"
		}
		return response{ID: id, Object: obj, Created: created, Model: j.model, Choices: choices, Cache: j.cache}
	}
	// A batch's runs are each read by their own goroutine; quit releases
	// them when the stream ends early, and the wait keeps them from
	// outliving it. A single run (the usual request) is read here, with
	// no goroutine between the engine's stream and the response: one
	// hand-off less per token.
	var nextEvent func() runEvent
	events := make(chan runEvent)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(quit)
		for _, g := range runs {
			g.cancel()
		}
		wg.Wait()
	}()
	if len(runs) == 1 {
		g := runs[0]
		g.reuse = true // an event is written before the next is read
		nextEvent = func() runEvent {
			ev, e := g.next(r.Context())
			return runEvent{g, ev, g.text.stop, e}
		}
	} else {
		nextEvent = func() runEvent { return <-events }
		for _, g := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ev, e := g.next(r.Context())
					select {
					case events <- runEvent{g, ev, g.text.stop, e}:
					case <-quit:
						return
					}
					if e != nil || ev.finish != "" {
						return
					}
				}
			}()
		}
	}
	// The choices of a chunk: one, in a slice made (and put in an
	// interface) once, and the chunk sent by pointer, so that a token's
	// chunk costs no allocation of its own.
	chatChoices, compChoices := make([]chatChoice, 1), make([]completionChoice, 1)
	var chatAny, compAny any = chatChoices, compChoices
	var out response
	var delta chatDelta // a chat chunk's, and its content
	var text string
	sendChat := func(c chatChoice) {
		chatChoices[0] = c
		out = chunk(chatAny)
		send(&out)
	}
	sendCompletion := func(c completionChoice) {
		compChoices[0] = c
		out = chunk(compAny)
		send(&out)
	}
	first := make(map[*run]bool, len(runs))
	var hold *toolHold
	if j.tools {
		hold = &toolHold{f: j.family}
	}
	for left := len(runs); left > 0; {
		re := nextEvent()
		g, ev, e, stop := re.g, re.ev, re.e, re.stop
		if e == gone {
			return
		}
		if e != nil {
			send(errorBody(e))
			done()
			return
		}
		var fin *string
		if ev.finish != "" {
			f := ev.finish // a copy: a pointer into ev would move every event to the heap
			fin = &f
			left--
		}
		started := first[g]
		first[g] = true
		if j.chat {
			if !started {
				empty := ""
				sendChat(chatChoice{Index: g.j.index, Delta: &chatDelta{Role: "assistant", Content: &empty}})
			}
			delta, text = chatDelta{}, ev.text
			c := chatChoice{Index: g.j.index, Delta: &delta, FinishReason: fin, StopReason: strp(stop)}
			if hold != nil {
				text = hold.push(text)
				if fin != nil {
					rest, calls := hold.end()
					text += rest
					if len(calls) > 0 {
						c.Delta.ToolCalls = s.toolCalls(j.firstCalls(calls), true)
						reason := "tool_calls"
						c.FinishReason = &reason
					}
				}
			}
			if len(ev.toks) > 0 || text != "" {
				c.Delta.Content = &text
			}
			if j.logprobs && len(ev.toks) > 0 {
				c.Logprobs = s.chatLogprobs(ev.toks)
			}
			sendChat(c)
		} else {
			c := completionChoice{Index: g.j.index, Text: ev.text, FinishReason: fin, StopReason: strp(stop)}
			offset := 0
			if g.j.echoing {
				offset = utf8.RuneCountInString(g.j.echo)
				if !started {
					c.Text = g.j.echo + c.Text
				}
			}
			if j.logprobs && len(ev.toks) > 0 {
				c.Logprobs = &completionLogprobs{}
				s.legacyLogprobs(c.Logprobs, ev.toks, offset)
			}
			sendCompletion(c)
		}
		_ = rc.Flush()
	}
	if j.opt.usage {
		c := chunk([]struct{}{})
		c.Usage = usageOf(runs)
		send(c)
	}
	done()
}
