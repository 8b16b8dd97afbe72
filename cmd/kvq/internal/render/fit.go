package render

import (
	"slices"
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

// Shrink returns t laid out for a width-column terminal as WriteTable
// prints it with opts, as one table or, where its columns cannot fit side
// by side, several. A table that fits, or a width ≤ 0, is returned as it
// is. Otherwise the widest columns are wrapped at spaces (onto more lines
// of the same row) down to a common width, none below its header, its
// longest word or minCell columns. Where even that does not fit, the
// columns are split across consecutive tables, each repeating the first
// t.Key columns (at least one) that name a row, unwrapped where they take
// at most half the width; the first part keeps the title and the last the
// notes, and a part leaves out the rows that have nothing in its own
// columns. Titles and notes are not wrapped (the caller wraps
// them).
func Shrink(t Table, width int, opts Options) []Table {
	if width <= 0 || tableWidth(widths(t), opts) <= width || len(t.Header) == 0 {
		return []Table{t}
	}
	floor := floors(t)
	if tableWidth(floor, opts) <= width {
		return []Table{wrapColumns(t, floor, width, opts)}
	}
	key := min(max(t.Key, 1), len(floor))
	if w := widths(t); tableWidth(w[:key], opts) <= width/2 { // the key columns repeat whole
		copy(floor, w[:key])
	}
	var groups [][]int
	cur := keyColumns(key)
	for i := key; i < len(floor); i++ {
		next := append(append([]int(nil), cur...), i)
		if len(cur) > key && tableWidth(pick(floor, next), opts) > width {
			groups = append(groups, cur)
			next = append(keyColumns(key), i)
		}
		cur = next
	}
	groups = append(groups, cur)
	var out []Table
	for g, cols := range groups {
		part := Select(t, cols)
		if g > 0 {
			part.Title = ""
		}
		if g < len(groups)-1 {
			part.Notes = nil
		}
		if g > 0 { // a row with nothing in this part's own columns is left out of it
			rows := part.Rows[:0:0]
			for _, r := range part.Rows {
				if strings.Join(r[key:], "") != "" {
					rows = append(rows, r)
				}
			}
			part.Rows = rows
		}
		out = append(out, wrapColumns(part, pick(floor, cols), width, opts))
	}
	return out
}

// floors is how narrow each column of t can wrap: to its header, its
// longest word, or minCell columns, whichever is widest, but no wider than
// the column is.
func floors(t Table) []int {
	w := widths(t)
	f := make([]int, len(w))
	for i := range w {
		f[i] = max(headerWidth(t.Header[i]), minCell)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(f) {
				for _, word := range words(c) {
					f[i] = max(f[i], utf8.RuneCountInString(word))
				}
			}
		}
	}
	for i := range f {
		f[i] = min(f[i], w[i])
	}
	return f
}

// minCell is the narrowest Shrink wraps a column to, its header aside.
const minCell = 12

func keyColumns(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = i
	}
	return c
}

func pick(w, cols []int) []int {
	out := make([]int, len(cols))
	for j, i := range cols {
		out[j] = w[i]
	}
	return out
}

// Select returns t with only the columns cols, in that order.
func Select(t Table, cols []int) Table {
	sel := func(cells []string) []string {
		out := make([]string, len(cols))
		for j, i := range cols {
			if i < len(cells) {
				out[j] = cells[i]
			}
		}
		return out
	}
	out := t
	out.Header = sel(t.Header)
	out.Rows = make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		out.Rows[r] = sel(row)
	}
	out.Align = make([]Align, len(cols))
	for j, i := range cols {
		if i < len(t.Align) {
			out.Align[j] = t.Align[i]
		}
	}
	out.Key = min(t.Key, len(cols))
	return out
}

// tableWidth is the width of a table whose columns are w wide.
func tableWidth(w []int, opts Options) int {
	total := 0
	for _, c := range w {
		total += c
	}
	if opts.TTY {
		return total + 3*len(w) + 1 // "│ " before each cell, " " after, and the last "│"
	}
	return total + 2*(len(w)-1) // two spaces between columns
}

func headerWidth(h string) int {
	n := 0
	for _, l := range strings.Split(h, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

// wrapColumns wraps the widest columns of t to a common width, the
// largest with which the table fits (a column not below its floor), and
// again while a word too long for its room widens a column.
func wrapColumns(t Table, floor []int, width int, opts Options) Table {
	w := widths(t)
	floor = slices.Clone(floor)
	out := t
	for range len(w) + 1 {
		// The largest cap with which the capped columns fit.
		room := make([]int, len(w))
		capAt := func(c int) []int {
			for i := range w {
				room[i] = max(floor[i], min(w[i], c))
			}
			return room
		}
		c := 0
		for hi := slices.Max(w); c < hi && tableWidth(capAt(c+1), opts) <= width; {
			c++
		}
		capAt(c)
		out = t
		out.Rows = make([][]string, len(t.Rows))
		for r, row := range t.Rows {
			out.Rows[r] = append([]string(nil), row...)
			for i := range row {
				if i < len(w) && w[i] > room[i] {
					out.Rows[r][i] = wrapLines(row[i], room[i])
				}
			}
		}
		got := widths(out)
		wider := false
		for i := range got {
			if got[i] > room[i] { // a long word: the column keeps it
				floor[i], wider = got[i], true
			}
		}
		if !wider {
			break
		}
	}
	return out
}

// wrapLines wraps each line of s to width.
func wrapLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = wrapText(l, width, "")
	}
	return strings.Join(lines, "\n")
}
