package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// ErrFigure reports a figure whose SVG cannot be inlined in an HTML page.
var ErrFigure = errors.New("render: bad figure")

// HTMLDoc is a self-contained report page: a title, a subtitle and
// sections, written by WriteHTML.
type HTMLDoc struct {
	// Title heads the page and names it in the browser; empty is "kvq
	// report".
	Title    string
	Subtitle string
	Sections []HTMLSection
}

// HTMLSection is a heading followed by its paragraphs, then its tables,
// then its cards, then its figures. All text is plain: it is escaped, never
// read as HTML.
type HTMLSection struct {
	Heading    string
	Paragraphs []string
	Tables     []Table
	Cards      *HTMLCards
	Figures    []Figure
}

// HTMLCards is a list of cards the reader can filter in the browser: one
// drop-down per filter, offering "all" and every value the cards hold, in
// the order they first appear. The filtering is the page's only script,
// inline, allowed by its hash in the page's Content-Security-Policy; a page
// without cards has no script at all.
type HTMLCards struct {
	// Filters name the drop-downs (e.g. "suite", "cache").
	Filters []string
	Cards   []HTMLCard
}

// HTMLCard is one card: a title, an optional badge, its value for each
// filter, and labelled fields of preformatted text.
type HTMLCard struct {
	Title string
	// Badge is a short label after the title; Alert draws it in the
	// colour of a regression rather than of an improvement.
	Badge string
	Alert bool
	// Tags holds the card's value for each of HTMLCards.Filters, in order.
	Tags   []string
	Fields []HTMLField
}

// HTMLField is a label over a block of text shown as written (line
// breaks and spaces kept). Two Half fields in a row share a line, side by
// side (on a page wide enough); other fields take the card's width.
type HTMLField struct {
	Label, Text string
	Half        bool
}

// Figure is an SVG image with a caption below it.
type Figure struct {
	Caption string
	// SVG is a document written by WriteSVG or WriteHeatmapSVG. It is
	// inlined as it is, not escaped, so it must come from those writers,
	// never from user input. WriteHTML still refuses SVG that is not
	// well-formed, whose root is not <svg>, or that holds anything able
	// to run code or fetch a resource (script, foreignObject, a, image
	// and use elements, on* and href attributes, url() values).
	SVG []byte
}

// WriteHTML writes d as one HTML5 page that needs nothing else: the CSS is
// inline, and there are no scripts, fonts, images to fetch or links out
// (a Content-Security-Policy meta tag forbids them to the browser too). It
// prints on paper as it reads on screen.
//
// Table cells follow Table.Align (Right for numbers, in tabular figures),
// the Title is the table's caption and the Notes follow it. The page is
// written as polyglot markup (void elements closed with "/>"), so an XML
// parser reads it too.
func WriteHTML(w io.Writer, d HTMLDoc) error {
	page := htmlPage{Title: d.Title, Subtitle: d.Subtitle}
	if page.Title == "" {
		page.Title = "kvq report"
	}
	for si, s := range d.Sections {
		hs := htmlSection{Heading: s.Heading, Paragraphs: s.Paragraphs}
		for _, t := range s.Tables {
			hs.Tables = append(hs.Tables, htmlTableOf(t))
		}
		if s.Cards != nil {
			c, err := htmlCardsOf(*s.Cards)
			if err != nil {
				return fmt.Errorf("render: html: section %d (%q): %w", si+1, s.Heading, err)
			}
			hs.Cards = &c
			page.Script, page.ScriptHash = cardsScript, scriptHash(cardsScript)
		}
		for fi, f := range s.Figures {
			svg, err := inlineSVG(f.SVG)
			if err != nil {
				return fmt.Errorf("%w: section %d (%q) figure %d (%q): %w", ErrFigure, si+1, s.Heading, fi+1, f.Caption, err)
			}
			hs.Figures = append(hs.Figures, htmlFigure{Caption: f.Caption, SVG: svg})
		}
		page.Sections = append(page.Sections, hs)
	}
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, page); err != nil {
		return fmt.Errorf("render: html: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

type htmlPage struct {
	Title, Subtitle string
	// Script, when not empty, is the page's one script, which its
	// Content-Security-Policy allows by ScriptHash.
	Script     template.JS
	ScriptHash string
	Sections   []htmlSection
}

type htmlSection struct {
	Heading    string
	Paragraphs []string
	Tables     []htmlTable
	Cards      *htmlCards
	Figures    []htmlFigure
}

type htmlFilter struct {
	Name   string
	Values []string
}

type htmlCards struct {
	Filters []htmlFilter
	Cards   []htmlCard
}

type htmlCard struct {
	HTMLCard
	// TagsJSON is Tags as a JSON array, for the script.
	TagsJSON string
}

// htmlCardsOf lists each filter's values, in the order the cards first
// hold them.
func htmlCardsOf(c HTMLCards) (htmlCards, error) {
	out := htmlCards{Filters: make([]htmlFilter, len(c.Filters))}
	seen := make([]map[string]bool, len(c.Filters))
	for i, f := range c.Filters {
		out.Filters[i].Name = f
		seen[i] = map[string]bool{}
	}
	for ci, card := range c.Cards {
		if len(card.Tags) != len(c.Filters) {
			return htmlCards{}, fmt.Errorf("card %d (%q) has %d tags for %d filters", ci+1, card.Title, len(card.Tags), len(c.Filters))
		}
		for i, v := range card.Tags {
			if !seen[i][v] {
				seen[i][v] = true
				out.Filters[i].Values = append(out.Filters[i].Values, v)
			}
		}
		tags, err := json.Marshal(card.Tags)
		if err != nil {
			return htmlCards{}, err
		}
		out.Cards = append(out.Cards, htmlCard{HTMLCard: card, TagsJSON: string(tags)})
	}
	return out, nil
}

// cardsScript shows the cards that match every filter's choice and counts
// them. It holds no "<" or "&", so the page stays well-formed XML.
const cardsScript = `(function () {
  function apply() {
    document.querySelectorAll(".cards").forEach(function (list) {
      var sels = list.querySelectorAll("select[data-filter]");
      var cards = list.querySelectorAll(".card");
      var shown = 0;
      cards.forEach(function (card) {
        var tags = JSON.parse(card.getAttribute("data-tags"));
        var ok = true;
        sels.forEach(function (s) {
          if (s.value !== "" ? tags[+s.getAttribute("data-filter")] !== s.value : false) { ok = false; }
        });
        card.hidden = !ok;
        if (ok) { shown++; }
      });
      var count = list.querySelector(".shown");
      if (count) { count.textContent = shown + " of " + cards.length + " shown"; }
    });
  }
  document.querySelectorAll("select[data-filter]").forEach(function (s) { s.addEventListener("change", apply); });
  apply();
})();`

// scriptHash is s's CSP hash source ("sha256-" and the base64 digest).
func scriptHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

type htmlCell struct {
	Text  string
	Right bool
}

type htmlTable struct {
	Title  string
	Header []htmlCell
	Rows   [][]htmlCell
	Notes  []string
}

type htmlFigure struct {
	Caption string
	SVG     template.HTML
}

func htmlTableOf(t Table) htmlTable {
	right := func(i int) bool { return i < len(t.Align) && t.Align[i] == Right }
	ht := htmlTable{Title: t.Title, Notes: t.Notes}
	for i, h := range t.Header {
		ht.Header = append(ht.Header, htmlCell{h, right(i)})
	}
	for _, r := range t.Rows {
		// Every row gets as many cells as the header (as in Markdown).
		row := make([]htmlCell, max(len(t.Header), len(r)))
		for i := range row {
			row[i].Right = right(i)
			if i < len(r) {
				row[i].Text = r[i]
			}
		}
		ht.Rows = append(ht.Rows, row)
	}
	return ht
}

// svgNS is the namespace attribute the SVG writers put on the root. An
// HTML parser places <svg> in that namespace by itself, so it is dropped
// when inlining: the page then names no address at all.
const svgNS = ` xmlns="http://www.w3.org/2000/svg"`

// inlineSVG checks b (see Figure.SVG) and returns it for inlining.
func inlineSVG(b []byte) (template.HTML, error) {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "<?xml") {
		if i := strings.Index(s, "?>"); i >= 0 {
			s = strings.TrimSpace(s[i+2:])
		}
	}
	if !strings.HasPrefix(s, "<svg") {
		return "", errors.New("not an SVG document")
	}
	d := xml.NewDecoder(strings.NewReader(s))
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("SVG is not well-formed: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 && tok.Name.Local != "svg" {
				return "", fmt.Errorf("root element is <%s>, not <svg>", tok.Name.Local)
			}
			depth++
			switch strings.ToLower(tok.Name.Local) {
			case "script", "foreignobject", "a", "image", "use", "iframe", "style":
				return "", fmt.Errorf("SVG holds a <%s> element", tok.Name.Local)
			}
			for _, a := range tok.Attr {
				name := strings.ToLower(a.Name.Local)
				if strings.HasPrefix(name, "on") || name == "href" || strings.Contains(strings.ToLower(a.Value), "url(") {
					return "", fmt.Errorf("SVG <%s> has attribute %s=%q", tok.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.EndElement:
			depth--
		case xml.ProcInst, xml.Directive:
			return "", errors.New("SVG holds a processing instruction or directive")
		}
	}
	if end := strings.IndexByte(s, '>'); end >= 0 {
		s = strings.Replace(s[:end], svgNS, "", 1) + s[end:]
	}
	// The document is checked above and generated by this package.
	return template.HTML(s), nil
}

// htmlTemplate is the page. Its CSS uses only fonts installed on the
// reader's machine and the colours of the charts' grid and legend.
var htmlTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'{{if .Script}}; script-src '{{.ScriptHash}}'{{end}}"/>
<meta name="generator" content="kvq"/>
<title>{{.Title}}</title>
<style>
:root { color-scheme: light; }
body { margin: 0 auto; max-width: 62rem; padding: 1.5rem 2rem 3rem; color: #1a1a1a; background: #fff;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 1.8rem; line-height: 1.2; margin: 0.5rem 0 0.25rem; }
.subtitle { color: #555; margin: 0 0 1.5rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 0.6rem; padding-bottom: 0.2rem; border-bottom: 1px solid #ddd; }
p { margin: 0.5rem 0; max-width: 48rem; }
.table { margin: 1rem 0 1.5rem; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.92rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0 0 0.4rem; }
th, td { padding: 0.3rem 0.75rem; border-bottom: 1px solid #e1e1e1; text-align: left; vertical-align: top; }
th { border-bottom: 2px solid #888; background: #f4f4f4; }
tbody tr:nth-child(even) td { background: #fafafa; }
.num { text-align: right; white-space: nowrap; }
.notes { margin: 0.4rem 0 0; padding-left: 1.2rem; color: #444; font-size: 0.88rem; }
figure { margin: 1.2rem 0 1.8rem; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.92rem; margin-top: 0.4rem; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  h2 { break-after: avoid; }
  figure, .table { break-inside: avoid; }
  tbody tr:nth-child(even) td, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
</style>
{{- if .Script}}
<style>
.filters { display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; align-items: center; margin: 0.8rem 0 1rem; font-size: 0.92rem; }
.filters select { font: inherit; margin-left: 0.3rem; }
.shown { color: #555; }
.card { border: 1px solid #ddd; border-radius: 4px; padding: 0.6rem 0.9rem 0.8rem; margin: 0 0 1rem; }
.card[hidden] { display: none; }
.card h3 { font-size: 1rem; margin: 0 0 0.5rem; }
.badge { display: inline-block; margin-left: 0.5rem; padding: 0 0.45rem; border-radius: 3px; font-size: 0.8rem; font-weight: 600; color: #fff; background: #2166ac; vertical-align: middle; }
.badge.alert { background: #b2182b; }
.fields { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 0.5rem 1rem; }
.field.wide { grid-column: 1 / -1; }
.field .label { color: #444; font-size: 0.85rem; font-weight: 600; }
.field pre { margin: 0.15rem 0 0; padding: 0.4rem 0.5rem; background: #f6f6f6; border: 1px solid #e6e6e6; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85rem; max-height: 24rem; overflow: auto; }
@media print {
  .filters { display: none; }
  .card { break-inside: avoid; }
  .card[hidden] { display: block; }
  .field pre { max-height: none; }
}
</style>
{{- end}}
</head>
<body>
<header>
<h1>{{.Title}}</h1>
{{- if .Subtitle}}
<p class="subtitle">{{.Subtitle}}</p>
{{- end}}
</header>
<main>
{{- range .Sections}}
<section>
{{- if .Heading}}
<h2>{{.Heading}}</h2>
{{- end}}
{{- range .Paragraphs}}
<p>{{.}}</p>
{{- end}}
{{- range .Tables}}
<div class="table">
<table>
{{- if .Title}}
<caption>{{.Title}}</caption>
{{- end}}
<thead>
<tr>{{range .Header}}<th scope="col"{{if .Right}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr>
</thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td{{if .Right}} class="num"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- if .Notes}}
<ul class="notes">
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
</div>
{{- end}}
{{- with .Cards}}
<div class="cards">
{{- if .Filters}}
<div class="filters">
{{- range $i, $f := .Filters}}
<label>{{$f.Name}}<select data-filter="{{$i}}"><option value="">all</option>{{range $f.Values}}<option>{{.}}</option>{{end}}</select></label>
{{- end}}
<span class="shown"></span>
</div>
{{- end}}
{{- range .Cards}}
<article class="card" data-tags="{{.TagsJSON}}">
<h3>{{.Title}}{{if .Badge}}<span class="badge{{if .Alert}} alert{{end}}">{{.Badge}}</span>{{end}}</h3>
<div class="fields">
{{- range .Fields}}
<div class="field{{if not .Half}} wide{{end}}"><div class="label">{{.Label}}</div><pre>{{.Text}}</pre></div>
{{- end}}
</div>
</article>
{{- end}}
</div>
{{- end}}
{{- range .Figures}}
<figure>
{{.SVG}}
{{- if .Caption}}
<figcaption>{{.Caption}}</figcaption>
{{- end}}
</figure>
{{- end}}
</section>
{{- end}}
</main>
{{- if .Script}}
<script>{{.Script}}</script>
{{- end}}
</body>
</html>
`))
