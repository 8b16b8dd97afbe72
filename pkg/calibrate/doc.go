// Package calibrate implements kvq calibrate: it runs a model on
// calibration data with a runtime.KVObserver, records what the keys (after
// and before RoPE) and values really look like per layer, KV head and
// channel, turns those statistics into fp8 KV-cache scales by the rules of
// the engines that define each strategy (vLLM's default and
// calculate_kv_scales, llm-compressor's observers, percentile clipping),
// fits KVQuant codebooks, writes the scales in kvq's format and in the
// formats vLLM and SGLang load, compares strategies by measurement, and
// audits the scales a checkpoint already ships.
//
// Calibrate runs the whole of kvq calibrate but the writing (Write writes
// the exports and codebooks) into a Result, the JSON of kvq calibrate
// --output json (schema kvq.calibrate/v1); Audit is kvq calibrate audit's
// (kvq.calibrate.audit/v1). kvq plan --from reads both back with these
// types. The package prints nothing: progress goes through callbacks.
//
// The engines' rules each strategy follows are in docs/quant-schemes.md
// §1.2–1.4.
package calibrate

import (
	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors of the package. Each error it returns about user input wraps one.
var (
	// ErrData: calibration data that cannot be read or is unusable (a
	// malformed JSONL line, no tokens, a chat without a template).
	ErrData = kvqerr.New("calibrate: bad calibration data")
	// ErrOptions: an unknown strategy, granularity or dtype, or settings
	// that contradict each other.
	ErrOptions = kvqerr.New("calibrate: bad options")
	// ErrScales: a scales file or checkpoint whose scales cannot be read or
	// do not fit the model (wrong layer or head count, malformed values).
	ErrScales = kvqerr.New("calibrate: bad scales")
)
