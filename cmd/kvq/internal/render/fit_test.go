package render

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFit(t *testing.T) {
	long := strings.Repeat("word ", 30)
	tb := Table{Title: "T", Header: []string{"name", "bits", "what"}, Rows: [][]string{{"fp16", "16", long}, {"int4", "4.5", "short"}},
		Align: []Align{Left, Right, Left}, Notes: []string{strings.Repeat("note ", 40)}}
	for _, tty := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteTable(&b, Fit(tb, 60, 2, 10, Options{TTY: tty}), Options{TTY: tty}); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > 60 {
				t.Errorf("TTY %v: line of %d columns: %q", tty, n, l)
			}
		}
		if strings.Count(b.String(), "word") != 30 || strings.Count(b.String(), "note") != 40 {
			t.Errorf("TTY %v: words lost:\n%s", tty, b.String())
		}
	}
	if got := Fit(tb, 0, 2, 10, Options{}); got.Rows[0][2] != long {
		t.Error("width 0 changed the table")
	}
	d := Drop(tb, "bits")
	if len(d.Header) != 2 || d.Rows[1][1] != "short" || d.Align[1] != Left {
		t.Errorf("Drop: %+v", d)
	}
}
