package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRender feeds arbitrary templates to Compile and Render: neither may
// panic, and every failure must be one of the package's error types.
func FuzzRender(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jinja"))
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	for _, s := range []string{
		"{% for x in messages %}{{ loop.index }}{{ x.content | trim }}{% endfor %}",
		"{% set ns = namespace(a=[]) %}{% set ns.a = ns.a + [1] %}{{ ns.a | tojson(indent=2) }}",
		"{{ 'a b'.split() }}{{ {'k': [1, 2.5, none]} }}{{ x | default('d') }}{{ 7 // 2 ** 3 }}",
		"  {%- if true -%}\n {# c #} {{ tools is none }}\n{%+ endif +%}\n{% raw %}{{ x }}{% endraw %}",
		"{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ m(1) }}{{ messages[1:][::-1] }}",
		"{{ raise_exception('x') if messages | length > 5 }}{{ strftime_now('%d %b %Y') }}",
	} {
		f.Add(s)
	}
	msgs := []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "é\n"}}
	opts := Options{
		AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>", Now: fixedNow,
		Extra: map[string]any{"tools": json.RawMessage(`[{"type":"function","function":{"name":"f","parameters":{}}}]`)},
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src)
		if err != nil {
			checkErr(t, src, err)
			return
		}
		if _, err := tmpl.Render(msgs, opts); err != nil {
			checkErr(t, src, err)
		}
	})
}

func checkErr(t *testing.T, src string, err error) {
	var (
		se *SyntaxError
		ue *UnsupportedError
		re *RenderError
	)
	if !errors.As(err, &se) && !errors.As(err, &ue) && !errors.As(err, &re) {
		t.Fatalf("Render(%q) returned an untyped error %v (%T)", src, err, err)
	}
}
