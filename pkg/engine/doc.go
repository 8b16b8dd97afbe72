// Package engine is kvq's in-process serving engine: a continuous-batching
// scheduler over paged KV pools, one pool per cache format over shared
// weights, that kvq bench measures and kvq serve puts behind an
// OpenAI-compatible API.
//
// Each step mixes the decode tokens of running sequences with chunks of
// prompts being prefilled, in one forward over every pool. Prompts are cut
// into chunks at fixed offsets (multiples of Options.Chunk), whatever else
// the step holds, and with Options.BatchInvariant on the CPU backend the
// runner is batch-invariant (runtime.RunnerOptions.BatchInvariant): each
// entry's matrix products run
// over its own rows, decode rows and logits rows each with the one-row
// kernel, so the row count of a step never picks the kernel, and so the
// summation order, of a request's rows. A request's computation then does
// not depend on the load: its tokens and log-probabilities are
// bit-identical to the same request run alone, for every weight type
// (TestLogprobsBatchInvariant). A request preempted and recomputed is the
// exception: its generated tokens are prefilled again, in chunks, where
// they were decoded one at a time. Other backends (GPU) make no such
// promise, as GPU engines' kernels do not.
//
// Admission counts bytes: a sequence is admitted when its first chunk's
// blocks and its fp16 windows fit in the pool's budget (the
// kvcache.Options.Budget accounting kvq estimate also uses). When a decode
// step finds the pool full, the most recently admitted sequence is
// preempted by recompute, as vLLM does: its blocks are freed and it waits
// at the head of the queue to prefill its prompt and what it generated so
// far again.
package engine

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors of the package. A request refused at Submit wraps ErrRequest (a
// server answers 400) or ErrTooLarge (413); ErrBusy means the pool's queue
// holds Options.MaxWaiting requests (429); ErrClosed means the engine is
// not running (503).
var (
	ErrRequest  = errors.New("engine: bad request")
	ErrTooLarge = errors.New("engine: request too large")
	ErrClosed   = errors.New("engine: not running")
	ErrBusy     = errors.New("engine: too many requests waiting")
	ErrOptions  = kvqerr.New("engine: bad options")
)
