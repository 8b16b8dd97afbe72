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

// writeAll prints ts as WriteTable does and returns the text.
func writeAll(t *testing.T, ts []Table, opts Options) string {
	t.Helper()
	var b bytes.Buffer
	for _, tb := range ts {
		if err := WriteTable(&b, tb, opts); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func widestLine(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

// TestShrink: a table wider than the terminal wraps its long cells (one
// table) or, where its columns cannot sit side by side, splits them into
// parts that repeat the key columns; no word is lost and none is split.
func TestShrink(t *testing.T) {
	long := strings.Repeat("alpha beta ", 12)
	wrap := Table{Title: "wrap", Header: []string{"ID", "NAME", "DETAIL", "N"},
		Rows:  [][]string{{"1", "a name of some length", long, "12"}, {"2", "b", "short", "3"}, {"3", "c", "a-word-of-thirty-columns-wide!", "4"}},
		Align: []Align{Right, Left, Left, Right}, Notes: []string{"note"}}
	var nums []string
	var header []string
	for i := range 16 {
		header = append(header, "COLUMN "+string(rune('A'+i)))
		nums = append(nums, "123.456")
	}
	split := Table{Key: 2, Title: "split", Header: append([]string{"ID", "NAME"}, header...),
		Rows:  [][]string{append([]string{"1", "first"}, nums...), append([]string{"2", "second"}, nums...)},
		Notes: []string{"note"}}
	for _, tty := range []bool{false, true} {
		opts := Options{TTY: tty}
		for _, tc := range []struct {
			tb    Table
			parts int
		}{{wrap, 1}, {split, 2}} {
			parts := Shrink(tc.tb, 60, opts)
			out := writeAll(t, parts, opts)
			if n := widestLine(out); n > 60 || len(parts) < tc.parts {
				t.Errorf("TTY %v %s: %d parts, widest line %d:\n%s", tty, tc.tb.Title, len(parts), n, out)
			}
			if strings.Count(out, tc.tb.Title) != 1 || strings.Count(out, "note") != 1 || !strings.HasSuffix(strings.TrimRight(out, "\n"), "note") {
				t.Errorf("TTY %v %s: the title and notes are not printed once, first and last:\n%s", tty, tc.tb.Title, out)
			}
			whole := writeAll(t, []Table{tc.tb}, opts)
			for _, w := range strings.Fields(whole) {
				if strings.Trim(w, "│─┌┐└┘├┤┬┴┼") != "" && !strings.Contains(out, w) {
					t.Errorf("TTY %v %s: %q lost:\n%s", tty, tc.tb.Title, w, out)
				}
			}
			if len(parts) > 1 {
				for _, p := range parts {
					if p.Header[0] != "ID" || p.Header[1] != "NAME" {
						t.Errorf("TTY %v: a part without the key columns: %q", tty, p.Header)
					}
				}
			}
		}
		if got := Shrink(wrap, 200, opts); len(got) != 1 || got[0].Rows[0][2] != long {
			t.Errorf("TTY %v: a table that fits was changed", tty)
		}
	}
	if got := Shrink(wrap, 0, Options{}); len(got) != 1 || got[0].Rows[0][2] != long {
		t.Error("width 0 changed the table")
	}
}
