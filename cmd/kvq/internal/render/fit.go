package render

import (
	"strings"
	"unicode/utf8"
)

// Fit returns t laid out for a width-column terminal as WriteTable prints
// it with opts: the cells of column col are wrapped at spaces (onto more
// lines of the same row) until the table fits, but not below minWidth
// columns; the title and notes are wrapped too. A table that fits, or a
// width ≤ 0, is returned as it is.
func Fit(t Table, width, col, minWidth int, opts Options) Table {
	if width <= 0 {
		return t
	}
	t.Title = wrapText(t.Title, width, "")
	var notes []string
	for _, n := range t.Notes {
		notes = append(notes, wrapText(n, width, "  "))
	}
	t.Notes = notes
	w := widths(t)
	if col < 0 || col >= len(w) {
		return t
	}
	total := 0
	for _, c := range w {
		total += c
	}
	if opts.TTY {
		total += 3*len(w) + 1 // "│ " before each cell, " " after, and the last "│"
	} else {
		total += 2 * (len(w) - 1) // two spaces between columns
	}
	if total <= width {
		return t
	}
	room := max(w[col]-(total-width), minWidth, utf8.RuneCountInString(t.Header[col]))
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = append([]string(nil), r...)
		if col < len(r) {
			rows[i][col] = wrapText(r[col], room, "")
		}
	}
	t.Rows = rows
	return t
}

// Drop returns t without the columns named in headers.
func Drop(t Table, headers ...string) Table {
	var keep []int
	for i, h := range t.Header {
		drop := false
		for _, d := range headers {
			drop = drop || h == d
		}
		if !drop {
			keep = append(keep, i)
		}
	}
	pick := func(cells []string) []string {
		var out []string
		for _, i := range keep {
			if i < len(cells) {
				out = append(out, cells[i])
			}
		}
		return out
	}
	out := t
	out.Header = pick(t.Header)
	out.Rows = nil
	for _, r := range t.Rows {
		out.Rows = append(out.Rows, pick(r))
	}
	out.Align = nil
	for _, i := range keep {
		a := Left
		if i < len(t.Align) {
			a = t.Align[i]
		}
		out.Align = append(out.Align, a)
	}
	return out
}

// widths is the widest line of each column, header included.
func widths(t Table) []int {
	w := make([]int, len(t.Header))
	measure := func(i int, s string) {
		for _, l := range strings.Split(s, "\n") {
			w[i] = max(w[i], utf8.RuneCountInString(l))
		}
	}
	for i, h := range t.Header {
		measure(i, h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(w) {
				measure(i, c)
			}
		}
	}
	return w
}

// wrapText breaks s at spaces into lines of at most width columns, the
// lines after the first prefixed with indent.
func wrapText(s string, width int, indent string) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return WrapWords(s, width, 0, indent)
}

// WrapWords writes the words of s (a unit kept with the number before it)
// from column col on, breaking before a word that would pass width (a
// word longer than the room stays whole) and starting each further line
// with indent.
func WrapWords(s string, width, col int, indent string) string {
	var b strings.Builder
	for i, w := range words(s) {
		n := utf8.RuneCountInString(w)
		switch {
		case i == 0:
		case col+1+n > width:
			b.WriteString("\n" + indent)
			col = utf8.RuneCountInString(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
	}
	return b.String()
}

// units are the words that stay on the line of the number before them.
var units = map[string]bool{"B": true, "KiB": true, "MiB": true, "GiB": true, "TiB": true, "KB": true, "MB": true, "GB": true, "TB": true, "tok": true}

// words splits s at spaces, keeping a unit with its number ("14.96 GiB").
func words(s string) []string {
	var out []string
	for _, w := range strings.Fields(s) {
		if n := len(out); n > 0 && units[strings.TrimRight(w, ",.;:)")] {
			out[n-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}
