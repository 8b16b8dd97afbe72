// Package cmdutil holds what kvq's cobra commands share: the Factory of
// dependencies, I/O streams, and the error kinds that decide exit codes.
package cmdutil

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/progressbar"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/kvqerr"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"golang.org/x/term"
)

// Exit codes of the kvq binary: one policy for every command.
const (
	ExitOK        = 0
	ExitError     = 1 // runtime failure
	ExitUsage     = 2 // bad flags or arguments; a missing, unreadable, malformed or truncated input file
	ExitGate      = 3 // a check ran and failed: a kvq eval gate, a kvq calibrate audit error
	ExitHold      = 4 // kvq canary: a bounded watch ended without enough evidence for a verdict
	ExitCancelled = 130
)

// ExitCodesHelp is the exit-code paragraph of a command's long help. check,
// when not empty, says what exit code 3 means for the command ("a gate
// failed").
func ExitCodesHelp(check string) string {
	s := "Exit codes: 0 ok, 1 runtime failure, 2 usage error (bad flag or argument; " +
		"a missing, unreadable, malformed or truncated model, tokenizer, config or data file)"
	if check != "" {
		s += ", 3 " + check
	}
	return Wrap(s+", 130 interrupted (Ctrl-C, SIGTERM).", 78)
}

// Wrap breaks s into lines of at most width columns at spaces (a word
// longer than width stays whole).
func Wrap(s string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(s) {
		n := utf8.RuneCountInString(w)
		switch {
		case col == 0:
		case col+1+n > width:
			b.WriteByte('\n')
			col = 0
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
	}
	return b.String()
}

// GateError reports a check that ran and failed (kvq eval's gates, kvq
// calibrate audit's error-level findings): exit code 3, after the command
// has named each failure on stderr.
type GateError struct {
	Failed int
	What   string // "gate(s)"
}

func (e *GateError) Error() string { return fmt.Sprintf("%d %s failed", e.Failed, e.What) }

// HoldError reports a kvq canary watch that ended on hold (not enough
// evidence to promote or roll back): exit code 4.
type HoldError struct{ Reason string }

func (e *HoldError) Error() string { return "verdict hold: " + e.Reason }

// DefaultColumns is the width help and fitted tables wrap to when standard
// output is not a terminal.
const DefaultColumns = 100

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY report whether Out and ErrOut are terminals.
	OutTTY, ErrTTY bool
	// Width is the terminal's width in columns when Out is one; 0 means
	// DefaultColumns.
	Width int
	// ProgressInterval is how often progress lines are printed when ErrOut
	// is not a terminal; 0 means progressbar.DefaultInterval.
	ProgressInterval time.Duration

	progressMu sync.Mutex
}

// System returns the process's streams.
func System() *IOStreams {
	s := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, OutTTY: isTTY(os.Stdout), ErrTTY: isTTY(os.Stderr)}
	if s.OutTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
			s.Width = w
		}
	}
	return s
}

func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Columns is the width help and fitted tables wrap to: the terminal's, or
// DefaultColumns when standard output is not a terminal.
func (s *IOStreams) Columns() int {
	if s.Width > 0 {
		return s.Width
	}
	return DefaultColumns
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
	// Backends are the backends --device chooses among and kvq version
	// lists (nil: Backends(), every backend compiled into kvq).
	Backends *backend.Registry
}

// FlagError is a usage error: a bad flag value or argument. It maps to
// exit code 2, and the message is followed by a pointer to the command's
// help.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf makes a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// UsageError marks err (for example a missing or malformed input file the
// user named) as an input error (kvqerr.Input): exit code 2, without the
// pointer to the help, since no flag was wrong. It keeps err for
// errors.Is/As.
func UsageError(err error) error { return kvqerr.Input(err) }

// IsUsage reports errors that exit with code 2: flag errors, cobra's own
// argument and command errors, and input errors (kvqerr.IsInput).
func IsUsage(err error) bool {
	return IsFlagError(err) || IsInputError(err)
}

// IsFlagError reports a bad flag or argument: a FlagError, or one of
// cobra's own errors, which cobra returns as plain errors.
func IsFlagError(err error) bool {
	var fe *FlagError
	if asFlag(err, &fe) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "accepts ", "invalid argument", "flag needs an argument", "if any flags in the group"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// label is a short "Name: " at the start of a line.
var label = regexp.MustCompile(`^ *[A-Za-z][A-Za-z0-9 /-]{0,24}: +`)

// WrapHanging wraps each line of s that is wider than width at spaces.
// The continuation lines are indented to where the line's text starts
// after its label: past the first run of two spaces that follows the
// line's own indentation ("  kvq:requests   the requests ..."), or two
// columns deeper than the line ("  TTFT = ..."). Lines that fit are kept
// as they are.
func WrapHanging(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if utf8.RuneCountInString(l) <= width {
			continue
		}
		lead := len(l) - len(strings.TrimLeft(l, " "))
		start, hang := lead, lead+2 // byte offset of the wrapped text, its column
		if j := strings.Index(l[lead:], "  "); j > 0 && j < 40 {
			k := lead + j
			for k < len(l) && l[k] == ' ' {
				k++
			}
			if c := utf8.RuneCountInString(l[:k]); c <= width/2 {
				start, hang = k, c
			}
		} else if m := label.FindStringIndex(l); m != nil && m[1] <= width/2 {
			start, hang = m[1], utf8.RuneCountInString(l[:m[1]]) // "KV budget: ..."
		}
		lines[i] = l[:start] + render.WrapWords(l[start:], width, utf8.RuneCountInString(l[:start]), strings.Repeat(" ", hang))
	}
	return strings.Join(lines, "\n")
}

// FitReport returns r laid out for the terminal of s when it is printed
// as a table (format table and no --wide): the preamble, titles and notes
// wrapped with WrapHanging, and each table shrunk by render.Shrink, so
// that no line is wider than s.Columns(). Other formats, and wide, get r
// as it is.
func (s *IOStreams) FitReport(r render.Report, f render.Format, wide bool) render.Report {
	if wide || (f != render.FormatTable && f != "") {
		return r
	}
	width := s.Columns()
	out := r
	out.Preamble = make([]string, len(r.Preamble))
	for i, l := range r.Preamble {
		out.Preamble[i] = WrapHanging(l, width)
	}
	out.Tables = nil
	for _, t := range r.Tables {
		t.Title = WrapHanging(t.Title, width)
		notes := make([]string, len(t.Notes))
		for i, n := range t.Notes {
			notes[i] = WrapHanging(n, width)
		}
		t.Notes = notes
		out.Tables = append(out.Tables, render.Shrink(t, width, render.Options{TTY: s.OutTTY})...)
	}
	return out
}
