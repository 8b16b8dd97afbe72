package eval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/datasets"
)

func readRulerQA(t *testing.T, name string) *RulerQAData {
	t.Helper()
	p := filepath.Join("testdata", "ruler", name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	parse := ParseRulerSQuAD
	if strings.HasPrefix(name, "hotpot") {
		parse = ParseRulerHotpotQA
	}
	d, err := parse(b, p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestParseRulerQA reads the hand-made SQuAD and HotpotQA fixtures as
// RULER's read_squad and read_hotpotqa do.
func TestParseRulerQA(t *testing.T) {
	sq := readRulerQA(t, "squad.json")
	// Five distinct paragraphs; four answerable questions (the impossible
	// one is skipped); the first asks about the Arlow's first paragraph,
	// with the article's two others as "more".
	if len(sq.Docs) != 5 || len(sq.QAs) != 4 {
		t.Fatalf("SQuAD: %d docs, %d questions; want 5 and 4", len(sq.Docs), len(sq.QAs))
	}
	q := sq.QAs[0]
	if q.Query != "Which mill does the Arlow turn?" || !reflect.DeepEqual(q.Outputs, []string{"Tessel Mill", "Tessel Mill"}) ||
		!strings.HasPrefix(sq.Docs[q.Gold[0]], "The Arlow is a slow river") || len(q.More) != 2 {
		t.Errorf("SQuAD question 0: %+v", q)
	}
	if !sortedStrings(sq.Docs) {
		t.Errorf("SQuAD docs not sorted: %q", sq.Docs)
	}
	hq := readRulerQA(t, "hotpotqa.json")
	// Seven distinct "title\nsentences" documents; every question has its
	// three context paragraphs as gold.
	if len(hq.Docs) != 7 || len(hq.QAs) != 3 {
		t.Fatalf("HotpotQA: %d docs, %d questions; want 7 and 3", len(hq.Docs), len(hq.QAs))
	}
	if d := hq.Docs[hq.QAs[0].Gold[0]]; d != "Ona Vale\nOna Vale was a clockmaker born at Tessel Mill in 1841." {
		t.Errorf("HotpotQA first gold document %q", d)
	}
	if len(hq.QAs[2].Gold) != 3 || len(hq.QAs[2].More) != 0 || hq.QAs[2].Outputs[0] != "1702" {
		t.Errorf("HotpotQA question 2: %+v", hq.QAs[2])
	}
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}

// TestRulerQAExample: RULER's qa template and prefix, the gold
// paragraphs in the haystack, the most documents that fit the length,
// and the same example from the same seed.
func TestRulerQAExample(t *testing.T) {
	for _, tc := range []struct {
		file   string
		task   string
		length int
		repeat bool // more documents than the set holds
	}{
		{"squad.json", RulerQA1, 650, false},    // fewer documents than the set's
		{"squad.json", RulerQA1, 2048, true},    // the set repeated
		{"hotpotqa.json", RulerQA2, 750, false}, // the gold three and a few more
		{"hotpotqa.json", RulerQA2, 1500, true},
	} {
		d := readRulerQA(t, tc.file)
		for i := range 3 {
			seed := rulerSeed(5, tc.task, tc.length, i)
			ex, err := RulerQAExample(tc.task, d, i, tc.length, seed, byteTokens)
			if err != nil {
				t.Fatalf("%s %d item %d: %v", tc.task, tc.length, i, err)
			}
			q := d.QAs[i]
			if !strings.HasPrefix(ex.Prompt, "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\nThe following are given documents.\n\nDocument 1:\n") ||
				!strings.HasSuffix(ex.Prompt, "\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words.\n\nQuestion: "+q.Query+" Answer:") {
				t.Errorf("%s item %d: prompt %q is not RULER's template", tc.task, i, ex.Prompt)
			}
			for _, g := range q.Gold {
				if !strings.Contains(ex.Prompt, "\n"+d.Docs[g]+"\n\n") {
					t.Errorf("%s %d item %d: gold paragraph %q missing", tc.task, tc.length, i, d.Docs[g])
				}
			}
			if ex.Tokens != byteTokens(ex.Prompt)+32 || ex.Tokens > tc.length || ex.MaxTokens != 32 || !reflect.DeepEqual(ex.Outputs, q.Outputs) {
				t.Errorf("%s %d item %d: tokens %d, budget %d, outputs %q", tc.task, tc.length, i, ex.Tokens, ex.MaxTokens, ex.Outputs)
			}
			if (ex.Haystack > len(d.Docs)) != tc.repeat {
				t.Errorf("%s %d item %d: %d documents of the set's %d", tc.task, tc.length, i, ex.Haystack, len(d.Docs))
			}
			if n := strings.Count(ex.Prompt, "Document "); n != ex.Haystack {
				t.Errorf("%s item %d: %d documents in the prompt, haystack %d", tc.task, i, n, ex.Haystack)
			}
			// One document more does not fit.
			if more := RulerQAPrompt(d.Haystack(q, ex.Haystack+1, seed), q.Query); byteTokens(more)+32 <= tc.length {
				t.Errorf("%s %d item %d: %d documents fit, the example has %d", tc.task, tc.length, i, ex.Haystack+1, ex.Haystack)
			}
			again, _ := RulerQAExample(tc.task, d, i, tc.length, seed, byteTokens)
			if again.Prompt != ex.Prompt {
				t.Errorf("%s item %d: not deterministic", tc.task, i)
			}
		}
	}
	d := readRulerQA(t, "squad.json")
	if _, err := RulerQAExample(RulerQA1, d, 0, 200, 1, byteTokens); !errors.Is(err, datasets.ErrRulerLength) {
		t.Errorf("a length below the template and gold paragraph: %v, want ErrRulerLength", err)
	}
	// Below the set's size the haystack is the gold, the article's others
	// and a sample of the rest: 4 of SQuAD's 5 documents for question 0
	// keep its article's three.
	hs := d.Haystack(d.QAs[0], 4, 7)
	for _, g := range append([]int{d.QAs[0].Gold[0]}, d.QAs[0].More...) {
		if !slicesContain(hs, d.Docs[g]) {
			t.Errorf("haystack of 4 lacks %q", d.Docs[g])
		}
	}
	if a, b := d.Haystack(d.QAs[0], 5, 1), d.Haystack(d.QAs[0], 5, 2); reflect.DeepEqual(a, b) && reflect.DeepEqual(d.Haystack(d.QAs[0], 5, 3), a) {
		t.Errorf("three seeds shuffle the same")
	}
}

func slicesContain(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestBuildSuitesRulerQA: "ruler" runs qa_1 and qa_2 only with their
// data, scores them with string_match_part, and adds the average row per
// length; ruler:qa_2 without its data is refused.
func TestBuildSuitesRulerQA(t *testing.T) {
	o := SuiteOptions{N: 2, Seed: 3, RulerLengths: []int{2048}, Tokens: byteTokens, ModelContext: 2048, RulerSQuAD: readRulerQA(t, "squad.json")}
	ss, err := BuildSuites(context.Background(), []string{"ruler"}, o)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, task := range ss[0].Tasks {
		rows[task.Suite] = true
		if task.Meta["task"] == RulerQA1 && (task.Metrics[0] != MetricStringMatchPart || task.MaxTokens != 32) {
			t.Errorf("qa_1: metric %s, budget %d", task.Metrics[0], task.MaxTokens)
		}
		if !reflect.DeepEqual(task.Groups, []string{"ruler:average 2K"}) {
			t.Errorf("%s: groups %q", task.Suite, task.Groups)
		}
	}
	if !rows["ruler:qa_1 2K"] || rows["ruler:qa_2 2K"] || len(rows) != 12 {
		t.Errorf("rows %v: want the 11 built-in tasks and qa_1", rows)
	}
	if _, err := BuildSuites(context.Background(), []string{"ruler:qa_2"}, o); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "--ruler-hotpotqa") {
		t.Errorf("ruler:qa_2 without HotpotQA: %v, want ErrOptions naming --ruler-hotpotqa", err)
	}
}

// TestParseRulerQAErrors: a bad file names the file and line.
func TestParseRulerQAErrors(t *testing.T) {
	for _, tc := range []struct {
		hotpot     bool
		data, want string
	}{
		{false, "{\"data\": [\n {\"title\": \"a\", \"paragraphs\": [{\"context\": \"x\", \"qas\": []}]},\n {\"title\": \"b\", \"paragraphs\": [{\"context\": \"\"}]}\n]}", "q.json:3: article 2 paragraph 1 has no context"},
		{false, "{\"data\": [\n {\"title\": \"a\", \"paragraphs\": [{\"context\": \"x\", \"qas\": [{\"question\": \"q\", \"answers\": [], \"is_impossible\": false}]}]}]}", "q.json:2: article 1 paragraph 1 question 1"},
		{false, "{\"data\": [\n {\"title\": \"a\", \"paragraphs\": [{\"context\": \"x\", \"qas\": []}]}]}", "q.json has no answerable SQuAD questions"},
		{false, "{\"data\":\n [1,}", "q.json:2: invalid character '}'"},
		{true, "[\n {\"question\": \"q\", \"answer\": \"a\", \"context\": [[\"t\", [\"s\"]]]},\n {\"question\": \"q\", \"context\": [[\"t\", [\"s\"]]]}\n]", `q.json:3: no "answer"`},
		{true, "[\n {\"question\": \"q\", \"answer\": \"a\", \"context\": [[\"t\", \"s\"]]}\n]", "q.json:2: a context entry is not [title, [sentences]]"},
		{true, "{}", "q.json:1: not a JSON array"},
	} {
		var err error
		if tc.hotpot {
			_, err = ParseRulerHotpotQA([]byte(tc.data), "q.json")
		} else {
			_, err = ParseRulerSQuAD([]byte(tc.data), "q.json")
		}
		if !errors.Is(err, ErrTasks) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want ErrTasks with %q", tc.data, err, tc.want)
		}
	}
}

// TestRulerAverageRow: the average row of a length takes every task's
// items there, scored with string_match_all or _part, as one "mean" row
// after the task rows.
func TestRulerAverageRow(t *testing.T) {
	avg := rulerAverageLabel(1024)
	mk := func(task string, m Metric, i int) Task {
		return Task{Suite: RulerLabel(task, 1024), Index: i, Prompt: "p", Reference: "x|||y", Metrics: []Metric{m}, MaxTokens: 4,
			Groups: []string{avg}, ids: []int{1, 2}}
	}
	s := Suite{Name: SuiteRuler, Groups: []string{avg}, Tasks: []Task{mk("vt", MetricStringMatchAll, 0), mk("vt", MetricStringMatchAll, 1),
		mk(RulerQA1, MetricStringMatchPart, 0), mk(RulerQA1, MetricStringMatchPart, 1)}}
	// The baseline finds both answers; the candidate finds "x" only: vt
	// scores 0.5 per item, qa_1 still 1.
	gen := func(_ context.Context, _ *Task, _ GenItem) ([]GenOutput, error) {
		return []GenOutput{{Text: "x y", Diverge: -1}, {Text: "x"}}, nil
	}
	rep := &Report{}
	err := runSuites(context.Background(), nil, []string{"fp16", "int4"}, func() (generator, func(), error) { return gen, func() {}, nil },
		Options{Suites: []Suite{s}, Workers: 1}, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Suites) != 3 {
		t.Fatalf("%d rows, want vt, qa_1 and the average", len(rep.Suites))
	}
	r := rep.Suites[2]
	// (0.5 + 0.5 + 1 + 1) / 4 = 75; vt's two items flip (pass needs every
	// answer).
	if r.Name != "ruler:average 1K" || r.Metric != string(MetricMean) || r.N != 4 || r.Caches[0].Score != 100 || r.Caches[1].Score != 75 || r.Caches[1].PassToFail != 2 {
		t.Errorf("average row %+v", r)
	}
}
