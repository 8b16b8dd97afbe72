package eval_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// TestExtractGSM8K checks lm-eval's two gsm8k filters on hand-made outputs:
// strict-match takes the first "#### N", flexible-extract the last number
// (of two characters or more from [$0-9.,], or else digits), and an output
// without a match extracts "[invalid]".
func TestExtractGSM8K(t *testing.T) {
	for _, tc := range []struct {
		name, output, strict, flexible string
	}{
		{"both", "4 + 4 = 8, so the answer is 1,234.\n#### 1234", "1234", "1234"},
		{"first ####", "#### 7\nQuestion stays\n#### 9", "7", "9"},
		{"negative", "It drops by 5.\n#### -5", "-5", "-5"},
		{"dollars, no ####", "The total is $72.", "[invalid]", "$72."},
		{"single digit", "she has 3 left", "[invalid]", "3"},
		{"last of several", "12 apples, then 30 pears, then 4", "[invalid]", "4"},
		{"comma number", "it costs 1,200 in all", "[invalid]", "1,200"},
		{"no number", "I do not know.", "[invalid]", "[invalid]"},
		{"#### without number", "#### many", "[invalid]", "[invalid]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eval.ExtractGSM8K(eval.MetricStrictMatch, tc.output); got != tc.strict {
				t.Errorf("strict-match(%q) = %q, want %q", tc.output, got, tc.strict)
			}
			if got := eval.ExtractGSM8K(eval.MetricFlexibleExtract, tc.output); got != tc.flexible {
				t.Errorf("flexible-extract(%q) = %q, want %q", tc.output, got, tc.flexible)
			}
		})
	}
}

// TestNormalizeGSM8K checks exact_match's regexes_to_ignore (",", "$",
// "(?s).*#### ", "\.$", in that order) and ignore_case.
func TestNormalizeGSM8K(t *testing.T) {
	for in, want := range map[string]string{
		"They cost 1200 + 34 = 1234 dollars.\n#### 1,234": "1234",
		"$72.":                 "72",
		"1,234":                "1234",
		"72.\n":                "72\n", // Python's `$` matches before a final newline
		"3.50":                 "3.50",
		"a #### b #### 5":      "5",
		"[invalid]":            "[invalid]",
		"ABC":                  "abc",
		"ends in a period 7..": "ends in a period 7.",
	} {
		if got := eval.NormalizeGSM8K(in); got != want {
			t.Errorf("NormalizeGSM8K(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestScoreGSM8K scores outputs against a GSM8K reference through
// ScoreOutput, as the suite and tasks files do.
func TestScoreGSM8K(t *testing.T) {
	ref := "They cost 1200 + 34 = <<1200+34=1234>>1234 dollars.\n#### 1,234"
	for _, tc := range []struct {
		output           string
		strict, flexible bool
	}{
		{" 1200 + 34 = 1234, so the answer is 1,234.\n#### 1234", true, true},
		{" The total is $1,234.", false, true},
		{" It is 1234.\n#### 1234\n\nThen 17 more.", true, false},
		{" #### 1235", false, false},
		{" I cannot say.", false, false},
	} {
		for m, want := range map[eval.Metric]bool{eval.MetricStrictMatch: tc.strict, eval.MetricFlexibleExtract: tc.flexible} {
			sc, err := eval.ScoreOutput(m, tc.output, ref, eval.ScoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sc.Pass != want || sc.Value != map[bool]float64{true: 1, false: 0}[want] {
				t.Errorf("%s(%q) = %+v, want pass %v", m, tc.output, sc, want)
			}
		}
	}
	if _, err := eval.ScoreOutput(eval.MetricStrictMatch, "#### 1", "", eval.ScoreOptions{}); !errors.Is(err, eval.ErrReference) {
		t.Errorf("empty reference: %v, want ErrReference", err)
	}
	for _, m := range []string{"strict-match", "Flexible-Extract"} {
		if _, err := eval.ParseMetric(m); err != nil {
			t.Errorf("ParseMetric(%q): %v", m, err)
		}
	}
}

func readGSM8K(t *testing.T, path string, scored bool) []eval.GSM8KItem {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	items, err := eval.ParseGSM8K(b, path, scored)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// TestGSM8KPrompt checks the 2-shot prompt, byte for byte, against
// lm-eval's format: "Question: q\nAnswer: a" per shot, "\n\n" after each,
// then "Question: q\nAnswer:".
func TestGSM8KPrompt(t *testing.T) {
	shots := readGSM8K(t, "testdata/gsm8k_train.jsonl", false)
	test := readGSM8K(t, "testdata/gsm8k_test.jsonl", true)
	if len(shots) != 3 || len(test) != 4 {
		t.Fatalf("fixtures: %d shots, %d items", len(shots), len(test))
	}
	want := "Question: Sam buys 3 bags of 5 apples. How many apples does he buy?\n" +
		"Answer: Sam buys 3 * 5 = <<3*5=15>>15 apples.\n#### 15\n\n" +
		"Question: A jar holds 20 coins and 8 are taken out. How many coins are left?\n" +
		"Answer: 20 - 8 = <<20-8=12>>12 coins are left.\n#### 12\n\n" +
		"Question: Tom has 15 marbles and gives away 7. How many marbles does Tom keep?\n" +
		"Answer:"
	if got := eval.GSM8KPrompt(shots[:2], test[1].Question); got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
	if got := eval.GSM8KPrompt(nil, "Q?"); got != "Question: Q?\nAnswer:" {
		t.Errorf("0-shot prompt %q", got)
	}

	s, err := eval.GSM8KSuite(eval.GSM8KOptions{Test: test, N: 3, Shots: shots, Fewshot: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tasks) != 3 || s.Tasks[1].Prompt != want || s.Tasks[2].Reference != test[2].Answer {
		t.Fatalf("suite of %d tasks; task 1 %+v", len(s.Tasks), s.Tasks[1])
	}
	tk := s.Tasks[0]
	if len(tk.Metrics) != 2 || tk.Metrics[0] != eval.MetricStrictMatch || tk.Metrics[1] != eval.MetricFlexibleExtract ||
		tk.MaxTokens != eval.GSM8KMaxTokens || strings.Join(tk.Until, "|") != "Question:|</s>|<|im_end|>" {
		t.Errorf("task %+v", tk)
	}
	if s.Labels[eval.MetricStrictMatch] != "gsm8k strict-match" || s.Labels[eval.MetricFlexibleExtract] != "gsm8k flexible-extract" {
		t.Errorf("labels %v", s.Labels)
	}
	if all, _ := eval.GSM8KSuite(eval.GSM8KOptions{Test: test}); len(all.Tasks) != 4 {
		t.Errorf("N 0: %d tasks, want all 4", len(all.Tasks))
	}
	if _, err := eval.GSM8KSuite(eval.GSM8KOptions{Test: test, Shots: shots, Fewshot: 4}); !errors.Is(err, eval.ErrOptions) {
		t.Errorf("4 shots of 3: %v, want ErrOptions", err)
	}
}

// TestParseGSM8KErrors: a line without a question or answer, or a scored
// answer without "#### N", is an ErrTasks naming the file and line.
func TestParseGSM8KErrors(t *testing.T) {
	good := `{"question": "q", "answer": "a\n#### 1", "id": 3}`
	for _, tc := range []struct {
		data   string
		scored bool
		want   string
	}{
		{good + "\n" + `{"question": "q"}`, false, `f.jsonl:2: no "answer"`},
		{good + "\n\n" + `{"answer": "#### 2"}`, false, `f.jsonl:3: no "question"`},
		{`{"question": "q", "answer": "just 4"}`, true, `f.jsonl:1: the answer has no "#### N"`},
		{`[1]`, false, "f.jsonl:1: not a GSM8K object"},
		{"\n\n", false, "f.jsonl has no items"},
	} {
		_, err := eval.ParseGSM8K([]byte(tc.data), "f.jsonl", tc.scored)
		if !errors.Is(err, eval.ErrTasks) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseGSM8K(%q) = %v, want ErrTasks %q", tc.data, err, tc.want)
		}
	}
	if items, err := eval.ParseGSM8K([]byte(`{"question": "q", "answer": "just 4"}`), "f", false); err != nil || len(items) != 1 {
		t.Errorf("a few-shot answer without ####: %v, %v", items, err)
	}
}

// TestTasksFileGSM8KMetrics: tasks files take the GSM8K metrics and an
// until list, for other local generative sets.
func TestTasksFileGSM8KMetrics(t *testing.T) {
	line := `{"prompt": "Question: 2+2?\nAnswer:", "reference": "#### 4", "metric": ["strict-match", "flexible-extract"], "until": ["Question:"], "max_tokens": 64}`
	s, err := eval.ParseTasks([]byte(line), "math.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tk := s[0].Tasks[0]
	if len(tk.Metrics) != 2 || tk.Metrics[1] != eval.MetricFlexibleExtract || len(tk.Until) != 1 || tk.Until[0] != "Question:" {
		t.Errorf("task %+v", tk)
	}
	if _, err := eval.ParseTasks([]byte(`{"prompt": "x", "metric": "strict-match"}`), "m.jsonl"); err == nil {
		t.Error("strict-match without a reference: no error")
	}
}

// TestGenerateUntil: a stop string ends generation and is cut from the
// output: the output is the unstopped output's text before the string's
// first occurrence, in fewer tokens.
func TestGenerateUntil(t *testing.T) {
	m, specs := tinyModel(t, "fp32")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	l, err := kvcache.NewLayout(m.Geometry(), specs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := eval.GenItem{Prompt: m.Tokenizer.Encode("Question: 3+4?\nAnswer:", true), MaxTokens: 48}
	full, err := eval.Generate(ctx, r, []*kvcache.Layout{l}, item)
	if err != nil {
		t.Fatal(err)
	}
	text := full[0].Text
	if len([]rune(text)) < 8 {
		t.Skipf("the random model stopped early: %q", text)
	}
	stop := string([]rune(text)[5:7])
	want := text[:strings.Index(text, stop)]
	item.Until = []string{"never there", stop}
	cut, err := eval.Generate(ctx, r, []*kvcache.Layout{l}, item)
	if err != nil {
		t.Fatal(err)
	}
	if cut[0].Text != want || cut[0].Tokens >= full[0].Tokens {
		t.Errorf("until %q: %q in %d tokens, want %q in fewer than %d", stop, cut[0].Text, cut[0].Tokens, want, full[0].Tokens)
	}
}
