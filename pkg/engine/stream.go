package engine

import (
	"context"
	"io"
	"sync"
)

// Stream delivers one request's tokens as they are generated, then its
// result. The engine never waits for a reader: tokens queue until read.
// One goroutine reads a stream.
type Stream struct {
	mu     sync.Mutex
	toks   []Token
	read   int
	done   bool
	res    Result
	signal chan struct{}
}

func newStream() *Stream { return &Stream{signal: make(chan struct{}, 1)} }

func (s *Stream) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.toks = append(s.toks, t)
	s.mu.Unlock()
	s.notify()
}

func (s *Stream) close(r Result) {
	s.mu.Lock()
	if !s.done {
		s.done, s.res = true, r
	}
	s.mu.Unlock()
	s.notify()
}

func (s *Stream) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Next returns the next token; io.EOF once the request has finished and
// every token was read (then Result has the outcome); ctx's error if it
// ends first.
func (s *Stream) Next(ctx context.Context) (Token, error) {
	for {
		s.mu.Lock()
		if s.read < len(s.toks) {
			t := s.toks[s.read]
			s.read++
			s.mu.Unlock()
			return t, nil
		}
		done := s.done
		s.mu.Unlock()
		if done {
			return Token{}, io.EOF
		}
		select {
		case <-s.signal:
		case <-ctx.Done():
			return Token{}, ctx.Err()
		}
	}
}

// Wait returns the result once the request has finished (discarding
// unread tokens: Result.Tokens has them all).
func (s *Stream) Wait(ctx context.Context) (Result, error) {
	for {
		s.mu.Lock()
		if s.done {
			r := s.res
			s.mu.Unlock()
			return r, nil
		}
		s.mu.Unlock()
		select {
		case <-s.signal:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
}

// Result returns the outcome; valid once Next returned io.EOF or Wait
// returned.
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}
