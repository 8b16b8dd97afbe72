// Package openai is a small client for OpenAI-compatible servers — vLLM,
// SGLang, llama.cpp's llama-server, kvq serve — covering what kvq's
// measurements need: the model list, text and chat completions streamed
// with per-chunk arrival times, and a prompt's log-probabilities.
//
// Streaming requests send "stream": true with "stream_options":
// {"include_usage": true} and read server-sent events as vLLM's benchmark
// client does (vllm/benchmarks/lib/endpoint_request_func.py): comment
// lines (":" pings) are skipped, "data: [DONE]" ends the stream, and a
// message counts as a chunk when it carries choices — even with empty
// text, as a first chunk for a special token does. Completion.Start is
// taken just before the request is sent, Chunk.Time when a chunk's message
// has been read, so TTFT is FirstChunk − Start, the inter-token latencies
// are the gaps between chunks, and the end-to-end latency is LastChunk −
// Start: a trailing usage-only message sets the token counts but not the
// end time. Token counts come from the server's usage and are 0 when it
// sends none (the client never re-tokenizes).
//
// Errors: a non-2xx response is an *Error with the status code and the
// server's error message (OpenAI's {"error": {...}} body, or the body's
// text); an error event inside a stream is an *Error with StatusCode 0.
// Client.Retries retries a request only when it failed to connect or got
// a 5xx status, never after any of a successful response was read.
//
// A Client holds no state besides its fields and is safe for concurrent
// use. It reads no environment: the caller supplies the API key.
package openai

import "errors"

// Errors of the package.
var (
	// ErrNoChoices reports a response that never carried a choice (vLLM's
	// benchmark counts such a request as failed: "never received a valid
	// chunk").
	ErrNoChoices = errors.New("openai: no choices in the response")
	// ErrProtocol reports a response that is not what the API specifies
	// (malformed JSON, an SSE message over the size limit).
	ErrProtocol = errors.New("openai: malformed response")
)
