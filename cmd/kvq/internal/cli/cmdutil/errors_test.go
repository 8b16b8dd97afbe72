package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

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

// TestInputErrors pins the exit-code split on the libraries' input kind.
// The sentinels listed are those this package once listed by hand to exit
// with code 2; they now carry the kind themselves (kvqerr.New), and a new
// sentinel need not be added here.
func TestInputErrors(t *testing.T) {
	input := []error{
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
		quant.ErrUnknownFormat, quant.ErrBadSpec, quant.ErrDim, quant.ErrOption,
		calibrate.ErrData, calibrate.ErrOptions, calibrate.ErrScales,
		eval.ErrOptions, eval.ErrStore, eval.ErrTasks, eval.ErrMetric, eval.ErrReference, eval.ErrSchema, eval.ErrPhrases,
		bench.ErrWorkload, bench.ErrLoad,
		plan.ErrTrace, plan.ErrResults, plan.ErrOptions,
		engine.ErrOptions, serve.ErrOptions,
		backend.ErrUnsupported,
	}
	for _, s := range input {
		err := fmt.Errorf("--model x: %w", s)
		if !IsInputError(err) || !IsUsage(err) {
			t.Errorf("IsInputError(%q) = false, want true", err)
		}
		if !errors.Is(err, s) {
			t.Errorf("errors.Is(%q, %q) = false", err, s)
		}
	}
	_, errOpen := os.Open("no such file, I hope")
	if err := UsageError(fmt.Errorf("--data x: %w", errOpen)); !IsInputError(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("UsageError(open error): IsInputError %v, errors.Is(os.ErrNotExist) %v, want true, true", IsInputError(err), errors.Is(err, os.ErrNotExist))
	}
	if UsageError(nil) != nil {
		t.Errorf("UsageError(nil) != nil")
	}
	for _, err := range []error{
		errOpen, context.Canceled, errors.New("out of memory"),
		engine.ErrRequest, engine.ErrTooLarge, engine.ErrClosed, eval.ErrNotJSON,
		&GateError{Failed: 1, What: "gate(s)"},
	} {
		if IsInputError(fmt.Errorf("x: %w", err)) {
			t.Errorf("IsInputError(%q) = true, want false", err)
		}
	}
}
