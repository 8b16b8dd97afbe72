package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
)

// gsm8kFixtures are pkg/eval's made-up GSM8K-shaped files: 4 test items
// and 3 few-shot examples.
func gsm8kFixtures(t *testing.T) (test, train string) {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "pkg", "eval", "testdata")
	return filepath.Join(dir, "gsm8k_test.jsonl"), filepath.Join(dir, "gsm8k_train.jsonl")
}

// TestEvalGSM8K runs a local GSM8K-shaped file through kvq eval on a tiny
// model: two rows, strict-match and flexible-extract, of -n items each,
// every cache compared with the baseline; --log-samples shows the 2-shot
// prompt and both metrics per item and cache.
func TestEvalGSM8K(t *testing.T) {
	dir := tinyHF(t, 2048)
	test, train := gsm8kFixtures(t)
	args := []string{"eval", "--model", dir, "--tasks", "gsm8k=" + test, "--fewshot", train, "--num-fewshot", "2", "-n", "3",
		"--no-text", "--no-speed", "--cache", "fp16,int4"}
	code, out, stderr := run(t, args...)
	if code != 0 || !strings.Contains(out, "gsm8k strict-match") || !strings.Contains(out, "gsm8k flexible-extract") {
		t.Fatalf("kvq %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, stderr, out)
	}
	samples := filepath.Join(t.TempDir(), "samples.jsonl")
	code, out, stderr = run(t, append(args, "-o", "json", "--log-samples", samples)...)
	if code != 0 {
		t.Fatalf("kvq %s -o json: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	var rep struct {
		Suites []struct {
			Suite, Kind, Metric string
			N                   int
			Caches              []struct {
				Cache    string
				McNemarP float64 `json:"mcnemar_p"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Suites) != 2 {
		t.Fatalf("suites %+v, want two rows", rep.Suites)
	}
	for i, want := range []string{"strict-match", "flexible-extract"} {
		s := rep.Suites[i]
		if s.Suite != "gsm8k "+want || s.Metric != want || s.N != 3 || s.Kind != "reasoning" || len(s.Caches) != 2 || s.Caches[1].Cache != "int4" {
			t.Errorf("row %d %+v, want gsm8k %s, N 3, fp16 and int4", i, s, want)
		}
		if p := s.Caches[1].McNemarP; p <= 0 || p > 1 {
			t.Errorf("%s: int4's McNemar p = %v, want in (0, 1]", want, p)
		}
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3*2*2 {
		t.Fatalf("%d samples, want 3 items × 2 caches × 2 metrics", len(lines))
	}
	for _, l := range lines {
		var s struct{ Prompt, Output string }
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if strings.Count(s.Prompt, "Question: ") != 3 || !strings.HasPrefix(s.Prompt, "Question: Sam buys") || !strings.HasSuffix(s.Prompt, "\nAnswer:") ||
			strings.Contains(s.Output, "Question:") {
			t.Errorf("sample %+v: want a 2-shot prompt and an output cut before any \"Question:\"", s)
		}
	}
}

// TestEvalGSM8KFlags: GSM8K's flag errors are usage errors (exit 2).
func TestEvalGSM8KFlags(t *testing.T) {
	dir := tinyHF(t, 2048)
	test, train := gsm8kFixtures(t)
	bare := filepath.Join(t.TempDir(), "bare.jsonl")
	if err := os.WriteFile(bare, []byte(`{"question": "2+2?", "answer": "4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", "gsm8k=" + test}, "5-shot needs --fewshot TRAIN.jsonl"},
		{[]string{"--tasks", "gsm8k"}, "GSM8K is read from your local copy: --tasks gsm8k=TEST.jsonl"},
		{[]string{"--tasks", "gsm8k=" + test, "--fewshot", train, "--num-fewshot", "4"}, "--num-fewshot 4: " + train + " holds 3 examples"},
		{[]string{"--tasks", "gsm8k=" + test, "--num-fewshot", "-1"}, "--num-fewshot -1: must be ≥ 0"},
		{[]string{"--tasks", "copy", "--fewshot", train}, "--fewshot needs --tasks gsm8k=FILE"},
		{[]string{"--tasks", "gsm8k=" + train + ".missing", "--num-fewshot", "0"}, ".missing: "},
		{[]string{"--tasks", "gsm8k=" + bare, "--num-fewshot", "0"}, bare + ":1: the answer has no \"#### N\""},
	} {
		args := append([]string{"eval", "--model", dir, "--no-speed", "--no-text"}, tc.args...)
		code, out, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("kvq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, stderr, tc.want)
		}
	}
}
