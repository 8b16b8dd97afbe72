package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// fixedNow is the clock of every test that reaches strftime_now.
func fixedNow() time.Time { return time.Date(2025, 3, 7, 9, 5, 4, 0, time.UTC) }

// renderVars renders src with variables given as a JSON object, the way a
// test of plain Jinja would: "messages", "add_generation_prompt",
// "bos_token" and "eos_token" go to their Render arguments, the rest to
// Options.Extra (as json.RawMessage, so key order is kept).
func renderVars(t *testing.T, src, varsJSON string) (string, error) {
	t.Helper()
	var vars map[string]json.RawMessage
	if err := json.Unmarshal([]byte(varsJSON), &vars); err != nil {
		t.Fatalf("bad vars %s: %v", varsJSON, err)
	}
	opts := Options{Now: fixedNow, Extra: map[string]any{}}
	var msgs []Message
	for k, v := range vars {
		var err error
		switch k {
		case "messages":
			var ms []map[string]string
			err = json.Unmarshal(v, &ms)
			for _, m := range ms {
				msgs = append(msgs, Message{Role: m["role"], Content: m["content"]})
			}
		case "add_generation_prompt":
			err = json.Unmarshal(v, &opts.AddGenerationPrompt)
		case "bos_token":
			err = json.Unmarshal(v, &opts.BOSToken)
		case "eos_token":
			err = json.Unmarshal(v, &opts.EOSToken)
		default:
			opts.Extra[k] = v
		}
		if err != nil {
			t.Fatalf("bad var %s: %v", k, err)
		}
	}
	return Render(src, msgs, opts)
}

// TestJinjaSubset checks the Jinja features chat templates use. Each
// expected output is what Jinja2 3.1 renders for the template with
// transformers' settings (trim_blocks, lstrip_blocks, its tojson and
// globals).
func TestJinjaSubset(t *testing.T) {
	tests := []struct {
		name, src, vars, want string
	}{
		{"ws1", "a\n  {% if true %}\n    x\n  {% endif %}\nb", `{}`, "a\n    x\nb"},
		{"ws2", "a {%- if true -%} x {%- endif -%} b", `{}`, "axb"},
		{"ws3", "{{ 'a' }}\n{{ 'b' }}\n", `{}`, "a\nb"},
		{"ws4", "  {{- 'a' -}}  \n", `{}`, "a"},
		{"ws5", "x\n    {# c #}\ny", `{}`, "x\ny"},
		{"ws6", "{% for i in [1,2,3] %}\n{{ i }}\n{% endfor %}\n", `{}`, "1\n2\n3\n"},
		{"ws7", "a  {%+ if true %}x{% endif %}", `{}`, "a  x"},
		{"loop", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", `{"xs": ["a", "b"]}`, "10TrueFalse2;21FalseTrue2;"},
		{"ns", "{% set ns = namespace(found=false, n=0) %}{% for x in xs %}{% if x == 'b' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}", `{"xs": ["a", "b"]}`, "True 2"},
		{"scope", "{% set y = 1 %}{% for x in xs %}{% set y = 2 %}{% endfor %}{{ y }}", `{"xs": ["a"]}`, "1"},
		{"arith", "{{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 * 3 }} {{ 1 + 2 - 4 }} {{ 'a' ~ 1 ~ none }} {{ -3 // 2 }} {{ 2 ** 3 }}", `{}`, "3 1 3.5 6 -1 a1None -2 8"},
		{"cmp", "{{ 1 < 2 }} {{ 'a' == 'a' }} {{ 1 != 1 }} {{ not true }} {{ true and false or true }} {{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k':1} }}", `{}`, "True True False False True True True True"},
		{"tests", "{{ x is string }} {{ x is mapping }} {{ x is iterable }} {{ d is mapping }} {{ l is iterable }} {{ none is none }} {{ x is not none }} {{ n is number }} {{ 3 is odd }} {{ d is defined }} {{ z is undefined }}", `{"x": "s", "d": {"a": 1}, "l": [1], "n": 3}`, "True False True True True True True True True True True"},
		{"methods", "{{ '  a b  '.strip() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('c') }}|{{ 'a,b'.split(',') }}|{{ 'AbC'.lower() }}{{ 'abc'.upper() }}|{{ 'a b  c'.split() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'hello world'.title() }}|{{ 'hi'.replace('i','o') }}", `{}`, "a b|True|True|['a', 'b']|abcABC|['a', 'b', 'c']|axx|xxa|Hello World|ho"},
		{"dictm", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys() | list }}{{ d.values() | list }}", `{"d": {"a": 1, "b": 2}}`, "a=1;b=2;1None5['a', 'b'][1, 2]"},
		{"filters", "{{ '  x  ' | trim }}|{{ [1,2] | length }}|{{ nope | default('d') }}|{{ '' | default('e', true) }}|{{ 'a' | upper }}|{{ 'A' | lower }}|{{ [1,2] | join(',') }}|{{ 'ab' | list }}|{{ [3,4] | first }}|{{ [3,4] | last }}|{{ 'aXa' | replace('a','b') }}|{{ 1 | string }}|{{ '42' | int }}|{{ 'x' | int }}|{{ 4.7 | int }}", `{}`, "x|2|d|e|A|a|1,2|['a', 'b']|3|4|bXb|1|42|0|4"},
		{"tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é<>' | tojson }}|{{ [1, 'a', none, true, 1.5] | tojson }}", `{"d": {"b": [1, 2], "a": {"x": null}}}`, "{\"b\": [1, 2], \"a\": {\"x\": null}}|{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": {\n    \"x\": null\n  }\n}|\"é<>\"|[1, \"a\", null, true, 1.5]"},
		{"slice", "{{ l[1:] }}{{ l[:-1] }}{{ l[::2] }}{{ l[-1] }}{{ 'abcd'[1:3] }}{{ l[::-1] }}", `{"l": [1, 2, 3, 4]}`, "[2, 3, 4][1, 2, 3][1, 3]4bc[4, 3, 2, 1]"},
		{"literals", "{{ [1, 'a', [2]] }} {{ {'a': 1, 'b': [true, none]} }} {{ 'it''s' if false else \"q\\\"x\" }} {{ (1, 2) }} {{ 1.0 }} {{ 1e3 }} {{ true }} {{ True }} {{ none }} {{ None }}", `{}`, "[1, 'a', [2]] {'a': 1, 'b': [True, None]} q\"x (1, 2) 1.0 1000.0 True True None None"},
		{"print", "{{ l }} {{ d }} {{ 'x' }} {{ 3.0 }} {{ 0.1 + 0.2 }} {{ 10 / 5 }} {{ [none, 'a\\'b'] }}", `{"l": ["a", 1, true, null], "d": {"k": "v"}}`, "['a', 1, True, None] {'k': 'v'} x 3.0 0.30000000000000004 2.0 [None, \"a'b\"]"},
		{"selectattr", "{{ ms | selectattr('role', 'equalto', 'user') | list | length }}{{ ms | rejectattr('role', 'equalto', 'user') | map(attribute='content') | join }}{{ ms | selectattr('x', 'defined') | list | length }}", `{"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}`, "1b0"},
		{"macro", "{% macro f(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(1, b=2) }}", `{}`, "[1d][12]"},
		{"ifexpr", "{{ 'a' if x else 'b' }}{{ 'c' if not x }}", `{"x": false}`, "bc"},
		{"attrs", "{{ m.role }}{{ m['role'] }}{{ m.nope }}|{{ l[5] }}|", `{"m": {"role": "r"}, "l": [1]}`, "rr||"},
		{"elif", "{% for n in [1,2,3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}{% endfor %}", `{}`, "onetwomany"},
		{"setblock", "{% set x %}inner{{ 1 }}{% endset %}[{{ x }}]", `{}`, "[inner1]"},
		{"forelse", "{% for x in [] %}x{% else %}empty{% endfor %}", `{}`, "empty"},
		{"forif", "{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.index }}{% endfor %}", `{}`, "2142"},
		{"forbreak", "{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", `{}`, "1"},
		{"loopprev", "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }};{% endfor %}", `{}`, "-2-3;1-3-2;2--1;"},
		{"unicode", "{{ s | length }}{{ s[0] }}{{ s | upper }}", `{"s": "héllo"}`, "5hHÉLLO"},
		{"strcat", "{{ 'a' + 'b' }}{{ [1] + [2] }}", `{}`, "ab[1, 2]"},
		{"boolprint", "{{ true }}{{ false }}{{ 1 == 1 }}", `{}`, "TrueFalseTrue"},
		{"nested", "{{ a.b.c }}{{ a['b']['c'] }}", `{"a": {"b": {"c": "deep"}}}`, "deepdeep"},
		{"count", "{{ 'abcab'.count('ab') }}{{ 'abc'.find('c') }}{{ '-'.join(['a','b']) }}{{ 'Ab'.capitalize() }}", `{}`, "22a-bAb"},
		{"negidx", "{{ messages[-1]['content'] }}", `{"messages": [{"content": "x"}, {"content": "y"}]}`, "y"},
		{"inop", "{{ 'a' not in ['b'] }}{{ not 'a' in ['a'] }}", `{}`, "TrueFalse"},
		{"lenstr", "{% if x | length > 0 %}y{% endif %}", `{"x": "abc"}`, "y"},
		{"items", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}{% for k, v in d | dictsort %}{{ k }}{% endfor %}", `{"d": {"b": 1, "a": 2}}`, "b1a2ab"},
		{"truthy", "{% if [] %}1{% endif %}{% if {} %}2{% endif %}{% if '' %}3{% endif %}{% if 0 %}4{% endif %}{% if [0] %}5{% endif %}{% if none %}6{% endif %}", `{}`, "5"},
		{"eqtypes", "{{ 1 == 1.0 }}{{ '1' == 1 }}{{ none == none }}{{ [1] == [1] }}{{ true == 1 }}", `{}`, "TrueFalseTrueTrueTrue"},
		{"strmul", "{{ 'ab' * 2 }}{{ '=' * 3 }}", `{}`, "abab==="},
		{"round", "{{ 2.5 | round }}{{ 2.567 | round(2) }}{{ 7 | float }}{{ [3,1,2] | sort | join }}{{ [1,2] | reverse | list }}{{ [1,1,2] | unique | list }}{{ [1,2,3] | sum }}{{ [1,5] | max }}{{ [1,5] | min }}", `{}`, "2.02.577.0123[2, 1][1, 2]651"},
		{"dictlit_trailing", "{{ {'a': 1,}['a'] }}{{ [1,2,][1] }}", `{}`, "12"},
		{"chained_cmp", "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}", `{}`, "TrueFalse"},
		{"string_escape", "{{ 'a\\nb' }}|{{ \"tab\\there\" }}|{{ 'u\\u00e9' }}", `{}`, "a\nb|tab\there|ué"},
		{"attr_on_str", "{{ s.nope }}|", `{"s": "x"}`, "|"},
		{"index_str", "{{ s[0] }}{{ s[-1] }}", `{"s": "xyz"}`, "xz"},
		{"none_print", "[{{ none }}][{{ x }}]", `{"x": null}`, "[None][None]"},
		{"float_print", "{{ 1.5 }} {{ 2.0 }} {{ 1e20 }} {{ 1.0e-5 }} {{ 3 / 3 }} {{ 0.1 * 3 }}", `{}`, "1.5 2.0 1e+20 1e-05 1.0 0.30000000000000004"},
		{"is_defined_chain", "{{ m.tool_calls is defined }}{{ m.content is defined }}", `{"m": {"content": "c"}}`, "FalseTrue"},
		{"not_prec", "{{ not 1 == 2 }}{{ not x is defined }}", `{}`, "TrueTrue"},
		{"set_multi", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", `{}`, "12"},
		{"tuple_for", "{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}", `{}`, "1234"},
		{"loop_cycle", "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}", `{}`, "aba"},
		{"range", "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}", `{}`, "012135"},
		{"continue", "{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", `{}`, "13"},
		{"default_none", "{{ none | default('d') }}{{ x | default('d') }}", `{"x": null}`, "NoneNone"},
		{"length_dict", "{{ d | length }}{{ d | count }}", `{"d": {"a": 1}}`, "11"},
		{"join_attr", "{{ ms | join(', ', attribute='content') }}", `{"ms": [{"content": "a"}, {"content": "b"}]}`, "a, b"},
		{"map_attr", "{{ ms | map(attribute='content') | list }}", `{"ms": [{"content": "a"}, {"content": "b"}]}`, "['a', 'b']"},
		{"string_in_list", "{{ 'x' in l }}", `{"l": ["x", "y"]}`, "True"},
		{"dash_comment", "a  {#- c -#}  b", `{}`, "ab"},
		{"trailing_nl", "x\n", `{}`, "x"},
		{"trailing_nl2", "x\n\n", `{}`, "x\n"},
		{"crlf", "{% if true %}\r\nx\r\n{% endif %}\r\n", `{}`, "x\n"},
		{"a", "  {%- if true %}x{% endif %}", `{}`, "x"},
		{"b", "a\n\n  {% if true -%}\n\n  x  {%- endif %}  \nb", `{}`, "a\n\nx  \nb"},
		{"c", "{% for i in range(3) -%}\n  {{ i }}\n{%- endfor %}", `{}`, "012"},
		{"d", "{% raw %}\n  {{ x }}{% endraw %}\nz", `{}`, "\n  {{ x }}z"},
		{"e", "  {% raw -%}  a  {%- endraw %}  ", `{}`, "a  "},
		{"f", "x  {#- c #}\n  y", `{}`, "x  y"},
		{"g", "{# a #}\n{# b #}\nc", `{}`, "c"},
		{"h", "\t{% if true %}\t\n\tx\n\t{% endif %}\t", `{}`, "\t\n\tx\n\t"},
		{"i", "{{ 'a' }}  \n  {% if true %}b{% endif %}", `{}`, "a  \nb"},
		{"j", "{% if true %}a{% else %}\n  b{% endif %}", `{}`, "a"},
		{"k", "{%+ if true %}\n x{% endif %}", `{}`, " x"},
		{"l", "{% set x = {'b': 1, 'a': [1, 2.5, 'x', none, true]} %}{{ x | tojson(indent=2) }}{{ x | tojson(separators=(',', ':')) }}{{ x | tojson(sort_keys=true) }}{{ 'é😀' | tojson(ensure_ascii=true) }}{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}{{ x | tojson(indent='\t') }}", `{}`, "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    \"x\",\n    null,\n    true\n  ]\n}{\"b\":1,\"a\":[1,2.5,\"x\",null,true]}{\"a\": [1, 2.5, \"x\", null, true], \"b\": 1}\"\\u00e9\\ud83d\\ude00\"[]{}{\n\t\"b\": 1,\n\t\"a\": [\n\t\t1,\n\t\t2.5,\n\t\t\"x\",\n\t\tnull,\n\t\ttrue\n\t]\n}"},
		{"m", "{{ d | tojson }}", `{"d": {"z": 1, "a": {"y": [1, {"q": null}], "b": "é\n\t\"\\"}}}`, "{\"z\": 1, \"a\": {\"y\": [1, {\"q\": null}], \"b\": \"é\\n\\t\\\"\\\\\"}}"},
		{"n", "{{ {1: 'a', true: 'b', none: 'c', 2.5: 'd'} | tojson }}", `{}`, "{\"1\": \"b\", \"null\": \"c\", \"2.5\": \"d\"}"},
		{"o", "{{ 'a,b,,c'.split(',', 1) }}{{ ' a  b '.split(None, 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ '  a b  '.rsplit(None, 1) }}", `{}`, "['a', 'b,,c']['a', 'b ']['a b', 'c']['  a', 'b']"},
		{"p", "{{ 'hello WORLD 3rd'.title() }}{{ 'hELLO'.capitalize() }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'.find('z') }}{{ 'héllo'.find('l') }}", `{}`, "Hello World 3RdHellobba-12"},
		{"q", "{{ 'ab' | replace('', '-') }}{{ 'abc'.count('') }}", `{}`, "-a-b-4"},
		{"r", "{{ xs | selectattr('a') | list }}{{ xs | rejectattr('a', 'none') | map(attribute='b') | list }}{{ xs | map(attribute='b', default='?') | list }}{{ xs | map(attribute='a.c') | list }}", `{"xs": [{"a": 1, "b": 2}, {"a": null}, {"a": {"c": "deep"}, "b": 3}]}`, "[{'a': 1, 'b': 2}, {'a': {'c': 'deep'}, 'b': 3}][2, 3][2, '?', 3][Undefined, Undefined, 'deep']"},
		{"s", "{{ [3, 1, 2] | sort(reverse=true) }}{{ ['b', 'A', 'a'] | sort }}{{ ['b', 'A', 'a'] | sort(case_sensitive=true) }}{{ xs | sort(attribute='n') | map(attribute='n') | list }}", `{"xs": [{"n": 2}, {"n": 1}]}`, "[3, 2, 1]['A', 'a', 'b']['A', 'a', 'b'][1, 2]"},
		{"t", "{{ ['a', 'A', 'b'] | unique | list }}{{ [1, 2, 3] | sum }}{{ [1.5, 2] | sum }}{{ ['b', 'a'] | max }}{{ [] | max }}", `{}`, "['a', 'b']63.5b"},
		{"u", "{{ 'x\ny\n\nz' | indent(2) }}|{{ 'x\ny' | indent(2, true) }}|{{ 'x\n\ny' | indent(2, blank=true) }}", `{}`, "x\n  y\n\n  z|  x\n  y|x\n  \n  y"},
		{"v", "{{ 2.675 | round(2) }}{{ 3 | round }}{{ 2.5 | round(method='ceil') }}{{ 2.5 | round(0, 'floor') }}{{ -0.5 | round }}", `{}`, "2.6733.02.0-0.0"},
		{"w", "{{ ' 42 ' | int }}{{ '0x1f' | int(0, 16) }}{{ '1f' | int(base=16) }}{{ '1_000' | int }}{{ '3.9' | int }}{{ 'abc' | int(7) }}{{ '1e3' | float }}{{ 'x' | float }}{{ none | int }}", `{}`, "4231311000371000.00.00"},
		{"x", "{% macro f(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ f('x') }}{{ f(b='y', a='z') }}", `{}`, "xx!zy"},
		{"z", "{% set a = [1,2] %}{% set b = a + [3] %}{{ a }}{{ b }}{{ a * 2 }}{{ (1,) + (2,) }}", `{}`, "[1, 2][1, 2, 3][1, 2, 1, 2](1, 2)"},
		{"A", "{{ 'abc'[::-1] }}{{ 'abc'[5:] }}{{ [1,2,3][-5:-1] }}{{ [1,2,3][::-2] }}{{ [1,2,3][1:1] }}", `{}`, "cba[1, 2][3, 1][]"},
		{"B", "{{ 1 if true }}{{ 1 if false }}|{{ (1 if false) is defined }}", `{}`, "1|False"},
		{"C", "{{ d.items() | list }}{% for k in d %}{{ k }}{% endfor %}{{ d | dictsort(by='value') }}{{ d | dictsort(reverse=true) }}", `{"d": {"b": 1, "a": 2}}`, "[('b', 1), ('a', 2)]ba[('b', 1), ('a', 2)][('b', 1), ('a', 2)]"},
		{"D", "{{ xs[0]['a'] }}{{ xs.0.a }}{{ xs[1] }}", `{"xs": [{"a": "q"}]}`, "qq"},
		{"E", "{% for a, b in d.items() %}{{ a }}={{ b }} {% endfor %}{% for x in 'ab' %}{{ x }}{% endfor %}", `{"d": {"k": "v", "k2": "v2"}}`, "k=v k2=v2 ab"},
		{"F", "{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 4 is divisibleby 2 }}{{ 5 is divisibleby(2) }}{{ 1 is sameas 1 }}{{ true is sameas true }}{{ 'a' is in 'abc' }}{{ 2 is gt 1 }}{{ x is callable }}{{ namespace is callable }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ none is true }}", `{}`, "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueFalse"},
		{"G", "{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}{{ ns.c }}|{{ namespace({'x': 1}, y=2).x }}", `{}`, "121|1"},
		{"H", "{{ x }}", `{"x": [1, 1.0, "a", null, true, {"k": [1]}]}`, "[1, 1.0, 'a', None, True, {'k': [1]}]"},
		{"I", "{% set x, y = 'ab' %}{{ y }}{{ x }}", `{}`, "ba"},
		{"J", "{{ 'abc' ~ 1.5 ~ [1] ~ {'a': 'b'} }}", `{}`, "abc1.5[1]{'a': 'b'}"},
		{"K", "{{ 10 // 3 }}{{ -10 // 3 }}{{ 10 % -3 }}{{ -10 % 3 }}{{ 10.5 % 3 }}{{ -10.5 // 3 }}{{ 2 ** 10 }}{{ 2.0 ** 0.5 }}{{ -2 ** 2 }}{{ 1 - -1 }}", `{}`, "3-4-221.5-4.010241.414213562373095142"},
		{"L", "{{ 1 == 1 == 1 }}{{ 1 < 2 > 1 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ (1, 'a') == (1, 'a') }}{{ {'a': 1} == {'a': 1} }}", `{}`, "TrueTrueTrueTrueTrueTrue"},
		{"S", "{{ none.x }}|{{ none[0] }}|{{ 1.5 | string }}", `{}`, "||1.5"},
		{"T", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}{{ messages | map(attribute='content') | join(' ') }}", `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}`, "2a b c"},
		{"U", "{% for m in messages %}{% if loop.first and m.role != 'system' %}S{% endif %}{{ loop.revindex }}{{ loop.previtem is defined }}{% endfor %}", `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}`, "S2False1True"},
		{"V", "{%- for message in messages %}{%- if message['role'] == 'user' %}{{- '<u>' + message['content'] | trim + '</u>\n' }}{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}{%- endfor %}", `{"messages": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo"}], "eos_token": "</s>"}`, "<u>hi</u>\nyo</s>"},
		{"W", "{{ x | default }}|{{ x | d('a') }}|{{ '' | d('b', true) }}|{{ 0 | default('c', boolean=true) }}", `{}`, "|a|b|c"},
		{"Y", "{{ [1, 2] | first }}{{ 'ab' | last }}{{ [] | first }}|{{ {'a': 1} | first }}{{ {'a': 1} | list }}{{ {'a': 1} | length }}", `{}`, "1b|a['a']1"},
		{"Z", "{% set s %}\n  a {{ 1 }}\n{% endset %}[{{ s }}]{% set t | upper %}b{% endset %}{{ t }}", `{}`, "[  a 1\n]B"},
		{"a1", "{% filter upper | replace('A', 'x') %}abc{% endfilter %}", `{}`, "xBC"},
		{"a3", "{% for x in [1, 2, 3, 4] %}{% if x is odd %}{% continue %}{% endif %}{{ x }}{% if x == 4 %}{% break %}{% endif %}{% else %}E{% endfor %}", `{}`, "24"},
		{"a4", "{{ 0x10 }}{{ 0o17 }}{{ 0b11 }}{{ 1_000 }}{{ 1.5e3 }}{{ 1E-2 }}", `{}`, "1615310001500.00.01"},
		{"a5", "{{ 'a' 'b' \"c\" }}{{ '\\x41\\u00e9\\101\\q' }}", `{}`, "abcAéA\\q"},
		{"a6", "{{ x | length }}", `{"x": "héllo wörld"}`, "11"},
		{"a7", "{{ 'Ab'.upper() }}{{ 'ÉCOLE'.lower() }}{{ 'a b'.isspace() }}{{ '12'.isdigit() }}{{ 'ab'.startswith(('x', 'a')) }}{{ 'ab'.endswith('b') }}", `{}`, "ABécoleFalseTrueTrueTrue"},
		{"a8", "{{ ', '.join(['a', 'b']) }}{{ ''.join(x) }}", `{"x": ["q", "r"]}`, "a, bqr"},
		{"a9", "{{ [1, 2, 3] | select('odd') | list }}{{ [1, 2, 3] | reject('odd') | list }}{{ [0, 1, '', 'a'] | select | list }}{{ [1, 2, 3] | select('gt', 1) | list }}", `{}`, "[1, 3][2][1, 'a'][2, 3]"},
		{"b1", "{{ [1,2] | map('string') | join('-') }}{{ ['a','b'] | map('upper') | list }}", `{}`, "1-2['A', 'B']"},
		{"b2", "{{ x.y }}", `{"x": {"y": {"z": [1, {"w": 2}]}}}`, "{'z': [1, {'w': 2}]}"},
		{"c2", "{{ 'x' | trim('x') }}{{ 'xaxy' | trim('xy') }}", `{}`, "a"},
		{"c3", "{{ 'a\\\\b' }}{{ \"it's\" | tojson }}", `{}`, "a\\b\"it's\""},
		{"c4", "{% set d = {'a': 1, 'a': 2} %}{{ d }}", `{}`, "{'a': 2}"},
		{"c6", "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", `{}`, "2"},
		{"c7", "{% for m in messages %}{% set messages = [] %}{{ m }}{% endfor %}{{ messages | length }}", `{"messages": [{"role": "a", "content": "b"}]}`, "{'role': 'a', 'content': 'b'}1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderVars(t, tt.src, tt.vars)
			if err != nil {
				t.Fatalf("Render(%q) error: %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	var (
		syntax      *SyntaxError
		unsupported *UnsupportedError
		raise       *RaiseError
		render      *RenderError
	)
	deep := strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300)
	tests := []struct {
		name      string
		src       string
		target    any   // pointer to the error type errors.As must find
		is        error // sentinel errors.Is must find, or nil
		line, col int
		msg       string // substring of the error text
	}{
		{"unclosed if", "{% if x %}a", &syntax, nil, 1, 12, "unexpected end of template"},
		{"dangling operator", "{{ 1 + }}", &syntax, nil, 1, 8, "unexpected '}}'"},
		{"for without target", "ok\n{% for %}", &syntax, nil, 2, 8, "expected name"},
		{"unterminated string", "{{ 'abc }}", &syntax, nil, 1, 4, "unterminated string"},
		{"unclosed tag", "a\n  {{ x ", &syntax, nil, 2, 3, "never closed"},
		{"stray endif", "{% endif %}", &syntax, nil, 1, 4, "unknown tag 'endif'"},
		{"break outside loop", "{% break %}", &syntax, nil, 1, 4, "outside of a loop"},
		{"bad character", "{{ a $ b }}", &syntax, nil, 1, 6, "unexpected character"},
		{"nested too deeply", "{{ " + deep + " }}", &syntax, nil, 1, 0, "nested too deeply"},
		{"unknown filter", "a\n  {{ x | nosuch }}", &unsupported, nil, 2, 10, "filter 'nosuch'"},
		{"unknown test", "{{ x is nosuch }}", &unsupported, nil, 1, 9, "test 'nosuch'"},
		{"include", "{% include 'x' %}", &unsupported, nil, 1, 4, "{% include %}"},
		{"recursive loop", "{% for x in y recursive %}{% endfor %}", &unsupported, nil, 1, 15, "recursive"},
		{"strftime directive", "{{ strftime_now('%Q') }}", &unsupported, nil, 1, 4, "strftime directive %Q"},
		{"raise_exception", "x\n{{- raise_exception('boom') }}", &raise, nil, 2, 5, "boom"},
		{"undefined arithmetic", "{{ x + 1 }}", &render, ErrUndefined, 1, 6, "'x' is undefined"},
		{"undefined attribute", "{{ x.y }}", &render, ErrUndefined, 1, 6, "'x' is undefined"},
		{"missing attribute of missing", "{{ {}.a.b }}", &render, ErrUndefined, 1, 9, "'dict object' has no attribute 'a'"},
		{"undefined call", "{{ nope() }}", &render, ErrUndefined, 1, 4, "'nope' is undefined"},
		{"str plus int", "{{ 'a' + 1 }}", &render, ErrType, 1, 8, "unsupported operand"},
		{"str less than int", "{{ 'a' < 1 }}", &render, ErrType, 1, 10, "ordering not supported"},
		{"division by zero", "{{ 1 / 0 }}", &render, ErrType, 1, 6, "division by zero"},
		{"iterate int", "{% for x in 5 %}{% endfor %}", &render, ErrType, 1, 13, "not iterable"},
		{"namespace attribute on non-namespace", "{% set ns = 1 %}{% set ns.x = 2 %}", &render, ErrType, 1, 20, "non-namespace"},
		{"huge range", "{{ range(10000000) }}", &render, ErrLimit, 1, 4, "range()"},
		{"huge string", "{{ 'ab' * 100000000 }}", &render, ErrLimit, 1, 9, "string over"},
		{"infinite recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &render, ErrLimit, 1, 19, "macro calls nested"},
		{"integer overflow", "{{ 2 ** 64 }}", &render, ErrLimit, 1, 6, "integer overflow"},
		{"tojson of undefined", "{{ x | tojson }}", &render, ErrType, 1, 8, "not JSON serializable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.src, nil, Options{Now: fixedNow})
			if err == nil {
				t.Fatalf("Render(%q) succeeded, want an error", tt.src)
			}
			if !errors.As(err, tt.target) {
				t.Fatalf("Render(%q) error %v (%T) is not %T", tt.src, err, err, tt.target)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Render(%q) error %v is not %v", tt.src, err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Render(%q) error %q does not contain %q", tt.src, err, tt.msg)
			}
			line, col := errPosition(err)
			if line != tt.line || tt.col != 0 && col != tt.col {
				t.Errorf("Render(%q) error at %d:%d, want %d:%d (%v)", tt.src, line, col, tt.line, tt.col, err)
			}
		})
	}
}

func errPosition(err error) (line, col int) {
	var (
		se *SyntaxError
		ue *UnsupportedError
		re *RenderError
	)
	switch {
	case errors.As(err, &se):
		return se.Line, se.Col
	case errors.As(err, &ue):
		return ue.Line, ue.Col
	case errors.As(err, &re):
		return re.Line, re.Col
	}
	return 0, 0
}

func TestStrftimeNow(t *testing.T) {
	tests := []struct{ format, want string }{
		{"%d %b %Y", "07 Mar 2025"},
		{"%Y-%m-%d %H:%M:%S", "2025-03-07 09:05:04"},
		{"%A %B %-d, %y %I%p %j %%", "Friday March 7, 25 09AM 066 %"},
		{"%e|%c|%x|%X|%u%w|%a", " 7|Fri Mar  7 09:05:04 2025|03/07/25|09:05:04|55|Fri"},
	}
	for _, tt := range tests {
		got, err := Render("{{ strftime_now('"+tt.format+"') }}", nil, Options{Now: fixedNow})
		if err != nil || got != tt.want {
			t.Errorf("strftime_now(%q) = %q, %v, want %q", tt.format, got, err, tt.want)
		}
	}
	// Without Options.Now the wall clock is used.
	got, err := Render("{{ strftime_now('%Y') }}", nil, Options{})
	if err != nil || got != time.Now().Format("2006") {
		t.Errorf("strftime_now('%%Y') with the default clock = %q, %v", got, err)
	}
}

func TestExtra(t *testing.T) {
	type named string
	tests := []struct {
		name  string
		extra map[string]any
		src   string
		want  string
	}{
		{"tools and documents default to none", nil, "{{ tools is none }} {{ documents is none }} {{ tools is defined }}", "True True True"},
		{"scalars", map[string]any{"a": 1, "b": uint8(2), "c": 1.5, "d": float32(0.5), "e": true, "f": nil, "g": named("s")},
			"{{ a + b }} {{ c }} {{ d }} {{ e }} {{ f }} {{ g }}", "3 1.5 0.5 True None s"},
		{"go maps visit keys sorted", map[string]any{"m": map[string]any{"b": 1, "a": []string{"x", "y"}}},
			"{{ m }} {{ m | tojson }}", "{'a': ['x', 'y'], 'b': 1} {\"a\": [\"x\", \"y\"], \"b\": 1}"},
		{"raw JSON keeps key order and number types", map[string]any{"j": json.RawMessage(`{"z": 1, "a": [1.0, 2e3, -3], "s": "é"}`)},
			"{{ j }} {{ j | tojson }}", "{'z': 1, 'a': [1.0, 2000.0, -3], 's': 'é'} {\"z\": 1, \"a\": [1.0, 2000.0, -3], \"s\": \"é\"}"},
		{"pointers and nil slices", map[string]any{"p": new(int), "s": []int(nil)}, "{{ p }} {{ s }}", "0 None"},
		{"overriding tools", map[string]any{"tools": []any{}}, "{{ tools is none }}", "False"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.src, nil, Options{Extra: tt.extra})
			if err != nil || got != tt.want {
				t.Errorf("Render(%q) = %q, %v, want %q", tt.src, got, err, tt.want)
			}
		})
	}
	for _, extra := range []map[string]any{
		{"messages": "x"},
		{"raise_exception": 1},
		{"bad": struct{}{}},
		{"bad": map[int]string{1: "x"}},
		{"bad": json.RawMessage(`{"a":`)},
		{"bad": uint64(1 << 63)},
	} {
		if _, err := Render("x", nil, Options{Extra: extra}); !errors.Is(err, ErrExtra) {
			t.Errorf("Render with Extra %v: error %v, want ErrExtra", extra, err)
		}
	}
}

func TestMessagesAreDicts(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}
	src := "{% for m in messages %}{{ m.role }}={{ m['content'] }};{{ 'tool_calls' in m }};{{ m.tool_calls is defined }};{{ m | tojson }}\n{% endfor %}"
	want := "user=a;False;False;{\"role\": \"user\", \"content\": \"a\"}\nassistant=b;False;False;{\"role\": \"assistant\", \"content\": \"b\"}\n"
	got, err := Render(src, msgs, Options{})
	if err != nil || got != want {
		t.Errorf("Render = %q, %v, want %q", got, err, want)
	}
}

func TestMessageFields(t *testing.T) {
	msgs := []Message{
		{Role: "assistant", Fields: map[string]any{
			"tool_calls": json.RawMessage(`[{"id": "c1", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]`),
			"name":       "x",
		}},
		{Role: "tool", Content: "r", Fields: map[string]any{"tool_call_id": "c1"}},
	}
	src := "{% for m in messages %}{{ m | tojson }}|{{ m.tool_calls is defined }}\n{% endfor %}"
	want := `{"role": "assistant", "content": "", "name": "x", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]}|True` + "\n" +
		`{"role": "tool", "content": "r", "tool_call_id": "c1"}|False` + "\n"
	got, err := Render(src, msgs, Options{})
	if err != nil || got != want {
		t.Errorf("Render =\n%s, %v\nwant\n%s", got, err, want)
	}
	for _, f := range []map[string]any{{"role": "user"}, {"content": nil}, {"bad": struct{}{}}} {
		_, err := Render("x", []Message{{Role: "user", Fields: f}}, Options{})
		if !errors.Is(err, ErrExtra) {
			t.Errorf("Render with Fields %v: error %v, want ErrExtra", f, err)
		}
	}
}

func TestCompileOnceRenderMany(t *testing.T) {
	tmpl, err := Compile("{% for m in messages %}[{{ m.role }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range []struct {
		msgs []Message
		agp  bool
		want string
	}{
		{[]Message{{Role: "user"}}, true, "[user]>"},
		{nil, false, ""},
		{[]Message{{Role: "a"}, {Role: "b"}}, false, "[a][b]"},
	} {
		got, err := tmpl.Render(tt.msgs, Options{AddGenerationPrompt: tt.agp})
		if err != nil || got != tt.want {
			t.Errorf("case %d: Render = %q, %v, want %q", i, got, err, tt.want)
		}
	}
}
