// Package kvqerr holds the one error kind kvq's libraries share: an input
// error, an error caused by what the user gave rather than by the machine
// or by kvq. A missing, unreadable, malformed or truncated model,
// tokenizer, config or data file, an unknown format spec and an option
// value a library refuses are input errors; a failed allocation, a
// device fault or a bug are not. kvq's command layer exits with code 2 on
// an input error and 1 on any other.
//
// A package declares its input sentinels with New in place of errors.New,
// and marks a one-off error (an os.Open failure on a path the user named)
// with Input. Both keep errors.Is and errors.As working on what they
// hold: a sentinel made by New is compared by identity like any other, and
// Input's error unwraps to the error it marks.
//
// The kind is a method, not a type: an error is an input error when the
// first error in its chain (errors.As order) that has a method
// InputError() bool returns true from it. A typed error (a parse error
// that carries an offset) joins the kind by declaring that method, without
// importing this package; a wrapper may leave it by returning false.
//
// The package imports only the standard library, so that the leaf parsers
// (pkg/gguf, pkg/safetensors) and pkg/quant can use it.
package kvqerr

import "errors"

// inputError is an error of the input kind: a sentinel made by New (err
// nil) or an error marked by Input.
type inputError struct {
	msg string
	err error
}

func (e *inputError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.msg
}

func (e *inputError) Unwrap() error { return e.err }

// InputError reports that the error is the user's input's fault.
func (e *inputError) InputError() bool { return true }

// New returns a sentinel error of the input kind whose message is text.
// Like errors.New, each call returns a distinct error.
func New(text string) error { return &inputError{msg: text} }

// Input marks err as an input error, keeping its message and its chain
// for errors.Is and errors.As. Input(nil) is nil.
func Input(err error) error {
	if err == nil {
		return nil
	}
	return &inputError{err: err}
}

// IsInput reports whether err is an input error: whether the first error
// in its chain that has a method InputError() bool returns true from it.
func IsInput(err error) bool {
	var k interface{ InputError() bool }
	return errors.As(err, &k) && k.InputError()
}
