package render

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// ErrFormat reports an unknown output format.
var ErrFormat = errors.New("render: unknown output format")

// Format is an output format.
type Format string

// Output formats.
const (
	FormatTable    Format = "table"
	FormatJSON     Format = "json"
	FormatCSV      Format = "csv"
	FormatMarkdown Format = "markdown"
)

// Formats lists the output formats, for flag help and completion.
func Formats() []string {
	return []string{string(FormatTable), string(FormatJSON), string(FormatCSV), string(FormatMarkdown)}
}

// ParseFormat parses an output format name, case-insensitively ("md" is
// markdown).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatTable, FormatJSON, FormatCSV, FormatMarkdown:
		return f, nil
	case "md":
		return FormatMarkdown, nil
	}
	return "", fmt.Errorf("%w %q (valid: %s)", ErrFormat, s, strings.Join(Formats(), ", "))
}

// Align is a column's alignment.
type Align int

// Alignments.
const (
	Left Align = iota
	Right
)

// Table is a header and rows of cells.
type Table struct {
	// Title is printed above the table (table and markdown output).
	Title  string
	Header []string
	Rows   [][]string
	// Align gives each column's alignment; missing entries are Left.
	Align []Align
	// Notes are printed below the table, one per line.
	Notes []string
	// Key is how many leading columns name a row (0 counts as 1): Shrink
	// repeats them in each part of a table it splits.
	Key int
}

// Report is what a command prints.
type Report struct {
	// Preamble lines are printed before the tables (table and markdown).
	Preamble []string
	Tables   []Table
	// Flat is the single table CSV output gets; nil means Tables[0].
	Flat *Table
	// Value is what JSON output encodes; nil means the tables, as arrays
	// of objects keyed by header.
	Value any
}

// Options tune Write.
type Options struct {
	// TTY selects boxed tables for a terminal; otherwise plain columns.
	TTY bool
}

// Write prints r in format f.
func Write(w io.Writer, f Format, r Report, opts Options) error {
	switch f {
	case FormatJSON:
		v := r.Value
		if v == nil {
			v = tablesAsObjects(r.Tables)
		}
		return WriteJSON(w, v)
	case FormatCSV:
		t := r.Flat
		if t == nil {
			if len(r.Tables) == 0 {
				return nil
			}
			t = &r.Tables[0]
		}
		return WriteCSV(w, *t)
	case FormatMarkdown:
		// Markdown joins consecutive lines into one paragraph: list them.
		md := r
		md.Preamble = nil
		for _, l := range r.Preamble {
			md.Preamble = append(md.Preamble, "- "+mdEscape(l))
		}
		return writeDoc(w, md, WriteMarkdown)
	case FormatTable, "":
		return writeDoc(w, r, func(w io.Writer, t Table) error { return WriteTable(w, t, opts) })
	}
	return fmt.Errorf("%w %q", ErrFormat, f)
}

func writeDoc(w io.Writer, r Report, table func(io.Writer, Table) error) error {
	var b bytes.Buffer
	for _, l := range r.Preamble {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for i, t := range r.Tables {
		if i > 0 || len(r.Preamble) > 0 {
			b.WriteByte('\n')
		}
		if err := table(&b, t); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON encodes v as indented JSON with a final newline. HTML characters
// are not escaped.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteCSV writes the header and rows as RFC 4180 CSV.
func WriteCSV(w io.Writer, t Table) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Header); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil {
		return err
	}
	return cw.Error()
}

func tablesAsObjects(ts []Table) any {
	out := make([][]map[string]string, len(ts))
	for i, t := range ts {
		out[i] = []map[string]string{}
		for _, row := range t.Rows {
			obj := map[string]string{}
			for j, h := range t.Header {
				if j < len(row) {
					obj[h] = row[j]
				}
			}
			out[i] = append(out[i], obj)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

func (t Table) aligns() []tw.Align {
	a := make([]tw.Align, len(t.Header))
	for i := range a {
		a[i] = tw.AlignLeft
		if i < len(t.Align) && t.Align[i] == Right {
			a[i] = tw.AlignRight
		}
	}
	return a
}

// WriteTable prints t as a boxed table (opts.TTY) or as plain columns.
func WriteTable(w io.Writer, t Table, opts Options) error {
	var buf bytes.Buffer
	if t.Title != "" {
		buf.WriteString(t.Title + "\n")
	}
	rendition := tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)}
	pad := tw.PaddingDefault
	if !opts.TTY {
		rendition = tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Lines: tw.LinesNone, Separators: tw.SeparatorsNone},
		}
		pad = tw.Padding{Left: "", Right: "  ", Overwrite: true}
	}
	cell := func(align []tw.Align) tw.CellConfig {
		return tw.CellConfig{
			Formatting: tw.CellFormatting{AutoWrap: tw.WrapNone, AutoFormat: tw.Off},
			Padding:    tw.CellPadding{Global: pad},
			Alignment:  tw.CellAlignment{Global: tw.AlignLeft, PerColumn: align},
			Merging:    tw.CellMerging{Mode: tw.MergeNone},
		}
	}
	var tb bytes.Buffer
	table := tablewriter.NewTable(&tb,
		tablewriter.WithRenderer(renderer.NewBlueprint(rendition)),
		tablewriter.WithConfig(tablewriter.Config{
			Header:   cell(t.aligns()),
			Row:      cell(t.aligns()),
			Footer:   cell(t.aligns()),
			Behavior: tw.Behavior{TrimSpace: tw.Off},
		}),
	)
	table.Header(t.Header)
	if err := table.Bulk(t.Rows); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	if err := table.Render(); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	for _, line := range strings.SplitAfter(tb.String(), "\n") {
		if line == "" {
			continue
		}
		buf.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	for _, n := range t.Notes {
		buf.WriteString(n + "\n")
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteMarkdown prints t as a GitHub-flavoured Markdown table, with the
// title as bold text above it and the notes as a list below. Pipes and
// asterisks in cells are escaped.
func WriteMarkdown(w io.Writer, t Table) error {
	var b bytes.Buffer
	if t.Title != "" {
		fmt.Fprintf(&b, "**%s**\n\n", mdEscape(t.Title))
	}
	row := func(cells []string) {
		b.WriteString("|")
		for i := range t.Header {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + mdEscape(c) + " |")
		}
		b.WriteString("\n")
	}
	row(t.Header)
	b.WriteString("|")
	for _, a := range t.aligns() {
		if a == tw.AlignRight {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		row(r)
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "*", `\*`).Replace(s)
}
