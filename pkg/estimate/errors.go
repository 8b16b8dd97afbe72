package estimate

import (
	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors of the package. Errors returned by this package wrap one of
// them (or an error of pkg/quant, pkg/gguf or the file system) and name the
// input that caused them.
var (
	// ErrUnknownModel: no built-in model preset has this name.
	ErrUnknownModel = kvqerr.New("estimate: unknown model")
	// ErrUnknownGPU: no built-in GPU preset has this name.
	ErrUnknownGPU = kvqerr.New("estimate: unknown GPU")
	// ErrConfig: a model description (config.json, GGUF metadata,
	// safetensors header) is malformed or lacks a required field.
	ErrConfig = kvqerr.New("estimate: bad model config")
	// ErrPlan: a plan value is out of range (zero or negative size,
	// parallel sizes that do not divide the heads, ...).
	ErrPlan = kvqerr.New("estimate: bad plan")
	// ErrOverflow: a result does not fit in int64.
	ErrOverflow = kvqerr.New("estimate: arithmetic overflow")
	// ErrSize: a size or count string does not parse.
	ErrSize = kvqerr.New("estimate: bad size")
	// ErrUnsupported: the model uses a feature the estimator does not
	// model (for example recurrent layers).
	ErrUnsupported = kvqerr.New("estimate: unsupported model")
)
