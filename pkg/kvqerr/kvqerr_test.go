package kvqerr_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// parseError is a typed error that joins the input kind by its method.
type parseError struct{ off int64 }

func (e *parseError) Error() string    { return fmt.Sprintf("parse error at byte %d", e.off) }
func (e *parseError) InputError() bool { return true }

// notInput wraps an error and takes it out of the input kind.
type notInput struct{ err error }

func (e notInput) Error() string    { return e.err.Error() }
func (e notInput) Unwrap() error    { return e.err }
func (e notInput) InputError() bool { return false }

func TestIsInput(t *testing.T) {
	errBad := kvqerr.New("pkg: bad thing")
	_, errOpen := os.Open("no such file, I hope")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("pkg: out of memory"), false},
		{"sentinel", errBad, true},
		{"wrapped sentinel", fmt.Errorf("model %s: %w", "x.gguf", errBad), true},
		{"twice wrapped sentinel", fmt.Errorf("load: %w", fmt.Errorf("model: %w", errBad)), true},
		{"marked", kvqerr.Input(errOpen), true},
		{"wrapped mark", fmt.Errorf("--data: %w", kvqerr.Input(errOpen)), true},
		{"unmarked os error", errOpen, false},
		{"typed error", fmt.Errorf("x: %w", &parseError{off: 12}), true},
		{"joined", errors.Join(errors.New("other"), errBad), true},
		{"taken out", notInput{errBad}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kvqerr.IsInput(tc.err); got != tc.want {
				t.Errorf("IsInput(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestChain: the input kind keeps messages and errors.Is/As on what it
// holds, and each New is a distinct sentinel.
func TestChain(t *testing.T) {
	a, b := kvqerr.New("pkg: same"), kvqerr.New("pkg: same")
	if errors.Is(a, b) || a == b {
		t.Errorf("two New sentinels with one message compare equal")
	}
	if got := fmt.Errorf("f: %w", a); !errors.Is(got, a) || errors.Is(got, b) {
		t.Errorf("errors.Is on a wrapped sentinel: is a %v, is b %v, want true, false", errors.Is(got, a), errors.Is(got, b))
	}
	if a.Error() != "pkg: same" {
		t.Errorf("New(%q).Error() = %q", "pkg: same", a.Error())
	}
	_, errOpen := os.Open("no such file, I hope")
	m := kvqerr.Input(errOpen)
	if m.Error() != errOpen.Error() {
		t.Errorf("Input(err).Error() = %q, want %q", m.Error(), errOpen.Error())
	}
	if !errors.Is(m, fs.ErrNotExist) {
		t.Errorf("errors.Is(Input(open error), fs.ErrNotExist) = false")
	}
	var pe *fs.PathError
	if !errors.As(m, &pe) {
		t.Errorf("errors.As(Input(open error), *fs.PathError) = false")
	}
	if kvqerr.Input(nil) != nil {
		t.Errorf("Input(nil) != nil")
	}
}

func ExampleIsInput() {
	// In a package's sentinel block:
	errTruncated := kvqerr.New("fmt: truncated")

	err := fmt.Errorf("model.bin: %w", errTruncated)
	fmt.Println(kvqerr.IsInput(err), errors.Is(err, errTruncated))
	fmt.Println(kvqerr.IsInput(errors.New("fmt: out of memory")))
	// Output:
	// true true
	// false
}
