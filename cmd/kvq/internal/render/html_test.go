package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func svgOf(t *testing.T, write func(io.Writer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sampleDoc(t *testing.T) HTMLDoc {
	r := sample()
	return HTMLDoc{
		Title:    "kvq eval: stories260K <q8_0> & friends",
		Subtitle: `Run on "cpu", 2 threads, seed 1`,
		Sections: []HTMLSection{
			{
				Heading:    "Summary",
				Paragraphs: []string{"int4 keeps 98% of the baseline's accuracy & <b>halves</b> the cache.", `<script>alert("x")</script> is text here, as is <img src=x onerror=alert(1)>.`},
				Tables:     r.Tables,
			},
			{
				Heading:    "Needle in a haystack",
				Paragraphs: []string{"Accuracy by context length and needle depth."},
				Figures: []Figure{
					{Caption: "int4 accuracy (%)", SVG: svgOf(t, func(w io.Writer) error { return WriteHeatmapSVG(w, sampleNIAH()) })},
					{Caption: "int4 minus fp16", SVG: svgOf(t, func(w io.Writer) error { return WriteHeatmapSVG(w, sampleDiff()) })},
				},
			},
			{
				Heading: "Quality against size",
				Figures: []Figure{{Caption: "KL divergence against bits per value", SVG: svgOf(t, func(w io.Writer) error { return WriteSVG(w, sampleScatter()) })}},
			},
		},
	}
}

func TestWriteHTML(t *testing.T) {
	d := sampleDoc(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html.golden", b.Bytes())
	page := b.String()

	t.Run("self-contained", func(t *testing.T) {
		for _, bad := range []string{"http://", "https://", "<script", "<link", "<img", "<iframe", "@import", "url("} {
			if strings.Contains(strings.ToLower(page), bad) {
				t.Errorf("page contains %q", bad)
			}
		}
		if !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"/>`) {
			t.Error("page lacks its Content-Security-Policy")
		}
	})

	t.Run("structure", func(t *testing.T) {
		if !strings.HasPrefix(page, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>") {
			t.Errorf("page starts %q", page[:min(80, len(page))])
		}
		if !strings.HasSuffix(page, "</body>\n</html>\n") {
			t.Errorf("page ends %q", page[max(0, len(page)-40):])
		}
		for tag, want := range map[string]int{
			"<html": 1, "<head>": 1, "</head>": 1, "<body>": 1, "</body>": 1, "<style>": 1, "<main>": 1,
			"<section>": 3, "</section>": 3, "<h1>": 1, "<h2>": 3, "<p>": 3,
			"<table>": 2, "</table>": 2, "<caption>": 1, "<ul class=\"notes\">": 1,
			"<figure>": 3, "</figure>": 3, "<figcaption>": 3, "<svg ": 3, "</svg>": 3,
			"<th scope=\"col\" class=\"num\">": 2, "<th scope=\"col\">": 4, "<td class=\"num\">": 4,
		} {
			if got := strings.Count(page, tag); got != want {
				t.Errorf("page has %d of %q, want %d", got, tag, want)
			}
		}
		for _, want := range []string{
			"<title>kvq eval: stories260K &lt;q8_0&gt; &amp; friends</title>",
			"<h1>kvq eval: stories260K &lt;q8_0&gt; &amp; friends</h1>",
			`<p class="subtitle">Run on &#34;cpu&#34;, 2 threads, seed 1</p>`,
			"<caption>Per format</caption>",
			`<td class="num">36,864</td>`,
			"<td>a|b</td>",
			"<tr><td>333</td><td></td></tr>",
			"<li>* one note</li>",
			"<figcaption>int4 minus fp16</figcaption>",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})

	// TestWriteHTML/ParagraphsSafe: paragraphs are plain text, whatever
	// markup they hold.
	t.Run("ParagraphsSafe", func(t *testing.T) {
		for _, want := range []string{
			"<p>int4 keeps 98% of the baseline&#39;s accuracy &amp; &lt;b&gt;halves&lt;/b&gt; the cache.</p>",
			"<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; is text here, as is &lt;img src=x onerror=alert(1)&gt;.</p>",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks escaped paragraph %q", want)
			}
		}
		if strings.Contains(page, "<b>") || strings.Contains(page, "onerror=alert(1)>") {
			t.Error("a paragraph's markup reached the page")
		}
	})

	// The page is polyglot markup: an XML parser must read all of it, which
	// checks that every element is closed and nested.
	t.Run("well-formed", func(t *testing.T) {
		dec := xml.NewDecoder(strings.NewReader(page))
		var stack []string
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("page is not well-formed: %v", err)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				stack = append(stack, tok.Name.Local)
			case xml.EndElement:
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) != 0 {
			t.Errorf("unclosed elements %v", stack)
		}
	})

	t.Run("svg parts", func(t *testing.T) {
		rest := page
		n := 0
		for {
			i := strings.Index(rest, "<svg ")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], "</svg>")
			if j < 0 {
				t.Fatal("unterminated <svg>")
			}
			part := rest[i : i+j+len("</svg>")]
			texts := strings.Join(svgTexts(t, []byte(part)), "|")
			if want := []string{"Needle retrieval accuracy", "int4 minus fp16", "Quality against size"}[n]; !strings.Contains(texts, want) {
				t.Errorf("SVG %d texts %q lack %q", n, texts, want)
			}
			n++
			rest = rest[i+j:]
		}
		if n != 3 {
			t.Errorf("page inlines %d SVGs, want 3", n)
		}
	})
}

func TestWriteHTMLDefaults(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, HTMLDoc{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<title>kvq report</title>", "<h1>kvq report</h1>", "<main>\n</main>"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty page lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "subtitle\"") {
		t.Error("empty page has a subtitle")
	}
}

func TestWriteHTMLFigureErrors(t *testing.T) {
	for name, svg := range map[string]string{
		"empty":          "",
		"not svg":        "<html></html>",
		"malformed":      `<svg width="1"><rect></svg>`,
		"script":         `<svg><script>alert(1)</script></svg>`,
		"foreign object": `<svg><foreignObject><div/></foreignObject></svg>`,
		"onload":         `<svg onload="alert(1)"></svg>`,
		"href":           `<svg xmlns:xlink="x"><use xlink:href="#a"/></svg>`,
		"image":          `<svg><image href="a.png"/></svg>`,
		"url":            `<svg><rect fill="url(#g)"/></svg>`,
		"doctype":        `<svg><!DOCTYPE x></svg>`,
		"trailing":       `<svg></svg><script/>`,
	} {
		d := HTMLDoc{Sections: []HTMLSection{{Heading: "s", Figures: []Figure{{Caption: "f", SVG: []byte(svg)}}}}}
		if err := WriteHTML(io.Discard, d); !errors.Is(err, ErrFigure) {
			t.Errorf("WriteHTML(%s) error = %v, want ErrFigure", name, err)
		}
	}
	// An XML declaration before the root is allowed.
	d := HTMLDoc{Sections: []HTMLSection{{Figures: []Figure{{SVG: []byte(`<?xml version="1.0"?>` + "\n" + `<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>`)}}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatalf("WriteHTML(XML declaration) error = %v", err)
	}
	if !strings.Contains(b.String(), "<svg><rect/></svg>") {
		t.Errorf("declaration or namespace not stripped:\n%s", b.String())
	}
	if err := WriteHTML(failWriter{}, HTMLDoc{}); err == nil {
		t.Error("WriteHTML to a failing writer succeeded")
	}
}

// TestWriteHTMLCards: cards come with their filters (each value once, in
// order), escaped text, a well-formed page and the one script, which the
// page's policy allows by its exact hash; a page without cards has none.
func TestWriteHTMLCards(t *testing.T) {
	d := HTMLDoc{Title: "review", Sections: []HTMLSection{{Heading: "Review", Cards: &HTMLCards{
		Filters: []string{"suite", "cache"},
		Cards: []HTMLCard{
			{Title: "copy #1", Badge: "regressed", Alert: true, Tags: []string{"copy", "int2"},
				Fields: []HTMLField{{Label: "Prompt", Text: "Copy <this> & \"that\"\n  indented"}, {Label: "fp16", Text: "ok", Half: true}, {Label: "int2", Text: "</pre><script>x</script>", Half: true}}},
			{Title: "json #0", Badge: "improved", Tags: []string{"json", "int2"}},
			{Title: "copy #2", Tags: []string{"copy", "int4"}},
		}}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<label>suite<select data-filter="0"><option value="">all</option><option>copy</option><option>json</option></select></label>`,
		`<label>cache<select data-filter="1"><option value="">all</option><option>int2</option><option>int4</option></select></label>`,
		`<article class="card" data-tags="[&#34;copy&#34;,&#34;int2&#34;]">`,
		`<h3>copy #1<span class="badge alert">regressed</span></h3>`,
		`<span class="badge">improved</span>`,
		"<pre>Copy &lt;this&gt; &amp; &#34;that&#34;\n  indented</pre>",
		`<div class="field"><div class="label">int2</div><pre>&lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;</pre></div>`,
		`<div class="field wide"><div class="label">Prompt</div>`,
		"<script>" + cardsScript + "</script>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("page has %d scripts, want 1", n)
	}
	h := sha256.Sum256([]byte(cardsScript))
	csp := `content="default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-` + base64.StdEncoding.EncodeToString(h[:]) + `'"/>`
	if !strings.Contains(page, csp) {
		t.Errorf("page's policy lacks the script's hash %q:\n%s", csp, page[:min(800, len(page))])
	}
	for _, bad := range []string{"http://", "https://", "<link", "<img", "<iframe", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	dec := xml.NewDecoder(strings.NewReader(page))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("page is not well-formed: %v", err)
		}
	}
	d.Sections[0].Cards.Cards[2].Tags = []string{"copy"}
	if err := WriteHTML(io.Discard, d); err == nil || !strings.Contains(err.Error(), "copy #2") {
		t.Errorf("card with too few tags: %v, want an error naming it", err)
	}
}
