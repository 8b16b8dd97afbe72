// Package serve puts an *engine.Engine behind an OpenAI-compatible HTTP API,
// the protocol vLLM, SGLang and llama.cpp's llama-server speak, so that the
// clients and benchmarks written for those servers (vllm bench serve,
// lm-evaluation-harness, the openai SDKs) drive kvq's engine and its
// quantized caches unchanged.
//
// Endpoints:
//
//	POST /v1/completions       text completion; prompt as text or token ids,
//	                           or a list of them (a choice per prompt);
//	                           echo and logprobs score a text teacher-forced
//	POST /v1/chat/completions  chat, rendered with the model's chat template,
//	                           tools too; calls come back as tool_calls
//	GET  /v1/models            the served model ids (OpenAI list format)
//	GET  /v1/models/{id}       one of them
//	GET  /health               200, or 503 while shutting down
//	GET  /metrics              Prometheus text exposition (see MetricsHelp)
//	GET  /admin/route          the routes; POST sets a cache's share
//
// Both generation endpoints stream as OpenAI and vLLM do when asked
// ("stream": true): one "data: {json}\n\n" server-sent event per generated
// token, flushed as it is written, and "data: [DONE]\n\n" at the end; with
// "stream_options": {"include_usage": true} a last chunk with no choices
// carries the usage. Text is detokenized incrementally: a chunk carries
// only whole UTF-8 characters (the bytes of a character split over byte
// tokens are held back until it is complete) and, when stop strings are
// given, holds back as many bytes as the longest could still need, so the
// chunks' texts always concatenate to the text of the same request not
// streamed.
//
// Model ids are the served name (Options.ModelName) and NAME@CACHE for
// each of the engine's caches (NAME@fp16, NAME@int4, ...). NAME@CACHE runs
// on that cache; plain NAME on the first cache, or, with Options.Route, on
// a cache drawn for the request (a canary split). Every response says which
// cache served it: the "kvq_cache" field of its JSON (of every chunk when
// streaming) and the X-KVQ-Cache header; the metrics carry a cache label.
//
// Options.Routes restrict a split to some requests: those with a header's
// value (a tenant), a bearer token (a tenant key, accepted on /v1/ besides
// Options.APIKey) or a requested model id (an alias the server lists); see
// Route for the deterministic choice. GET /admin/route lists the routes as
// {"routes": [{"cache", "percent", "match"}], "fallback"}; POST
// /admin/route {"cache": NAME, "percent": N} sets the share of NAME's
// routes live (optional "match" for one route, "reason" for the log),
// the one switch a canary judge flips to roll a candidate back. Both take
// the server's API key as a bearer token and answer 403 on a server
// without one; each change goes to Options.OnRouteChange and the metrics
// kvq_route_percent and kvq_route_changes_total. Options.Fault injects a
// delay before the first token and a seeded share of 500s, for canary
// drills and tests.
//
// Errors are OpenAI's JSON body {"error": {"message", "type", "param",
// "code"}} with these statuses: 400 malformed JSON, a parameter of the
// wrong type or value (param names it), a prompt too long for the model's
// context (the message gives the numbers) or a model without a chat
// template; 401 a missing or wrong API key; 404 an unknown model or path;
// 405 a wrong method; 413 a body over Options.MaxBodyBytes, or a request
// that can never fit its cache's KV pool; 429 (with Retry-After) when the
// cache's waiting queue holds Options.MaxWaiting requests, or the engine's
// own engine.Options.MaxWaiting, which it decides atomically; 500 a failure inside the engine
// or a handler (a handler's panic is recovered and the server keeps
// serving); 503 when the engine is not running or the server is shutting
// down. After a stream has started an error arrives as a last event
// "data: {"error": {...}}" before "data: [DONE]", as vLLM sends it.
//
// Tool calls: tools (and a conversation's tool_calls and tool_call_id) are
// rendered through the template; with tool_choice "auto" the response is
// read for calls with the parser of the template's family
// (toolcall.Detect: Hermes/Qwen, Llama 3.1, Mistral; any form when the
// template names none) and calls found are message.tool_calls, with
// finish_reason "tool_calls"; streamed, a call's text is held back and
// the calls arrive whole in the final delta.
//
// Differences from vLLM, on purpose or for now: n must be 1 (no best_of, no
// penalties, no logit_bias, no suffix, no response_format json_object or
// json_schema, no tool_choice "required" or naming a function: there is no
// constrained decoding; they are refused, not ignored); usage's
// completion_tokens does not count the stop token (EOS, end of turn) that
// ended a response, which the engine never returns (vLLM counts it);
// echo with logprobs is refused when streaming (the engine reports a
// prompt's log-probabilities only with its result); text_offset counts
// Unicode code points, as Python's len does for vLLM, with each byte of an
// incomplete character counted as one. A chat request without max_tokens
// asks, as in vLLM, for the rest of the model's context, which a pool
// smaller than one whole context refuses (413): give max_tokens.
//
// A request whose client disconnects is cancelled in the engine at its
// next step, freeing its sequence. A Server is safe for concurrent use; run
// the engine (engine.Engine.Run) on a context that outlives Serve, so that
// in-flight requests can finish during a graceful shutdown.
package serve

import (
	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors of the package.
var (
	// ErrOptions reports invalid Options (a route to a cache the engine
	// lacks, shares that sum over 1).
	ErrOptions = kvqerr.New("serve: bad options")
)
