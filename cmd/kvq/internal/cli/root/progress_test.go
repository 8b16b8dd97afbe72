package root

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
)

// lockedBuffer is a bytes.Buffer safe for the progress goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgressOffTerminal: with stderr not a terminal (a CI log), long
// commands print progress lines with done/total and an ETA at the
// interval (10 s by default; shortened here), and nothing after they end.
func TestProgressOffTerminal(t *testing.T) {
	args := tinyEval(t)
	// Enough text that the stage outlasts the 1 ms interval on a fast,
	// idle machine too (2 chunks of 128 tokens took under 1 ms there
	// once caches side by side shared their first layer): flags given
	// twice take the last value.
	evalArgs := append(append([]string{"eval", "--tasks", "copy"}, args...), "--ctx", "512", "--chunks", "8")
	for _, c := range []struct {
		args []string
		line *regexp.Regexp
	}{
		{evalArgs, regexp.MustCompile(`(?m)^eval (text|tasks): \d+/\d+ \(\d+%\) after \S+, ETA (\S+|unknown)$`)},
		{[]string{"calibrate", "stats", args[0], args[1], "--samples", "64", "--seq-len", "256"}, regexp.MustCompile(`(?m)^stats: \d+/64 \(\d+%\) after \S+, ETA \S+`)},
	} {
		var out, errOut lockedBuffer
		f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ProgressInterval: time.Millisecond}, Version: "test"}
		if code := Run(context.Background(), f, c.args); code != 0 {
			t.Fatalf("kvq %v: exit %d: %s", c.args, code, errOut.String())
		}
		got := errOut.String()
		if !c.line.MatchString(got) {
			t.Errorf("kvq %v: no progress line matching %s in stderr:\n%.2000s", c.args, c.line, got)
		}
		time.Sleep(20 * time.Millisecond)
		if errOut.String() != got {
			t.Errorf("kvq %v: progress lines after the command returned", c.args)
		}
	}
}

// TestLongCommandsStateDuration: the help of every long command says how
// long it takes on the built-in model (or, for training, on 2 cores).
func TestLongCommandsStateDuration(t *testing.T) {
	dur := regexp.MustCompile(`(?i)about\s+\d+\s+(s|seconds|minutes?)\b[^.]*on\s+2\s+cores|on\s+2\s+cores[^.]*about\s+\d+\s+(s|seconds|minutes?)\b`)
	for _, c := range [][]string{{"eval"}, {"probe", "eval"}, {"calibrate"}, {"calibrate", "stats"}, {"calibrate", "audit"}, {"bench"}} {
		_, out, _ := run(t, append(c, "--help")...)
		long, _, _ := strings.Cut(out, "\nUsage:")
		if !dur.MatchString(long) {
			t.Errorf("kvq %s --help does not state its duration:\n%s", strings.Join(c, " "), long)
		}
	}
}
