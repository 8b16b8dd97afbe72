package serve

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/tokenizer"
)

func testTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Seed: 1}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.Tokenizer
}

// TestTextStreamCharacters: multi-byte characters split over byte-level
// tokens are released whole, and the pieces concatenate to the decode.
func TestTextStreamCharacters(t *testing.T) {
	tok := testTokenizer(t)
	const text = "héllo wörld € 😀 日本語 the end"
	ids := tok.Encode(text, false)
	if len(ids) <= utf8.RuneCountInString(text)/2 {
		t.Fatalf("expected byte tokens: %d ids", len(ids))
	}
	ts := newTextStream(tok, -1, nil)
	var got strings.Builder
	for _, id := range ids {
		_, _, d, stopped := ts.push(id)
		if stopped || !utf8.ValidString(d) {
			t.Fatalf("push released %q (stopped %v)", d, stopped)
		}
		got.WriteString(d)
	}
	if rest := ts.flush(); rest != "" {
		t.Errorf("flush = %q, want nothing held", rest)
	}
	if got.String() != text || ts.text() != text {
		t.Errorf("released %q, text %q, want %q", got.String(), ts.text(), text)
	}
}

// TestTextStreamStops: a stop string is cut out wherever the tokens split
// it, text up to it is released, and what could still become a stop
// string is held back until it cannot.
func TestTextStreamStops(t *testing.T) {
	tok := testTokenizer(t)
	for _, tc := range []struct {
		text  string
		stops []string
		want  string
		stop  string
	}{
		{"the weather is fine. STOP here", []string{"STOP"}, "the weather is fine. ", "STOP"},
		{"abc wörld xyz", []string{"rld", "wö"}, "abc ", "wö"},
		{"no stop in here", []string{"zz"}, "no stop in here", ""},
		{"ends with a partial S", []string{"STOP"}, "ends with a partial S", ""},
		{"€€ twice", []string{"€ t"}, "€", "€ t"},
	} {
		ts := newTextStream(tok, -1, tc.stops)
		var got strings.Builder
		stopped := false
		for _, id := range tok.Encode(tc.text, false) {
			_, _, d, s := ts.push(id)
			got.WriteString(d)
			if s {
				stopped = true
				break
			}
			// The last hold bytes stay back: a stop string may be completing.
			if rel := got.String(); len(ts.text())-len(rel) < min(ts.hold, len(ts.text())) {
				t.Errorf("%q: released %q of %q, holding fewer than %d bytes", tc.text, rel, ts.text(), ts.hold)
			}
		}
		if !stopped {
			got.WriteString(ts.flush())
		}
		if got.String() != tc.want || ts.text() != tc.want || ts.stop != tc.stop || stopped != (tc.stop != "") {
			t.Errorf("%q stops %q: released %q, text %q, stop %q; want %q, %q", tc.text, tc.stops, got.String(), ts.text(), ts.stop, tc.want, tc.stop)
		}
	}
}

// TestTextStreamRandom: over random ids (byte tokens split and garble
// characters), the releases concatenate to the decode of the ids (cut at
// the first stop string), never cut inside a character (a continuation
// byte never starts what is held back), and the offsets count the code points before each piece.
func TestTextStreamRandom(t *testing.T) {
	tok := testTokenizer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		ids := make([]int, 1+rng.IntN(40))
		for i := range ids {
			ids[i] = rng.IntN(tok.VocabSize())
		}
		var stops []string
		if trial%2 == 0 {
			full := tok.Decode(ids)
			if len(full) > 4 {
				i := rng.IntN(len(full) - 3)
				stops = []string{full[i : i+1+rng.IntN(3)]}
			}
		}
		ts := newTextStream(tok, -1, stops)
		ts.offsets = true
		var got strings.Builder
		var cuts []int
		n := 0
		for _, id := range ids {
			before := ts.text()
			_, off, d, s := ts.push(id)
			n++
			if off != utf8.RuneCountInString(before) {
				t.Fatalf("offset %d, want %d", off, utf8.RuneCountInString(before))
			}
			got.WriteString(d)
			cuts = append(cuts, got.Len())
			if s {
				break
			}
		}
		got.WriteString(ts.flush())
		for _, p := range cuts {
			if splits(ts.text(), p) {
				t.Fatalf("trial %d: a release ended at byte %d, inside a character of %q", trial, p, ts.text())
			}
		}
		want := tok.Decode(ids[:n])
		if len(stops) > 0 {
			if i := strings.Index(want, stops[0]); i >= 0 {
				want = want[:i]
			}
		}
		if got.String() != want {
			t.Fatalf("trial %d: released %q, want %q (stops %q)", trial, got.String(), want, stops)
		}
	}
}

// splits reports whether position p of s falls inside a valid multi-byte
// character.
func splits(s string, p int) bool {
	for q := p - 1; q >= 0 && q >= p-3; q-- {
		if utf8.RuneStart(s[q]) {
			r, n := utf8.DecodeRuneInString(s[q:])
			return r != utf8.RuneError && q+n > p
		}
	}
	return false
}
