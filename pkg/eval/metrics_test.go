package eval

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseMetric(t *testing.T) {
	for _, m := range Metrics() {
		t.Run(string(m), func(t *testing.T) {
			got, err := ParseMetric(string(m))
			if got != m || err != nil {
				t.Errorf("ParseMetric(%q) = %q, %v, want %q, nil", m, got, err, m)
			}
		})
	}
	t.Run("case and spaces", func(t *testing.T) {
		if got, err := ParseMetric(" ROUGE-L "); got != MetricRougeL || err != nil {
			t.Errorf("ParseMetric(%q) = %q, %v, want %q, nil", " ROUGE-L ", got, err, MetricRougeL)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := ParseMetric("bleu")
		if !errors.Is(err, ErrMetric) || !strings.Contains(err.Error(), "rouge-l") || !strings.Contains(err.Error(), "citation") {
			t.Errorf("ParseMetric(%q) error = %v, want ErrMetric listing the valid names", "bleu", err)
		}
	})
	if n := len(Metrics()); n != 14 {
		t.Errorf("len(Metrics()) = %d, want 14", n)
	}
}

func TestNormalizeAnswer(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"articles and punctuation", "The Cat!", "cat"},
		{"spaces collapse", "  An apple,\n a   day  ", "apple day"},
		{"article inside a word kept", "theater anthem", "theater anthem"},
		{"punctuation removed before articles", "the-end", "theend"},
		{"underscore is punctuation", "a_b", "ab"},
		{"only an article", "A", ""},
		{"unicode letters kept", "Café  au LAIT", "café au lait"},
		{"non-ASCII punctuation kept", "yes — no", "yes — no"},
		{"article next to non-ASCII punctuation", "a—b", "—b"},
		{"numbers", "The 3 Musketeers.", "3 musketeers"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeAnswer(tt.in); got != tt.want {
				t.Errorf("NormalizeAnswer(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTokenF1(t *testing.T) {
	tests := []struct {
		name, pred, gold string
		want             float64
	}{
		{"same after normalizing", "Paris.", "paris", 1},
		{"extra words", "the capital is Paris", "Paris", 0.5},
		{"no overlap", "London", "Paris", 0},
		{"both empty", "", "", 0},
		{"repeated prediction token counts once", "paris paris", "paris", 2.0 / 3},
		// "a" is an article: "b b c" against "b b d", common 2, P = R = 2/3.
		{"multiset", "a b b c", "b b d", 2.0 / 3},
		{"partial", "new york city", "new york", 0.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TokenF1(tt.pred, tt.gold); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("TokenF1(%q, %q) = %v, want %v", tt.pred, tt.gold, got, tt.want)
			}
		})
	}
}

func TestRougeL(t *testing.T) {
	tests := []struct {
		name, pred, ref string
		want            float64
	}{
		{"identical", "the cat sat", "the cat sat", 1},
		{"one word missing", "the cat sat on the mat", "the cat on the mat", 10.0 / 11},
		{"subsequence, not substring", "a x b y c", "a b c", 0.75},
		{"order matters", "c b a", "a b c", 1.0 / 3},
		{"case counts", "The cat", "the cat", 0.5},
		{"periods split", "end.start", "end start", 1},
		{"other punctuation kept", "cat, dog", "cat dog", 0.5},
		{"empty prediction", "", "a b", 0},
		{"empty reference", "a b", "  ", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RougeL(tt.pred, tt.ref); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("RougeL(%q, %q) = %v, want %v", tt.pred, tt.ref, got, tt.want)
			}
		})
	}
}

func TestStripJSONFence(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", ` {"a":1} `, `{"a":1}`},
		{"json fence", "```json\n{\"a\":1}\n```\n", `{"a":1}`},
		{"JSON fence", "```JSON\n[1]\n```", `[1]`},
		{"bare fence", "```\n[1]\n```", `[1]`},
		{"no closing fence", "```json\n[1]", `[1]`},
		{"other language kept", "```python\n[1]\n```", "python\n[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StripJSONFence(tt.in); got != tt.want {
				t.Errorf("StripJSONFence(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScoreOutput(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"age":{"type":"integer","minimum":18}},"required":["age"]}`)
	tests := []struct {
		name              string
		m                 Metric
		output, reference string
		opts              ScoreOptions
		pass              bool
		value             float64
		detail            string // a substring of Detail, when set
	}{
		{name: "exact", m: MetricExact, output: "42\n", reference: "42", pass: true, value: 1},
		{name: "exact inner whitespace", m: MetricExact, output: "  a \t b ", reference: "a b", pass: true, value: 1},
		{name: "exact case counts", m: MetricExact, output: "Paris", reference: "paris"},
		{name: "contains", m: MetricContains, output: "the key is 71432.", reference: "71432", pass: true, value: 1},
		{name: "contains case-sensitive", m: MetricContains, output: "PARIS", reference: "Paris"},
		{name: "f1 pass at 0.5", m: MetricF1, output: "the capital is Paris", reference: "Paris", pass: true, value: 0.5},
		{name: "f1 threshold", m: MetricF1, output: "the capital is Paris", reference: "Paris", opts: ScoreOptions{Threshold: 0.6}, value: 0.5},
		{name: "f1 alternatives", m: MetricF1, output: "NYC", reference: "New York City ||| NYC", pass: true, value: 1, detail: `best of 2 answers: "NYC"`},
		{name: "f1 miss", m: MetricF1, output: "London", reference: "Paris"},
		{name: "rouge-l", m: MetricRougeL, output: "the cat sat on the mat", reference: "the cat on the mat", pass: true, value: 10.0 / 11},
		{name: "rouge-l alternatives", m: MetricRougeL, output: "a b", reference: "c d|||a b", pass: true, value: 1},
		{name: "json-valid fenced", m: MetricJSONValid, output: "```json\n{\"a\": [1, 2]}\n```", pass: true, value: 1},
		{name: "json-valid broken", m: MetricJSONValid, output: `{"a": 1`, detail: "not JSON"},
		{name: "json-valid two values", m: MetricJSONValid, output: `{} {}`, detail: "after the first value"},
		{name: "json-valid NaN", m: MetricJSONValid, output: `NaN`},
		{name: "json-exact order and numbers", m: MetricJSONExact, output: `{"b": 1.0, "a": [true, null]}`, reference: `{"a":[true,null],"b":1}`, pass: true, value: 1},
		{name: "json-exact big integers", m: MetricJSONExact, output: `12345678901234567891`, reference: `12345678901234567890`, detail: "got 12345678901234567891, want 12345678901234567890"},
		{name: "json-exact differs", m: MetricJSONExact, output: `{"name": "Ann", "age": 30}`, reference: `{"name": "Ann", "age": 31}`, detail: "/age: got 30, want 31"},
		{name: "json-exact missing key", m: MetricJSONExact, output: `{"a": 1}`, reference: `{"a": 1, "b": 2}`, detail: "/b: missing"},
		{name: "json-exact output not JSON", m: MetricJSONExact, output: `sure!`, reference: `{}`, detail: "not JSON"},
		{name: "json-schema from reference", m: MetricJSONSchema, output: `{"age": 20}`, reference: string(schema), pass: true, value: 1},
		{name: "json-schema from options", m: MetricJSONSchema, output: "```json\n{\"age\": 17}\n```", opts: ScoreOptions{Schema: schema}, detail: "/age: 17 is less than minimum 18"},
		{name: "json-schema output not JSON", m: MetricJSONSchema, output: `age: 20`, reference: string(schema), detail: "not JSON"},
		{name: "refusal", m: MetricRefusal, output: "I can't help with that.", pass: true, value: 1, detail: `"i can't"`},
		{name: "refusal not", m: MetricRefusal, output: "Sure, here it is."},
		{name: "no-refusal", m: MetricNoRefusal, output: "Sure, here it is.", pass: true, value: 1},
		{name: "no-refusal refused", m: MetricNoRefusal, output: "I'm sorry, but no."},
		{name: "refusal contains mode", m: MetricRefusal, output: "Well. I'm sorry.", opts: ScoreOptions{Refusal: &RefusalDetector{Phrases: AdvBenchRefusalPhrases(), Mode: RefusalContains}}, pass: true, value: 1},
		{name: "regex", m: MetricRegex, output: "id: 0x1F", reference: `0x[0-9A-F]+\b`, pass: true, value: 1},
		{name: "regex anchored miss", m: MetricRegex, output: "id: 0x1F", reference: `^0x`},
		{name: "tool-call match", m: MetricToolCall, output: `{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}`, reference: `{"name":"get_weather","arguments":{"days":3.0,"city":"Paris"}}`, pass: true, value: 1},
		{name: "tool-call args differ", m: MetricToolCall, output: `<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon"}}</tool_call>`, reference: `{"name":"get_weather","arguments":{"city":"Paris"}}`, value: 0.5, detail: `/city: got "Lyon", want "Paris"`},
		{name: "tool-call name differs", m: MetricToolCall, output: `{"name": "get_time", "arguments": {"city": "Paris"}}`, reference: `{"name":"get_weather","arguments":{"city":"Paris"}}`, detail: `name: got "get_time", want "get_weather"`},
		{name: "tool-call none", m: MetricToolCall, output: `I would call the weather tool.`, reference: `{"name":"get_weather","arguments":{}}`, detail: "no tool call"},
		{name: "citation exact", m: MetricCitation, output: "Paris is the capital [2][5].", reference: "2,5", pass: true, value: 1},
		{name: "citation partial", m: MetricCitation, output: "See [2, 7].", reference: "2,5", value: 0.5, detail: "cited [2 7], want [2 5]"},
		{name: "citation none", m: MetricCitation, output: "Paris.", reference: "2"},
		{name: "citation empty reference", m: MetricCitation, output: "Paris.", reference: "", pass: true, value: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ScoreOutput(tt.m, tt.output, tt.reference, tt.opts)
			if err != nil {
				t.Fatalf("ScoreOutput(%s, %q, %q) error = %v, want nil", tt.m, tt.output, tt.reference, err)
			}
			if got.Pass != tt.pass || math.Abs(got.Value-tt.value) > 1e-12 || !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("ScoreOutput(%s, %q, %q) = %+v, want Pass %v, Value %v, Detail containing %q",
					tt.m, tt.output, tt.reference, got, tt.pass, tt.value, tt.detail)
			}
		})
	}
}

func TestScoreOutputErrors(t *testing.T) {
	tests := []struct {
		name              string
		m                 Metric
		output, reference string
		opts              ScoreOptions
		want              error
	}{
		{"unknown metric", "bleu", "a", "a", ScoreOptions{}, ErrMetric},
		{"metric names are exact", "EXACT", "a", "a", ScoreOptions{}, ErrMetric},
		{"contains empty reference", MetricContains, "a", "", ScoreOptions{}, ErrReference},
		{"f1 empty reference", MetricF1, "a", " ||| ", ScoreOptions{}, ErrReference},
		{"rouge-l empty reference", MetricRougeL, "a", "", ScoreOptions{}, ErrReference},
		{"invalid regexp", MetricRegex, "a", "a(", ScoreOptions{}, ErrReference},
		{"json-exact reference not JSON", MetricJSONExact, "{}", "{", ScoreOptions{}, ErrReference},
		{"json-schema malformed", MetricJSONSchema, "{}", `{"type": 5}`, ScoreOptions{}, ErrSchema},
		{"json-schema not JSON", MetricJSONSchema, "{}", `{"type": `, ScoreOptions{}, ErrSchema},
		{"tool-call reference without name", MetricToolCall, `{"name":"f"}`, `{"arguments":{}}`, ScoreOptions{}, ErrReference},
		{"threshold above 1", MetricF1, "a", "a", ScoreOptions{Threshold: 1.5}, ErrOptions},
		{"negative threshold", MetricF1, "a", "a", ScoreOptions{Threshold: -0.1}, ErrOptions},
		{"NaN threshold", MetricF1, "a", "a", ScoreOptions{Threshold: math.NaN()}, ErrOptions},
		{"refusal mode", MetricRefusal, "a", "", ScoreOptions{Refusal: &RefusalDetector{Mode: "suffix"}}, ErrOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScoreOutput(tt.m, tt.output, tt.reference, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("ScoreOutput(%s, %q, %q) error = %v, want %v", tt.m, tt.output, tt.reference, err, tt.want)
			}
		})
	}
}

func TestCitation(t *testing.T) {
	tests := []struct {
		name, output, reference string
		pass                    bool
		value                   float64
	}{
		{"single brackets", "Paris [1] is big [3].", "1,3", true, 1},
		{"list in brackets", "Paris [1, 3].", "3, 1", true, 1},
		{"doc and P prefixes", "Yes [doc3] and [P4].", "3,4", true, 1},
		{"mixed list", "Yes [Doc 2; S5].", "2;5", true, 1},
		{"range", "Yes [1-3].", "1,2,3", true, 1},
		{"parenthesized passage", "Yes (passage 2).", "2", true, 1},
		{"passage word", "As Passage 7 says, yes.", "7", true, 1},
		{"documents list", "Documents 1 and 4 agree.", "1 4", true, 1},
		{"leading zeros", "Yes [doc03].", "3", true, 1},
		{"reference ids normalized", "Yes [3].", "doc3", true, 1},
		{"extra id", "Yes [1][2].", "1", false, 2.0 / 3},
		{"missing id", "Yes [1].", "1,2", false, 2.0 / 3},
		{"markdown link is not a citation", "See [1](http://x) and [2].", "2", true, 1},
		{"checkbox not an id with numeric reference", "[x] done [2]", "2", true, 1},
		{"word ids when the reference has them", "Yes [intro] and [methods].", "intro,methods", true, 1},
		{"prose brackets ignored", "[Note: the answer is 42] Paris [2].", "2", true, 1},
		{"nothing cited", "Paris.", "1", false, 0},
		{"both empty", "Paris.", "", true, 1},
		{"cites against empty reference", "Paris [1].", "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scoreCitation(tt.output, tt.reference)
			if got.Pass != tt.pass || math.Abs(got.Value-tt.value) > 1e-12 {
				t.Errorf("scoreCitation(%q, %q) = %+v, want Pass %v, Value %v", tt.output, tt.reference, got, tt.pass, tt.value)
			}
		})
	}
}

func ExampleScoreOutput() {
	for _, c := range []struct {
		m              Metric
		output, answer string
	}{
		{MetricF1, "The answer is Paris.", "Paris ||| City of Paris"},
		{MetricJSONSchema, "```json\n{\"age\": 17}\n```", `{"properties": {"age": {"minimum": 18}}}`},
		{MetricToolCall, `<tool_call>{"name": "weather", "arguments": {"city": "Lyon"}}</tool_call>`, `{"name": "weather", "arguments": {"city": "Paris"}}`},
		{MetricCitation, "Paris is the capital [1][4].", "1,2"},
	} {
		s, err := ScoreOutput(c.m, c.output, c.answer, ScoreOptions{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: pass=%v value=%.3f %s\n", c.m, s.Pass, s.Value, s.Detail)
	}
	// Output:
	// f1: pass=true value=0.500 f1 0.500 (best of 2 answers: "Paris")
	// json-schema: pass=false value=0.000 /age: 17 is less than minimum 18
	// tool-call: pass=false value=0.500 arguments differ: /city: got "Lyon", want "Paris"
	// citation: pass=false value=0.500 cited [1 4], want [1 2]
}
