// Package progressbar shows library progress callbacks as a terminal
// progress bar on standard error, and stays silent when stderr is not a
// terminal.
package progressbar

import (
	"io"

	pb "github.com/schollz/progressbar/v3"
)

// Bar reports done/total progress.
type Bar struct{ bar *pb.ProgressBar }

// New returns a bar writing to w when tty is true; otherwise a silent bar.
func New(w io.Writer, tty bool, total int, description string) *Bar {
	if !tty {
		return &Bar{}
	}
	return &Bar{bar: pb.NewOptions(total,
		pb.OptionSetWriter(w),
		pb.OptionSetDescription(description),
		pb.OptionShowCount(),
		pb.OptionSetElapsedTime(true),
		pb.OptionSetPredictTime(true),
		pb.OptionClearOnFinish(),
		pb.OptionThrottle(100_000_000),
	)}
}

// Set reports done out of total.
func (b *Bar) Set(done, total int) {
	if b.bar == nil {
		return
	}
	b.bar.ChangeMax(total)
	_ = b.bar.Set(done)
}

// Finish clears the bar.
func (b *Bar) Finish() {
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}
