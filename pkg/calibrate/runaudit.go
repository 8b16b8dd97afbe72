package calibrate

import (
	"context"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
)

// Stages of RunAudit, as its Progress callback names them.
const (
	// StageAudit is the recording pass over the calibration samples.
	StageAudit = "audit"
	// StageEffect is the held-out measurement of the scales' effect.
	StageEffect = "effect"
)

// AuditOptions configure RunAudit.
type AuditOptions struct {
	// Kind is the fp8 encoding the scales are for.
	Kind quant.FP8Kind
	// Data, when set, is recorded to check the scales against the
	// model's keys and values (clipping, subnormals), and the effect of
	// the scales is then measured on Texts (AuditEffect). Without it the
	// audit only reads and checks the scales.
	Data *Data
	// Texts are the held-out texts of the effect measurement, and Text
	// configures their scoring.
	Texts []eval.Text
	Text  eval.TextOptions
	// Workers bounds the CPU backend's goroutines (0: GOMAXPROCS).
	Workers int
	// Backend runs the model (nil: the CPU backend).
	Backend backend.Backend
	// Progress, when set, is called with the stage (StageAudit,
	// StageEffect), the work done and the total: first with nothing done
	// of the samples, then after each sample and each held-out chunk.
	Progress func(stage string, done, total int)
}

// RunAudit audits the scales sh that m ships (or that a file gives for
// it): AuditScales's checks, and with opts.Data the recorded data's
// checks, the data's description and the measured effect (AuditEffect).
// An error wrapping ErrOptions (no held-out text) or eval.ErrOptions (a
// chunk size the scoring refuses) is an option the effect measurement
// refuses.
func RunAudit(ctx context.Context, m *runtime.Model, sh *Shipped, opts AuditOptions) (*Audit, error) {
	if opts.Data == nil {
		return AuditScales(sh, nil, opts.Kind), nil
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	progress(StageAudit, 0, len(opts.Data.Samples))
	rec, err := Record(ctx, m, opts.Data, RunOptions{Workers: opts.Workers, Backend: opts.Backend,
		Progress: func(done, total int) { progress(StageAudit, done, total) }})
	if err != nil {
		return nil, err
	}
	info := opts.Data.Info()
	a := AuditScales(sh, rec, opts.Kind)
	a.Data = &info
	cmp, err := AuditEffect(ctx, m, sh, rec, opts.Kind, CompareOptions{Texts: opts.Texts, Text: opts.Text, Workers: opts.Workers,
		Backend: opts.Backend, Progress: func(done, total int) { progress(StageEffect, done, total) }})
	if err != nil {
		return nil, err
	}
	a.Effect = cmp
	return a, nil
}
