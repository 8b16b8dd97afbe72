package cmdutil

import (
	"github.com/kvqlabs/kvq/cmd/kvq/internal/progressbar"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// StageBars shows a progress bar per stage of a library run (a
// func(stage string, done, total int) callback such as bench.Measure's or
// calibrate.Calibrate's), one at a time: a new stage finishes the last
// one's bar. Finish must be called when the run returns.
type StageBars struct {
	IO    *IOStreams
	stage string
	bar   *progressbar.Bar
}

// Set reports done out of total for stage; it is the library's callback.
func (b *StageBars) Set(stage string, done, total int) {
	if b.bar == nil || stage != b.stage {
		b.Finish()
		b.stage, b.bar = stage, b.IO.Progress(total, stage)
	}
	b.bar.Set(done, total)
}

// Finish finishes the current stage's bar, if any.
func (b *StageBars) Finish() {
	if b.bar != nil {
		b.bar.Finish()
		b.bar = nil
	}
}

// ModelLabel names m in a report: "built-in kvq-probe" when --model was
// not given, else the model's path.
func ModelLabel(m *runtime.Model, given string) string {
	if given == "" {
		return "built-in kvq-probe"
	}
	return m.Path
}
