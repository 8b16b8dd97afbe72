package eval

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/datasets"
)

// TestStringMatch checks RULER's metrics (scripts/eval/synthetic/
// constants.py) on hand-made predictions: string_match_all is the share
// of the references in the prediction, string_match_part whether any is,
// both case-insensitive.
func TestStringMatch(t *testing.T) {
	tests := []struct {
		name      string
		pred      string
		refs      []string
		all, part float64
	}{
		{"all found", "The numbers are 1234567 and 7654321.", []string{"1234567", "7654321"}, 1, 1},
		{"half found", "The number is 1234567.", []string{"1234567", "7654321"}, 0.5, 1},
		{"one of four", " ABC and nothing else", []string{"abc", "def", "ghi", "jkl"}, 0.25, 1},
		{"none", "I do not know.", []string{"1234567"}, 0, 0},
		{"case-insensitive", "they are: qxmjz, ABCDE", []string{"QXMJZ", "abcde"}, 1, 1},
		{"substring counts", "12345678", []string{"1234567"}, 1, 1},
		{"empty prediction", "", []string{"x"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StringMatchAll(tt.pred, tt.refs); math.Abs(got-tt.all) > 1e-12 {
				t.Errorf("StringMatchAll(%q, %q) = %v, want %v", tt.pred, tt.refs, got, tt.all)
			}
			if got := StringMatchPart(tt.pred, tt.refs); got != tt.part {
				t.Errorf("StringMatchPart(%q, %q) = %v, want %v", tt.pred, tt.refs, got, tt.part)
			}
			ref := strings.Join(tt.refs, "|||")
			sc, err := ScoreOutput(MetricStringMatchAll, tt.pred, ref, ScoreOptions{})
			if err != nil || sc.Value != tt.all || sc.Pass != (tt.all == 1) {
				t.Errorf("ScoreOutput(string-match-all, %q, %q) = %+v, %v, want Value %v", tt.pred, ref, sc, err, tt.all)
			}
			sc, err = ScoreOutput(MetricStringMatchPart, tt.pred, ref, ScoreOptions{})
			if err != nil || sc.Value != tt.part || sc.Pass != (tt.part == 1) {
				t.Errorf("ScoreOutput(string-match-part, %q, %q) = %+v, %v, want Value %v", tt.pred, ref, sc, err, tt.part)
			}
		})
	}
	if _, err := ScoreOutput(MetricStringMatchAll, "x", " ||| ", ScoreOptions{}); !errors.Is(err, ErrReference) {
		t.Errorf("string-match-all with an empty reference: error %v, want ErrReference", err)
	}
	// RULER's task score is the mean of the items' values ×100: three
	// items scoring 1, 0.5 and 0 are 50.
	preds := []string{"a b", "a", "c"}
	var sum float64
	for _, p := range preds {
		sum += StringMatchAll(p, []string{"a", "b"})
	}
	if got := 100 * sum / 3; got != 50 {
		t.Errorf("string_match_all over %q = %v, want 50", preds, got)
	}
}

func TestCheckSuiteRuler(t *testing.T) {
	for _, name := range []string{"ruler", "ruler:niah_single_2", "ruler:vt", "ruler:fwe", "ruler:qa_1", "ruler:qa_2"} {
		if err := CheckSuite(name); err != nil {
			t.Errorf("CheckSuite(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"ruler:qa_3", "ruler:", "rulers"} {
		if err := CheckSuite(name); !errors.Is(err, ErrOptions) {
			t.Errorf("CheckSuite(%q) = %v, want ErrOptions", name, err)
		}
	}
	o := &SuiteOptions{}
	if got, want := o.rulerTasks([]string{"copy", "ruler:vt", "ruler:niah_single_1", "ruler:vt"}), []string{"niah_single_1", "vt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rulerTasks = %q, want %q", got, want)
	}
	if got := o.rulerTasks([]string{"ruler:vt", "ruler"}); len(got) != 11 {
		t.Errorf("rulerTasks(ruler) = %q, want the 11 built in (no qa data given)", got)
	}
	o.RulerHotpotQA = &RulerQAData{}
	if got := o.rulerTasks([]string{"ruler"}); len(got) != 12 || got[11] != RulerQA2 {
		t.Errorf("rulerTasks(ruler) with HotpotQA = %q, want the 11 and qa_2", got)
	}
	if got := (&SuiteOptions{}).rulerTasks([]string{"ruler:qa_1"}); !reflect.DeepEqual(got, []string{RulerQA1}) {
		t.Errorf("rulerTasks(ruler:qa_1) = %q, want qa_1 (refused later without data)", got)
	}
}

func byteTokens(s string) int { return len(s) + 1 }

// TestBuildSuitesRuler: the ruler suite has N items per task and length,
// one row label per cell, RULER's metric and budget, and the same items
// whatever else is asked.
func TestBuildSuitesRuler(t *testing.T) {
	o := SuiteOptions{N: 3, Seed: 9, RulerLengths: []int{1024, 2048}, Tokens: byteTokens, ModelContext: 2048}
	ss, err := BuildSuites(context.Background(), []string{"copy", "ruler:niah_single_1", "ruler:fwe"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[1].Name != SuiteRuler {
		t.Fatalf("suites %d, want copy and ruler", len(ss))
	}
	r := ss[1]
	if len(r.Tasks) != 2*2*3 {
		t.Fatalf("%d ruler items, want 12", len(r.Tasks))
	}
	labels := map[string]int{}
	for _, task := range r.Tasks {
		labels[task.Suite]++
		n, _ := strconv.Atoi(task.Meta["length"])
		tok, _ := strconv.Atoi(task.Meta["tokens"])
		if tok > n || byteTokens(task.Prompt)+task.MaxTokens != tok {
			t.Errorf("%s: tokens %s for length %s", task.Suite, task.Meta["tokens"], task.Meta["length"])
		}
		if !reflect.DeepEqual(task.Metrics, []Metric{MetricStringMatchAll}) || task.Line {
			t.Errorf("%s: metrics %v, line %v, want string-match-all without a line stop", task.Suite, task.Metrics, task.Line)
		}
		if want := map[string]int{"niah_single_1": 128, "fwe": 50}[task.Meta["task"]]; task.MaxTokens != want {
			t.Errorf("%s: MaxTokens %d, want RULER's %d", task.Suite, task.MaxTokens, want)
		}
	}
	want := map[string]int{"ruler:niah_single_1 1K": 3, "ruler:niah_single_1 2K": 3, "ruler:fwe 1K": 3, "ruler:fwe 2K": 3}
	if !reflect.DeepEqual(labels, want) {
		t.Errorf("rows %v, want %v", labels, want)
	}
	// A subset draws the full run's items.
	one, err := BuildSuites(context.Background(), []string{"ruler:fwe"}, o)
	if err != nil {
		t.Fatal(err)
	}
	// The larger run's items also count in the average rows.
	for i, task := range r.Tasks {
		if want := []string{rulerAverageLabel(1024 << (i / 3 % 2))}; !reflect.DeepEqual(task.Groups, want) {
			t.Errorf("item %d (%s) groups %q, want %q", i, task.Suite, task.Groups, want)
		}
		r.Tasks[i].Groups = nil
	}
	if !reflect.DeepEqual(r.Groups, []string{"ruler:average 1K", "ruler:average 2K"}) {
		t.Errorf("suite groups %q, want the average rows by length", r.Groups)
	}
	if !reflect.DeepEqual(one[0].Tasks, r.Tasks[6:]) {
		t.Errorf("ruler:fwe alone differs from its items in a larger run")
	}
	ex, _ := datasets.Ruler("fwe", 1024, rulerSeed(9, "fwe", 1024, 0), byteTokens)
	if one[0].Tasks[0].Prompt != ex.Prompt || one[0].Tasks[0].Reference != strings.Join(ex.Outputs, "|||") {
		t.Errorf("item 0 is not datasets.Ruler's example")
	}
}

func TestBuildSuitesRulerLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    SuiteOptions
		want error
	}{
		{"too short", SuiteOptions{RulerLengths: []int{256}, Tokens: byteTokens, ModelContext: 2048}, datasets.ErrRulerLength},
		{"past the context", SuiteOptions{RulerLengths: []int{4096}, Tokens: byteTokens, ModelContext: 2048}, ErrOptions},
		{"no tokenizer", SuiteOptions{RulerLengths: []int{1024}, ModelContext: 2048}, ErrOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := BuildSuites(context.Background(), []string{"ruler:niah_single_1"}, tc.o); !errors.Is(err, tc.want) {
				t.Errorf("BuildSuites error = %v, want %v", err, tc.want)
			}
		})
	}
	// The default lengths are RULER's up to the model's context, or the
	// context alone when it is shorter than 4K.
	ss, err := BuildSuites(context.Background(), []string{"ruler:niah_single_1"}, SuiteOptions{N: 1, Tokens: byteTokens, ModelContext: 2048})
	if err != nil || len(ss[0].Tasks) != 1 || ss[0].Tasks[0].Suite != "ruler:niah_single_1 2K" {
		t.Errorf("default lengths on a 2K model: %v, %v", ss, err)
	}
}
