package progressbar

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe strings.Builder.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogLines: off a terminal, a line with done/total and an ETA comes
// every interval, even while no progress is reported, and a last line
// after Finish.
func TestLogLines(t *testing.T) {
	var w syncBuffer
	b := New(&w, 10, "eval tasks", Options{Interval: 20 * time.Millisecond})
	b.Set(0, 10)
	time.Sleep(50 * time.Millisecond)
	b.Set(4, 10)
	time.Sleep(50 * time.Millisecond) // no Set meanwhile: lines still come
	b.Finish()
	b.Finish()
	out := w.String()
	if !strings.Contains(out, "eval tasks: 0/10 (0%) after") || !strings.Contains(out, "ETA unknown") {
		t.Errorf("no line before progress:\n%s", out)
	}
	if n := strings.Count(out, "eval tasks: 4/10 (40%) after"); n < 1 || !regexp.MustCompile(`4/10 \(40%\) after [0-9.]+m?s, ETA [0-9.]+m?s`).MatchString(out) {
		t.Errorf("no done/total line with an ETA:\n%s", out)
	}
	// Finished at 4 of 10: stopped (a cancelled eval said "finished").
	if !regexp.MustCompile(`eval tasks: 4/10, stopped after \S+\n$`).MatchString(out) {
		t.Errorf("no last line saying stopped:\n%s", out)
	}
	before := out
	time.Sleep(50 * time.Millisecond)
	if w.String() != before {
		t.Errorf("lines after Finish:\n%s", w.String())
	}
}

// TestLogFinished: the last line of work done to its total says finished.
func TestLogFinished(t *testing.T) {
	var w syncBuffer
	b := New(&w, 3, "calibrate", Options{Interval: 20 * time.Millisecond})
	time.Sleep(50 * time.Millisecond)
	b.Set(3, 3)
	b.Finish()
	if out := w.String(); !regexp.MustCompile(`calibrate: 3/3, finished after \S+\n$`).MatchString(out) {
		t.Errorf("no last line saying finished:\n%s", out)
	}
}

// TestLogQuiet: a run shorter than the interval prints nothing.
func TestLogQuiet(t *testing.T) {
	var w syncBuffer
	b := New(&w, 3, "x", Options{Interval: time.Hour})
	b.Set(3, 3)
	b.Finish()
	if w.String() != "" {
		t.Errorf("short run printed %q", w.String())
	}
}
