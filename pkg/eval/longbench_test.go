package eval

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// byteTok is a byte-level tokenizer for the tests: one token per byte,
// BOS 256 first; decoding skips BOS.
func byteEncode(s string) []int {
	ids := []int{256}
	for i := 0; i < len(s); i++ {
		ids = append(ids, int(s[i]))
	}
	return ids
}

func byteDecode(ids []int) string {
	var b []byte
	for _, id := range ids {
		if id < 256 {
			b = append(b, byte(id))
		}
	}
	return string(b)
}

func readLongBench(t *testing.T, name string) []LongBenchItem {
	t.Helper()
	p := filepath.Join("testdata", "longbench", name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	items, err := ParseLongBench(b, p)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func readLongBench2(t *testing.T, name string) []LongBench2Item {
	t.Helper()
	p := filepath.Join("testdata", "longbench", name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	items, err := ParseLongBench2(b, p)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// TestLongBenchTruncate: the middle cut keeps exactly the first and last
// half tokens (v1: max/2 each, BOS counted in the first half and dropped
// by decoding; v2: max/2 and ⌈max/2⌉, Python's -max_len//2).
func TestLongBenchTruncate(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 1000; i++ {
		b.WriteByte(byte('a' + i%26))
	}
	prompt := b.String() // 1000 bytes: 1001 tokens with BOS
	got, cut := LongBenchTruncate(prompt, 101, false, byteEncode, byteDecode)
	// half = 50: [BOS + 49 bytes] + [last 50 bytes] = 99 bytes, 100 tokens
	// with BOS.
	if want := prompt[:49] + prompt[1000-50:]; !cut || got != want {
		t.Fatalf("v1 cut to 101: %q (cut %v), want the first 49 and last 50 bytes", got, cut)
	}
	if n := len(byteEncode(got)); n != 100 {
		t.Errorf("v1 cut to 101: %d tokens, want 100", n)
	}
	got, _ = LongBenchTruncate(prompt, 101, true, byteEncode, byteDecode)
	// v2: first 50 (BOS + 49 bytes) and last 51: 100 bytes, 101 tokens.
	if want := prompt[:49] + prompt[1000-51:]; got != want {
		t.Fatalf("v2 cut to 101: %q, want the first 49 and last 51 bytes", got)
	}
	if n := len(byteEncode(got)); n != 101 {
		t.Errorf("v2 cut to 101: %d tokens, want 101", n)
	}
	if got, cut := LongBenchTruncate(prompt, 1001, false, byteEncode, byteDecode); cut || got != prompt {
		t.Errorf("a prompt of exactly the budget was cut")
	}
}

// TestLongBenchSuites builds the suites from the fixtures: each
// dataset's template, budget, metric, chat rule, first-line rule and
// length bucket, and v2's prompt.
func TestLongBenchSuites(t *testing.T) {
	v1 := append(readLongBench(t, "v1.jsonl"), readLongBench(t, "trec_e.jsonl")...)
	if len(v1) != 6 || v1[4].Dataset != "trec" {
		t.Fatalf("items %d, the trec_e.jsonl item's dataset %q; want 6 and trec (from the file name)", len(v1), v1[4].Dataset)
	}
	v2 := readLongBench2(t, "v2.jsonl")
	if arr := readLongBench2(t, "v2.json"); len(arr) != len(v2) || arr[2] != v2[2] {
		t.Errorf("v2.json (an array) and v2.jsonl differ")
	}
	o := LongBenchOptions{V1: v1, V2: v2, Context: 2048, Encode: byteEncode, Decode: byteDecode, Chat: true, ChatTokens: 7}
	ss, err := LongBenchSuites(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].Name != SuiteLongBench || ss[1].Name != SuiteLongBench2 {
		t.Fatalf("suites %d, want longbench and longbench2", len(ss))
	}
	want := map[string]struct {
		max       int
		metric    Metric
		chat      bool
		firstLine bool
	}{
		"longbench:hotpotqa":      {32, MetricQAF1, true, false},
		"longbench:passage_count": {32, MetricCount, true, false},
		"longbench:trec":          {64, MetricClassification, false, true},
	}
	for _, task := range ss[0].Tasks {
		w, ok := want[task.Suite]
		if !ok {
			t.Fatalf("task row %q", task.Suite)
		}
		if task.MaxTokens != w.max || task.Metrics[0] != w.metric || (len(task.Messages) > 0) != w.chat || task.FirstLine != w.firstLine {
			t.Errorf("%s: max %d, metric %s, chat %v, first line %v; want %+v", task.Suite, task.MaxTokens, task.Metrics[0], len(task.Messages) > 0, task.FirstLine, w)
		}
	}
	hp := ss[0].Tasks[0]
	if wantP := "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n" + v1[0].Context +
		"\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: " + v1[0].Input + "\nAnswer:"; hp.Prompt != wantP || hp.Messages[0].Content != wantP {
		t.Errorf("hotpotqa prompt %q, want %q", hp.Prompt, wantP)
	}
	if hp.Reference != `["the Arlow","Arlow"]` || hp.ID != "kvq-hp-1" || hp.Groups[0] != "longbench:hotpotqa 0-4k" {
		t.Errorf("hotpotqa reference %q, id %q, groups %q", hp.Reference, hp.ID, hp.Groups)
	}
	for i, g := range []string{"longbench:hotpotqa 0-4k", "longbench:hotpotqa 4-8k", "longbench:passage_count 0-4k", "longbench:passage_count 8k+", "longbench:trec 0-4k", "longbench:trec 4-8k"} {
		if got := ss[0].Tasks[i].Groups[0]; got != g {
			t.Errorf("task %d bucket %q, want %q", i, got, g)
		}
	}
	if tr := ss[0].Tasks[4]; len(tr.Classes) != 6 || tr.Index != 0 || !strings.HasSuffix(tr.Prompt, "\nQuestion: Where is the Arlow river?\nType:") {
		t.Errorf("trec task: classes %q, index %d, prompt %q", tr.Classes, tr.Index, tr.Prompt)
	}
	p2 := ss[1].Tasks[0]
	wantV2 := "Please read the following text and answer the question below.\n\n<text>\n" + v2[0].Context + "\n</text>\n\n" +
		"What is the correct answer to this question: What colour is the door of the keeper's house?\nChoices:\n(A) Red\n(B) Blue\n(C) Green\n(D) White\n\n" +
		"Format your response as follows: \"The correct answer is (insert answer here)\"."
	if p2.Prompt != wantV2 || p2.Reference != "B" || p2.MaxTokens != 128 || p2.Metrics[0] != MetricChoice || strings.Join(p2.Groups, ",") != "longbench2 easy,longbench2 short" {
		t.Errorf("v2 task: prompt %q, reference %q, max %d, groups %q", p2.Prompt, p2.Reference, p2.MaxTokens, p2.Groups)
	}

	// N keeps the first N of each dataset; a short context cuts the
	// prompts to the context less the budget and the chat tokens.
	o.N, o.Context = 1, 200
	ss, err = LongBenchSuites(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss[0].Tasks) != 3 || len(ss[1].Tasks) != 1 {
		t.Errorf("-n 1: %d v1 tasks and %d v2, want 3 and 1", len(ss[0].Tasks), len(ss[1].Tasks))
	}
	// hotpotqa: 200 - 32 - 7 = 161 → v1 halves of 80: 160 tokens with BOS.
	if n := len(byteEncode(ss[0].Tasks[0].Prompt)); n != 160 || ss[0].Tasks[0].Meta["truncated"] != "true" {
		t.Errorf("hotpotqa cut to 161: %d tokens (meta %v), want 160", n, ss[0].Tasks[0].Meta)
	}
	// trec (no chat): 200 - 64 = 136 → 136 tokens.
	if n := len(byteEncode(ss[0].Tasks[2].Prompt)); n != 136 {
		t.Errorf("trec cut to 136: %d tokens, want 136", n)
	}
	// v2: 200 - 128 - 7 = 65 → 65 tokens.
	if n := len(byteEncode(ss[1].Tasks[0].Prompt)); n != 65 {
		t.Errorf("v2 cut to 65: %d tokens, want 65", n)
	}
	o.Context = 100
	if _, err := LongBenchSuites(o); !errors.Is(err, ErrOptions) {
		t.Errorf("a 100-token context with v2's 128-token budget: %v, want ErrOptions", err)
	}
}

// TestLongBenchParseErrors: a bad file is an ErrTasks naming the file and
// line.
func TestLongBenchParseErrors(t *testing.T) {
	good := `{"input": "q", "context": "c", "answers": ["a"], "length": 3, "dataset": "hotpotqa"}`
	for _, tc := range []struct {
		v2         bool
		name, data string
		want       string
	}{
		{false, "x.jsonl", good + "\n{not json\n", "x.jsonl:2: not a LongBench object"},
		{false, "x.jsonl", good + "\n\n" + `{"input": "q", "answers": ["a"], "dataset": "wikiqa"}`, `x.jsonl:3: unknown LongBench dataset "wikiqa"`},
		{false, "x.jsonl", `{"input": "q", "answers": []}`, `x.jsonl:1: unknown LongBench dataset "x"`},
		{false, "hotpotqa.jsonl", `{"input": "q", "answers": []}`, `hotpotqa.jsonl:1: no "answers"`},
		{false, "x.jsonl", `{"answers": ["Paragraph"], "dataset": "passage_retrieval_en"}`, `x.jsonl:1: passage_retrieval_en answer "Paragraph" names no paragraph`},
		{false, "lsht.jsonl", `{"answers": ["体育"]}`, `lsht.jsonl:1: lsht needs "all_classes"`},
		{false, "x.jsonl", "\n", "x.jsonl has no items"},
		{true, "v2.jsonl", `{"question": "q", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d", "answer": "E", "difficulty": "easy", "length": "short"}`, `v2.jsonl:1: answer "E"`},
		{true, "v2.jsonl", `{"question": "q", "choice_A": "a", "choice_B": "b", "choice_C": "c", "answer": "A", "difficulty": "easy", "length": "short"}`, `v2.jsonl:1: a choice`},
		{true, "v2.json", "[\n {\"question\": \"q\", \"choice_A\": \"a\", \"choice_B\": \"b\", \"choice_C\": \"c\", \"choice_D\": \"d\", \"answer\": \"A\", \"difficulty\": \"easy\", \"length\": \"short\"},\n {\"question\": \"q\", \"choice_A\": \"a\", \"choice_B\": \"b\", \"choice_C\": \"c\", \"choice_D\": \"d\", \"answer\": \"A\", \"difficulty\": \"medium\", \"length\": \"short\"}\n]", `v2.json:3: difficulty "medium"`},
		{true, "v2.json", "[\n {\"question\": \"q\",\n  oops}\n]", `v2.json:3: invalid character 'o'`},
	} {
		var err error
		if tc.v2 {
			_, err = ParseLongBench2([]byte(tc.data), tc.name)
		} else {
			_, err = ParseLongBench([]byte(tc.data), tc.name)
		}
		if !errors.Is(err, ErrTasks) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %v, want ErrTasks with %q", tc.name, tc.data, err, tc.want)
		}
	}
}

// TestLongBenchRows runs the v2 fixture through the row aggregation with
// outputs made up per cache: the baseline answers every item right, the
// candidate misses the second (hard, medium). The rows come in the
// suite's group order with their own counts and flips.
func TestLongBenchRows(t *testing.T) {
	ss, err := LongBenchSuites(LongBenchOptions{V2: readLongBench2(t, "v2.jsonl"), Context: 4096, Encode: byteEncode, Decode: byteDecode})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ss[0].Tasks {
		ss[0].Tasks[i].ids = byteEncode(ss[0].Tasks[i].Prompt)
	}
	gen := func(_ context.Context, task *Task, _ GenItem) ([]GenOutput, error) {
		right := "The correct answer is (" + task.Reference + ")"
		cand := right
		if task.Index == 1 {
			cand = "The correct answer is (A)"
		}
		return []GenOutput{{Text: right, Diverge: -1}, {Text: cand}}, nil
	}
	newGen := func() (generator, func(), error) { return gen, func() {}, nil }
	rep := &Report{}
	if err := runSuites(context.Background(), nil, []string{"fp16", "int4"}, newGen, Options{Suites: ss, Workers: 1}, rep); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		n     int
		score float64
		p2f   int
	}{
		{"longbench2", 3, 200.0 / 3, 1}, {"longbench2 easy", 1, 100, 0}, {"longbench2 hard", 2, 50, 1},
		{"longbench2 short", 1, 100, 0}, {"longbench2 medium", 1, 0, 1}, {"longbench2 long", 1, 100, 0},
	}
	if len(rep.Suites) != len(want) {
		t.Fatalf("%d rows, want %d", len(rep.Suites), len(want))
	}
	for i, w := range want {
		r := rep.Suites[i]
		if r.Name != w.name || r.N != w.n || r.Metric != string(MetricChoice) || r.Caches[0].Score != 100 || math.Abs(r.Caches[1].Score-w.score) > 1e-9 || r.Caches[1].PassToFail != w.p2f {
			t.Errorf("row %d: %s N %d, scores %v/%v, pass→fail %d; want %+v", i, r.Name, r.N, r.Caches[0].Score, r.Caches[1].Score, r.Caches[1].PassToFail, w)
		}
	}
	if len(rep.Flips) != 1 {
		t.Errorf("%d flips, want 1 (group rows add none)", len(rep.Flips))
	}
}
