package root

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/internal/testutil"
)

// mcFixture is pkg/eval's made-up multiple-choice file name.
func mcFixture(t *testing.T, name string) string {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "pkg", "eval", "testdata", "mc", name)
}

// TestEvalMC runs kvq eval --tasks arc=FILE end to end on the built-in
// model with two caches: rows "arc acc" and "arc acc_norm" in the JSON
// report, each with both caches and the paired comparison; the samples
// carry the 2-shot prompts, the log-likelihood picks and the flips'
// baseline side.
func TestEvalMC(t *testing.T) {
	if _, ok := models.ProbeModel(); !ok {
		t.Skip("this build has no built-in model")
	}
	test, train := mcFixture(t, "arc.jsonl"), mcFixture(t, "arc_train.jsonl")
	samples := filepath.Join(t.TempDir(), "samples.jsonl")
	report := filepath.Join(t.TempDir(), "r.html")
	args := []string{"eval", "--tasks", "arc=" + test, "--fewshot", train, "--num-fewshot", "2", "-n", "5",
		"--no-text", "--no-speed", "--cache", "fp16,int2", "-o", "json", "--log-samples", samples, "--report", report}
	code, out, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("kvq %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	var rep struct {
		Setup struct {
			Suites []string
			Data   []struct{ Name, Kind string }
		} `json:"config"`
		Suites []struct {
			Suite, Kind, Metric string
			N                   int
			HigherIsBetter      bool `json:"higher_is_better"`
			Caches              []struct {
				Cache      string
				Score      float64
				PassToFail int     `json:"pass_to_fail"`
				FailToPass int     `json:"fail_to_pass"`
				McNemarP   float64 `json:"mcnemar_p"`
				Diff       float64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Suites) != 2 {
		t.Fatalf("rows %+v, want arc acc and arc acc_norm", rep.Suites)
	}
	flips := 0
	for i, want := range []string{"acc", "acc_norm"} {
		s := rep.Suites[i]
		if s.Suite != "arc "+want || s.Metric != want || s.N != 5 || s.Kind != "multiple-choice" || !s.HigherIsBetter ||
			len(s.Caches) != 2 || s.Caches[0].Cache != "fp16" || s.Caches[1].Cache != "int2" {
			t.Errorf("row %d %+v, want arc %s over 5 items, fp16 and int2", i, s, want)
			continue
		}
		for _, c := range s.Caches {
			if k := c.Score * 5 / 100; c.Score < 0 || c.Score > 100 || math.Abs(k-math.Round(k)) > 1e-9 {
				t.Errorf("%s %s: score %v is not a share of 5 items", s.Suite, c.Cache, c.Score)
			}
		}
		c := s.Caches[1]
		if c.McNemarP <= 0 || c.McNemarP > 1 || math.Abs(c.Score-s.Caches[0].Score-float64(c.FailToPass-c.PassToFail)*100/5) > 1e-9 || math.Abs(c.Diff-(c.Score-s.Caches[0].Score)) > 1e-9 {
			t.Errorf("%s int2: %+v against fp16 %v: flips and score disagree", s.Suite, c, s.Caches[0].Score)
		}
		flips += c.PassToFail + c.FailToPass
	}
	if strings.Join(rep.Setup.Suites, ",") != "arc="+test || len(rep.Setup.Data) != 2 || rep.Setup.Data[0].Kind != "arc" || rep.Setup.Data[1].Kind != "arc-fewshot" {
		t.Errorf("setup %+v", rep.Setup)
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5*2*2 {
		t.Fatalf("%d samples, want 5 items × 2 caches × 2 metrics", len(lines))
	}
	flipped := 0
	for _, l := range lines {
		var s struct {
			Suite, Cache, Prompt, Reference, Output, Metric, Flipped string
			Pass                                                     bool
			Value                                                    float64
			Baseline                                                 struct{ Cache, Output string }
		}
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if strings.Count(s.Prompt, "Question: ") != 3 || strings.Count(s.Prompt, "\nAnswer: ") != 2 || !strings.HasSuffix(s.Prompt, "\nAnswer:") ||
			!strings.HasPrefix(s.Output, "acc: ") || !strings.Contains(s.Output, "log-likelihoods: -") || s.Reference == "" || s.Value != map[bool]float64{true: 1}[s.Pass] {
			t.Errorf("sample %+v: want a 2-shot ARC prompt, the picks and log-likelihoods", s)
		}
		if s.Flipped != "" {
			flipped++
			if s.Cache != "int2" || s.Baseline.Cache != "fp16" || !strings.HasPrefix(s.Baseline.Output, "acc: ") {
				t.Errorf("flipped sample %+v", s)
			}
		}
	}
	if flipped != flips {
		t.Errorf("%d flipped samples, the rows count %d flips", flipped, flips)
	}
	html, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(html), "arc acc_norm") {
		t.Errorf("HTML report: %v, no arc acc_norm row", err)
	}
}

// TestEvalMCFlags: bad multiple-choice inputs are usage errors (exit 2)
// naming the flag, the file and line, or the data sets kvq reads.
func TestEvalMCFlags(t *testing.T) {
	dir := tinyHF(t, 2048)
	test, train := mcFixture(t, "arc.jsonl"), mcFixture(t, "arc_train.jsonl")
	gsmTest, _ := gsm8kFixtures(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"}`+"\n"+`{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "C"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks", "arc"}, "arc is read from your local copy: --tasks arc=FILE"},
		{[]string{"--tasks", "mmlu-pro=" + test}, `unknown data set "mmlu-pro" (valid: gsm8k=FILE, mmlu=FILE, arc=FILE, hellaswag=FILE, winogrande=FILE, piqa=FILE, mc=FILE)`},
		{[]string{"--tasks", "arc=" + test + ".missing"}, ".missing: "},
		{[]string{"--tasks", "arc=" + test + ",arc=" + test}, "arc given twice"},
		{[]string{"--tasks", "arc=" + bad}, bad + `:2: "answerKey": "C" is not one of the labels`},
		{[]string{"--tasks", "piqa=" + test}, test + `:1: "goal": missing`},
		{[]string{"--tasks", "arc=" + test, "--num-fewshot", "2"}, "2-shot needs --fewshot FILE"},
		{[]string{"--tasks", "arc=" + test, "--fewshot", train}, "multiple choice is 0-shot unless --num-fewshot N"},
		{[]string{"--tasks", "arc=" + test, "--fewshot", train, "--num-fewshot", "4"}, "--num-fewshot 4: " + train + " holds 3 examples"},
		{[]string{"--tasks", "arc=" + test + ",gsm8k=" + gsmTest, "--fewshot", train}, "2 suites that read shots (gsm8k, arc)"},
		{[]string{"--tasks", "arc=" + test, "--fewshot", train + ".missing", "--num-fewshot", "1"}, "--fewshot: "},
		{[]string{"--tasks", "arc=" + test, "--endpoint", "a=http://127.0.0.1:1", "--endpoint", "b=http://127.0.0.1:1"}, "not with --endpoint"},
	} {
		args := append([]string{"eval", "--model", dir, "--no-speed", "--no-text"}, tc.args...)
		code, out, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("kvq %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, stderr, tc.want)
		}
	}
}
