// Package cmdutil holds what kvq's cobra commands share: the Factory of
// dependencies, I/O streams, and the error kinds that decide exit codes.
package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/kvqlabs/kvq/internal/progressbar"
	"github.com/spf13/cobra"
)

// Exit codes of the kvq binary.
const (
	ExitOK        = 0
	ExitError     = 1 // runtime failure
	ExitUsage     = 2 // bad flags, arguments or input
	ExitGate      = 3 // a check ran and failed: a kvq eval gate
	ExitCancelled = 130
)

// GateError reports a check that ran and failed (kvq eval's gates): exit
// code 3, after the command has named each failure on stderr.
type GateError struct {
	Failed int
	What   string // "gate(s)"
}

func (e *GateError) Error() string { return fmt.Sprintf("%d %s failed", e.Failed, e.What) }

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY report whether Out and ErrOut are terminals.
	OutTTY, ErrTTY bool
	// ProgressInterval is how often progress lines are printed when ErrOut
	// is not a terminal; 0 means progressbar.DefaultInterval.
	ProgressInterval time.Duration

	progressMu sync.Mutex
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, OutTTY: isTTY(os.Stdout), ErrTTY: isTTY(os.Stderr)}
}

func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Progress returns a progress reporter for total steps on ErrOut: a bar on
// a terminal, otherwise a plain line at least every ProgressInterval. The
// caller must Finish it on every path.
func (s *IOStreams) Progress(total int, description string) *progressbar.Bar {
	return progressbar.New(lockedWriter{&s.progressMu, s.ErrOut}, total, description,
		progressbar.Options{TTY: s.ErrTTY, Interval: s.ProgressInterval})
}

// lockedWriter serializes the writes of progress reporters that share a
// stream.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Factory provides dependencies to commands.
type Factory struct {
	IO      *IOStreams
	Version string
}

// FlagError is a usage error: a bad flag value or argument. It maps to
// exit code 2.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf makes a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// UsageError marks err (for example a malformed input file the user named) as
// a usage problem (exit 2) while keeping it for errors.Is/As.
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return &FlagError{Err: err}
}

// ErrNotImplemented marks a subcommand that is not built yet.
var ErrNotImplemented = errors.New("not implemented yet")

// NotImplemented returns a RunE that reports the command is not built.
func NotImplemented(what string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return fmt.Errorf("kvq %s: %w (see the project's open issues)", what, ErrNotImplemented)
	}
}
