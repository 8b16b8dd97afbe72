package root

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvalRuler runs RULER's niah_single_1 through kvq eval on a tiny
// model with a byte-level tokenizer: one row per task and length with
// RULER's metric, N items, every cache compared with the baseline.
func TestEvalRuler(t *testing.T) {
	dir := tinyHF(t, 2048)
	args := []string{"eval", "--model", dir, "--tasks", "ruler:niah_single_1", "--ruler-lengths", "1024", "-n", "2", "--no-text", "--no-speed", "--cache", "fp16,int4"}
	code, out, stderr := run(t, args...)
	if code != 0 || !strings.Contains(out, "ruler:niah_single_1 1K") {
		t.Fatalf("kvq %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, stderr, out)
	}
	code, out, stderr = run(t, append(args, "-o", "json")...)
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
	if len(rep.Suites) != 1 {
		t.Fatalf("suites %+v, want one row", rep.Suites)
	}
	s := rep.Suites[0]
	if s.Suite != "ruler:niah_single_1 1K" || s.Metric != "string-match-all" || s.N != 2 || s.Kind != "long-context" || len(s.Caches) != 2 || s.Caches[1].Cache != "int4" {
		t.Errorf("row %+v, want ruler:niah_single_1 1K, string-match-all, N 2, fp16 and int4", s)
	}
	if p := s.Caches[1].McNemarP; p <= 0 || p > 1 {
		t.Errorf("int4's McNemar p = %v, want in (0, 1]", p)
	}
}

// TestEvalRulerLimits: lengths past the model's context, or too short for
// a task's prompt and answer budget, and unknown tasks are usage errors.
func TestEvalRulerLimits(t *testing.T) {
	dir := tinyHF(t, 2048)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", "ruler", "--ruler-lengths", "1024,4096"}, "--ruler-lengths 4096: more than the 2048 tokens of the model's context"},
		{[]string{"--tasks", "ruler:niah_single_1", "--max-context", "1000", "--ruler-lengths", "1024"}, "--ruler-lengths 1024: more than the 1000 tokens"},
		{[]string{"--tasks", "ruler:niah_single_1", "--ruler-lengths", "256"}, "kvq: --ruler-lengths: eval: bad options: ruler length 256: datasets: RULER length too short: niah_single_1 needs"},
		{[]string{"--tasks", "ruler:qa_3"}, `unknown RULER task "qa_3" (have niah_single_1,`},
		{[]string{"--tasks", "ruler", "--ruler-lengths", "0"}, `--ruler-lengths: "0" is not a positive integer`},
	} {
		args := append([]string{"eval", "--model", dir, "--no-speed", "--no-text"}, tc.args...)
		code, out, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("kvq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, stderr, tc.want)
		}
	}
}
