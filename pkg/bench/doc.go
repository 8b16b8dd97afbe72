// Package bench measures what a KV-cache format costs and saves at serving
// time: the library behind kvq bench. It has six parts.
//
//   - Workloads (Fixed, Random, FromFile, BuiltIn): deterministic, seeded
//     lists of Requests, each with its prompt both as token ids (for the
//     in-process engine, and for OpenAI-compatible endpoints with Fixed
//     and Random, as vllm bench sends its random dataset) and as text
//     (for endpoints with the other workloads, and for chat).
//     Fixed and Random follow vLLM's random dataset, FromFile reads JSONL
//     prompts, chat messages or ShareGPT conversations as vLLM's sharegpt
//     dataset does, BuiltIn draws kvq's own eval-split stories and tasks.
//   - Arrivals (Schedule): vLLM's request-rate schedule, Gamma-distributed
//     gaps (burstiness 1 is a Poisson process) rescaled so that the last
//     request arrives at exactly n/rate.
//   - The load runner (Run, Sweep): sends a workload to a Target on that
//     schedule under a client-side concurrency cap and records every request
//     (send time, first and later chunk times, token counts, errors,
//     client queue time).
//   - Metrics (Summarize, Formulas): vLLM bench serve's definitions and JSON
//     names (TTFT, TPOT, ITL, E2EL, throughputs, goodput, peak concurrency,
//     peak output tokens per second), statistics with numpy's linear
//     percentiles; Capacity finds the largest concurrency or rate of a sweep
//     that meets latency SLOs.
//   - Decode speed at depth (DecodeDepth): llama-bench's "tg n @ d depth",
//     tokens per second of one sequence decoding after a prefill of depth
//     tokens, for one cache format, directly on a runtime.Runner.
//   - The whole benchmark (ModelWorkload, Measure): a model's workload,
//     then every cache of the in-process engine (EngineTarget, one pool
//     per cache in the same KV budget) or every OpenAI-compatible endpoint
//     (EndpointTarget) at every load, the SLO capacity and the decode
//     sweep, into a Report: the JSON of kvq bench --output json (schema
//     kvq.bench/v1), which kvq plan --from reads back with the same type.
//
// The package does not print, draw tables or progress bars (the CLI
// renders; Measure reports progress through a callback), does not open
// connections of its own (EndpointTarget uses the pkg/openai client it is
// given) and reads no environment.
//
// Time: every measurement is taken on the clock in RunOptions (time.Now by
// default); Records store offsets from the run's start, and their JSON form
// gives them in seconds. Nothing here asserts on speed.
//
// Concurrency: Run calls Target.Do from up to min(len(reqs), Concurrency)
// goroutines at once (len(reqs) without a cap; one goroutine per request
// in flight, never more goroutines than requests), so a Target must be
// safe for concurrent use. DecodeDepth drives its Runner from the calling
// goroutine only.
// Callbacks in RunOptions and Options are called one at a time. Workload
// generators, Schedule, Summarize and Capacity are pure functions of their
// arguments; Measure runs its targets one after the other.
package bench

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors of the package.
var (
	// ErrWorkload reports a workload that cannot be built: bad lengths, a
	// malformed or empty prompts file (the message names file:line).
	ErrWorkload = kvqerr.New("bench: bad workload")
	// ErrLoad reports load settings that cannot be run (a negative rate,
	// burstiness or concurrency).
	ErrLoad = kvqerr.New("bench: bad load")
	// ErrGoodput reports a malformed SLO list ("ttft:500ms,tpot:50ms").
	ErrGoodput = errors.New("bench: bad goodput SLO")
	// ErrSweep reports sweep points that cannot be compared (they vary in
	// both rate and concurrency, or there are none).
	ErrSweep = errors.New("bench: bad sweep")
	// ErrOptions reports other options that cannot be used: a percentile
	// outside [0, 100], decode-depth settings.
	ErrOptions = errors.New("bench: bad options")
	// ErrBudget reports a KV budget that cannot be represented (more than
	// 2^63 bytes).
	ErrBudget = kvqerr.New("bench: bad KV budget")
)
