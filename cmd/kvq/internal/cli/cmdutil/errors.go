package cmdutil

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/gguf"
	"github.com/kvqlabs/kvq/pkg/llama2c"
	"github.com/kvqlabs/kvq/pkg/plan"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/safetensors"
	"github.com/kvqlabs/kvq/pkg/serve"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

// inputSentinels are the errors of kvq's parsers, loaders and option
// checks that mean the user's input is at fault: a malformed, truncated or
// unsupported model, tokenizer, config or data file, or options a library
// refused. Whichever command meets one, it exits with code 2.
var inputSentinels = []error{
	// Models and their files.
	runtime.ErrFormat, runtime.ErrModel, runtime.ErrUnsupported,
	gguf.ErrBadMagic, gguf.ErrUnsupportedVersion, gguf.ErrTruncated, gguf.ErrUnknownType, gguf.ErrBadShape,
	gguf.ErrAlignment, gguf.ErrDuplicate, gguf.ErrCorrupt, gguf.ErrKeyNotFound, gguf.ErrWrongType, gguf.ErrOutOfRange,
	safetensors.ErrHeader, safetensors.ErrTruncated, safetensors.ErrJSON, safetensors.ErrDType, safetensors.ErrShape,
	safetensors.ErrOffsets, safetensors.ErrDuplicate, safetensors.ErrMetadata, safetensors.ErrIndex,
	llama2c.ErrHeader, llama2c.ErrTruncated,
	tokenizer.ErrInvalidVocab, tokenizer.ErrUnknownPreTokenizer, tokenizer.ErrFormat, tokenizer.ErrHFFormat, tokenizer.ErrUnsupported,
	chat.ErrUndefined, chat.ErrType, chat.ErrLimit,
	estimate.ErrUnknownModel, estimate.ErrUnknownGPU, estimate.ErrConfig, estimate.ErrPlan, estimate.ErrOverflow,
	estimate.ErrSize, estimate.ErrUnsupported,
	// Cache specs and data files.
	quant.ErrUnknownFormat, quant.ErrBadSpec, quant.ErrDim, quant.ErrOption,
	calibrate.ErrData, calibrate.ErrOptions, calibrate.ErrScales,
	eval.ErrOptions, eval.ErrStore, eval.ErrTasks, eval.ErrMetric, eval.ErrReference, eval.ErrSchema, eval.ErrPhrases,
	bench.ErrWorkload, bench.ErrLoad,
	plan.ErrTrace, plan.ErrResults, plan.ErrOptions,
	engine.ErrOptions, serve.ErrOptions,
	// A cache format the chosen device cannot run.
	backend.ErrUnsupported,
}

// IsInputError reports an error caused by an input file or option the user
// gave: an InputError, or an error wrapping one of the input sentinels.
func IsInputError(err error) bool {
	var ie *InputError
	if errors.As(err, &ie) {
		return true
	}
	for _, s := range inputSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func asFlag(err error, fe **FlagError) bool { return errors.As(err, fe) }
