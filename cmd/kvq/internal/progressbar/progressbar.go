// Package progressbar shows library progress callbacks on standard error:
// a redrawn bar on a terminal, and elsewhere (a CI log, a file) a plain
// line at least every Interval with done/total, the elapsed time and an
// estimate of the time left.
package progressbar

import (
	"fmt"
	"io"
	"sync"
	"time"

	pb "github.com/schollz/progressbar/v3"
)

// DefaultInterval is how often a log-style reporter prints a line.
const DefaultInterval = 10 * time.Second

// Options tune New.
type Options struct {
	// TTY selects the redrawn terminal bar; otherwise plain lines.
	TTY bool
	// Interval is the time between plain lines (0: DefaultInterval).
	Interval time.Duration
}

// Bar reports done/total progress. Its methods may be called from several
// goroutines.
type Bar struct {
	bar *pb.ProgressBar // terminal
	log *logBar         // plain lines
}

// New returns a reporter writing to w. Finish must be called on every path:
// a plain-line reporter prints from a goroutine until then.
func New(w io.Writer, total int, description string, opts Options) *Bar {
	if !opts.TTY {
		iv := opts.Interval
		if iv <= 0 {
			iv = DefaultInterval
		}
		l := &logBar{w: w, desc: description, total: total, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
		go l.loop(iv)
		return &Bar{log: l}
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
	switch {
	case b.log != nil:
		b.log.set(done, total)
	case b.bar != nil:
		b.bar.ChangeMax(total)
		_ = b.bar.Set(done)
	}
}

// Finish clears the bar, or stops the plain lines (with a last line when
// any was printed: "finished after", or "stopped after" short of the
// total). It may be called more than once.
func (b *Bar) Finish() {
	switch {
	case b.log != nil:
		b.log.finish()
	case b.bar != nil:
		_ = b.bar.Finish()
	}
}

// logBar prints "DESC: DONE/TOTAL (P%) after T, about R left" every
// interval from its own goroutine, so that a line comes even while one step
// takes long.
type logBar struct {
	mu         sync.Mutex
	w          io.Writer
	desc       string
	n, total   int
	start      time.Time
	printed    bool
	stop, done chan struct{}
	stopOnce   sync.Once
}

func (l *logBar) loop(iv time.Duration) {
	defer close(l.done)
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			l.line(false)
			l.mu.Unlock()
		}
	}
}

func (l *logBar) set(done, total int) {
	l.mu.Lock()
	l.n, l.total = done, total
	l.mu.Unlock()
}

func (l *logBar) finish() {
	l.stopOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		if l.printed {
			l.line(true)
		}
		l.mu.Unlock()
	})
}

// line prints the state; l.mu is held.
func (l *logBar) line(final bool) {
	elapsed := time.Since(l.start)
	l.printed = true
	if final {
		// Short of the total, the work was stopped (Ctrl-C, an error): it
		// did not finish.
		how := "finished"
		if l.n < l.total {
			how = "stopped"
		}
		fmt.Fprintf(l.w, "%s: %d/%d, %s after %s\n", l.desc, l.n, l.total, how, round(elapsed))
		return
	}
	pct := ""
	if l.total > 0 {
		pct = fmt.Sprintf(" (%d%%)", 100*l.n/l.total)
	}
	eta := "ETA unknown"
	if l.n > 0 && l.n <= l.total {
		left := time.Duration(float64(elapsed) * float64(l.total-l.n) / float64(l.n))
		eta = "ETA " + round(left).String()
	}
	fmt.Fprintf(l.w, "%s: %d/%d%s after %s, %s\n", l.desc, l.n, l.total, pct, round(elapsed), eta)
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
