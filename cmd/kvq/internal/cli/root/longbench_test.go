package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
)

// evalFixture is a file of pkg/eval/testdata.
func evalFixture(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root, "pkg", "eval", "testdata"}, parts...)...)
}

type lbReport struct {
	Config struct {
		Suites []string
		Data   []struct {
			Name, Kind, SHA256 string
		}
	}
	Suites []struct {
		Suite, Kind, Metric string
		N                   int
		Caches              []struct {
			Cache      string
			Score      float64
			Diff       float64
			DiffLo     *float64 `json:"diff_lo"`
			PassToFail *int     `json:"pass_to_fail"`
			McNemarP   float64  `json:"mcnemar_p"`
		}
	}
}

// TestEvalLongBench runs the LongBench fixtures (v1: hotpotqa and
// passage_count, trec from trec_e.jsonl's name; v2) through kvq eval on
// the built-in model with two caches: a row per dataset, then its
// LongBench-E buckets, then v2's overall, difficulty and length rows, each
// with both caches and the paired comparison; the setup names the files.
func TestEvalLongBench(t *testing.T) {
	v1, trec, v2 := evalFixture(t, "longbench", "v1.jsonl"), evalFixture(t, "longbench", "trec_e.jsonl"), evalFixture(t, "longbench", "v2.jsonl")
	samples := filepath.Join(t.TempDir(), "samples.jsonl")
	tasks := "longbench=" + v1 + ",longbench=" + trec + ",longbench2=" + v2
	args := []string{"eval", "--tasks", tasks, "--cache", "fp16,int4", "--no-text", "--no-speed", "-o", "json", "--log-samples", samples}
	code, out, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("kvq %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	var rep lbReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		row, metric string
		n           int
	}{
		{"longbench:hotpotqa", "qa-f1-score", 2}, {"longbench:passage_count", "count-score", 2}, {"longbench:trec", "classification-score", 2},
		{"longbench:hotpotqa 0-4k", "qa-f1-score", 1}, {"longbench:hotpotqa 4-8k", "qa-f1-score", 1},
		{"longbench:passage_count 0-4k", "count-score", 1}, {"longbench:passage_count 8k+", "count-score", 1},
		{"longbench:trec 0-4k", "classification-score", 1}, {"longbench:trec 4-8k", "classification-score", 1},
		{"longbench2", "choice-accuracy", 3}, {"longbench2 easy", "choice-accuracy", 1}, {"longbench2 hard", "choice-accuracy", 2},
		{"longbench2 short", "choice-accuracy", 1}, {"longbench2 medium", "choice-accuracy", 1}, {"longbench2 long", "choice-accuracy", 1},
	}
	if len(rep.Suites) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rep.Suites), len(want), rep.Suites)
	}
	for i, w := range want {
		s := rep.Suites[i]
		if s.Suite != w.row || s.Metric != w.metric || s.N != w.n || s.Kind != "long-context" || len(s.Caches) != 2 || s.Caches[1].Cache != "int4" {
			t.Errorf("row %d: %s %s N %d kind %s, want %+v", i, s.Suite, s.Metric, s.N, s.Kind, w)
			continue
		}
		c := s.Caches[1]
		if c.DiffLo == nil || c.PassToFail == nil || c.McNemarP <= 0 || c.McNemarP > 1 || c.Score < 0 || c.Score > 100 {
			t.Errorf("%s: int4 %+v, want a diff interval, flips and a McNemar p", s.Suite, c)
		}
	}
	if got := strings.Join(rep.Config.Suites, ","); got != tasks {
		t.Errorf("config suites %q, want %q", got, tasks)
	}
	kinds := map[string]int{}
	for _, d := range rep.Config.Data {
		if d.SHA256 != "" {
			kinds[d.Kind]++
		}
	}
	if kinds["longbench"] != 2 || kinds["longbench2"] != 1 {
		t.Errorf("config data %+v, want two longbench files and one longbench2, hashed", rep.Config.Data)
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	// 9 items × 2 caches; trec's prompt is its template, the v2 prompt
	// ends with the answer format.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 9*2 {
		t.Errorf("%d samples, want 18", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var s struct{ Suite, Prompt, Reference string }
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		seen[s.Suite] = true
		switch s.Suite {
		case "longbench:trec":
			if !strings.HasPrefix(s.Prompt, "Please determine the type of the question below.") {
				t.Errorf("trec prompt %q", s.Prompt)
			}
		case "longbench2":
			if !strings.HasSuffix(s.Prompt, `"The correct answer is (insert answer here)".`) || len(s.Reference) != 1 {
				t.Errorf("v2 prompt %q, reference %q", s.Prompt, s.Reference)
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("samples of %v, want the three datasets and v2", seen)
	}
}

// TestEvalLongBenchChat: on a model with a chat template the template
// wraps every dataset's prompt but trec's (LongBench's exclusions), and
// --max-context cuts the long prompts in the middle.
func TestEvalLongBenchChat(t *testing.T) {
	dir := tinyHF(t, 2048)
	samples := filepath.Join(t.TempDir(), "samples.jsonl")
	args := []string{"eval", "--model", dir, "--tasks", "longbench=" + evalFixture(t, "longbench", "v1.jsonl") + ",longbench=" + evalFixture(t, "longbench", "trec_e.jsonl") + ",longbench2=" + evalFixture(t, "longbench", "v2.jsonl"),
		"--cache", "fp16,int4", "--no-text", "--no-speed", "--max-context", "300", "--log-samples", samples}
	code, _, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("kvq %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s struct{ Suite, Prompt string }
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		chat := strings.Contains(s.Prompt, "<|user|>")
		if chat == (s.Suite == "longbench:trec") {
			t.Errorf("%s: chat template applied %v: %q", s.Suite, chat, s.Prompt)
		}
		// v2's prompts (about 500 bytes) are cut to 300 - 128 tokens less
		// the template's: the question is gone from the middle.
		if s.Suite == "longbench2" && (len(s.Prompt) > 300 || !strings.HasSuffix(s.Prompt, "(insert answer here)\".<|assistant|>")) {
			t.Errorf("v2 prompt not cut in the middle to the budget: %d bytes %q", len(s.Prompt), s.Prompt)
		}
	}
}

// TestEvalRulerQA runs RULER's qa_1 and qa_2 on the SQuAD- and
// HotpotQA-shaped fixtures: a row per task and length with
// string-match-part, and the average row of the length.
func TestEvalRulerQA(t *testing.T) {
	dir := tinyHF(t, 2048)
	args := []string{"eval", "--model", dir, "--tasks", "ruler:qa_1,ruler:qa_2", "--ruler-squad", evalFixture(t, "ruler", "squad.json"),
		"--ruler-hotpotqa", evalFixture(t, "ruler", "hotpotqa.json"), "--ruler-lengths", "1024", "-n", "2", "--no-text", "--no-speed", "--cache", "fp16,int4", "-o", "json"}
	code, out, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("kvq %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	var rep lbReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rep.Suites {
		got = append(got, s.Suite+" "+s.Metric)
	}
	if strings.Join(got, ",") != "ruler:qa_1 1K string-match-part,ruler:qa_2 1K string-match-part,ruler:average 1K string-match-part" || rep.Suites[2].N != 4 {
		t.Errorf("rows %q (average N %d), want qa_1, qa_2 and their average of 4 items", got, rep.Suites[2].N)
	}
}

// TestEvalLongBenchErrors: a missing or malformed file, a bare name and
// a qa task without its data are usage errors (exit 2) naming the file
// and line or the flag.
func TestEvalLongBenchErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "hotpotqa.jsonl")
	if err := os.WriteFile(bad, []byte(`{"input": "q", "context": "c", "answers": ["a"], "length": 3}`+"\n"+`{"input": "q", "answers": []}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badV2 := filepath.Join(tmp, "v2.jsonl")
	if err := os.WriteFile(badV2, []byte(`{"question": "q", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d", "answer": "F", "difficulty": "easy", "length": "short"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badSquad := filepath.Join(tmp, "squad.json")
	if err := os.WriteFile(badSquad, []byte("{\"data\": [\n {\"title\": \"a\",\n  \"paragraphs\": [{\"context\": \"x\", \"qas\": [}]}]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", "longbench=" + bad}, bad + `:2: no "answers"`},
		{[]string{"--tasks", "longbench2=" + badV2}, badV2 + `:1: answer "F"`},
		{[]string{"--tasks", "longbench=" + filepath.Join(tmp, "none.jsonl")}, "--tasks longbench=" + filepath.Join(tmp, "none.jsonl")},
		{[]string{"--tasks", "longbench2"}, "--tasks longbench2: LongBench is read from your local copy"},
		{[]string{"--tasks", "ruler:qa_1", "--ruler-lengths", "1024"}, "ruler:qa_1 reads your local copy of its data set (--ruler-squad FILE)"},
		{[]string{"--tasks", "copy", "--ruler-hotpotqa", badSquad}, "--ruler-hotpotqa needs --tasks ruler"},
		{[]string{"--tasks", "ruler:qa_1", "--ruler-squad", badSquad, "--ruler-lengths", "1024"}, badSquad + ":3: invalid character '}'"},
	} {
		args := append([]string{"eval", "--model", tinyHF(t, 2048), "--no-speed", "--no-text"}, tc.args...)
		code, out, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("kvq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, stderr, tc.want)
		}
	}
}
