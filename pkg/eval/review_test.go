package eval_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// TestFlips builds the flips of hand-made samples: an item that regressed
// and one that improved under int2, an item where int4 regressed, items
// that agree, and a candidate sample with no baseline; regressions come
// first, each direction in the samples' order, with both outputs.
func TestFlips(t *testing.T) {
	long := strings.Repeat("a", 400) + "MIDDLE" + strings.Repeat("z", 400)
	s := func(suite string, index int, metric, cache, out string, pass bool) eval.Sample {
		v := 0.0
		if pass {
			v = 1
		}
		return eval.Sample{Suite: suite, Index: index, Cache: cache, Metric: metric, Prompt: suite + " prompt", Reference: "ref", Output: out, Value: v, Pass: pass}
	}
	samples := []eval.Sample{
		s("copy", 0, "exact", "fp16", "abc", true), s("copy", 0, "exact", "int4", "abc", true), s("copy", 0, "exact", "int2", "abd", false),
		s("copy", 1, "exact", "fp16", "x", false), s("copy", 1, "exact", "int4", "x", false), s("copy", 1, "exact", "int2", "y", true),
		s("json", 0, "json-exact", "fp16", "{}", true), s("json", 0, "json-exact", "int4", "{", false), s("json", 0, "json-exact", "int2", "{}", true),
		// Same index, other metric: its own pair.
		s("json", 0, "json-valid", "fp16", "{}", true), s("json", 0, "json-valid", "int4", "{", true), s("json", 0, "json-valid", "int2", "{}", true),
		// A candidate sample whose baseline is missing is no flip.
		s("lost", 0, "exact", "int2", "q", true),
	}
	samples[0].Prompt = long
	got := eval.Flips(samples, "fp16")
	want := []eval.Flip{
		{Suite: "copy", Index: 0, Metric: "exact", Cache: "int2", Baseline: "fp16", Direction: eval.FlipRegressed,
			Prompt: "copy prompt", Reference: "ref", BaselineOutput: "abc", Output: "abd", BaselineValue: 1, Value: 0, BaselinePass: true, Pass: false},
		{Suite: "json", Index: 0, Metric: "json-exact", Cache: "int4", Baseline: "fp16", Direction: eval.FlipRegressed,
			Prompt: "json prompt", Reference: "ref", BaselineOutput: "{}", Output: "{", BaselineValue: 1, Value: 0, BaselinePass: true, Pass: false},
		{Suite: "copy", Index: 1, Metric: "exact", Cache: "int2", Baseline: "fp16", Direction: eval.FlipImproved,
			Prompt: "copy prompt", Reference: "ref", BaselineOutput: "x", Output: "y", BaselineValue: 0, Value: 1, BaselinePass: false, Pass: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Flips =\n%+v\nwant\n%+v", got, want)
	}
	// The prompt is the candidate's sample's, excerpted.
	samples[2].Prompt = long
	if got := eval.Flips(samples, "fp16")[0].Prompt; got != eval.Excerpt(long, 0) || strings.Contains(got, "MIDDLE") {
		t.Errorf("flip prompt %q, want the excerpt of the long prompt", got)
	}
	if got := eval.Flips(samples, "nothing"); len(got) != 0 {
		t.Errorf("Flips(no baseline samples) = %+v, want none", got)
	}
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		n       int
		want    string
	}{
		{"short", "hello", 2, "hello"},
		{"exactly 2n+1", "abcde", 2, "abcde"},
		{"cut", "abcdef", 2, "ab … ef"},
		{"runes", "ééééxxxxéééé", 3, "ééé … ééé"},
		{"default", strings.Repeat("α", 301) + strings.Repeat("-", 10) + strings.Repeat("ω", 301), 0, strings.Repeat("α", 300) + " … " + strings.Repeat("ω", 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eval.Excerpt(tc.s, tc.n); got != tc.want {
				t.Errorf("Excerpt(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}

// TestRunFlips: on the built-in model, Run's flips agree with its flip counts, and with
// LogSamples each flipped candidate sample is marked with the baseline's
// output and verdict, and no other sample is.
func TestRunFlips(t *testing.T) {
	// The built-in probe model: it passes copy and JSON with fp16 and
	// fails them with int2 (the tiny random model fails them all).
	m, err := runtime.Load(context.Background(), "../../datasets/models/kvq-probe", runtime.LoadOptions{})
	if err != nil {
		t.Skipf("the built-in model is not in this checkout: %v", err)
	}
	defer m.Close()
	specs := parseSpecs(t, "fp16,int2")
	so := eval.SuiteOptions{N: 4, ModelContext: m.ContextLen}
	rep, err := eval.Run(context.Background(), m, eval.Options{Specs: specs, Workers: 2, LogSamples: true,
		Suites: suites(t, []string{eval.SuiteCopy, eval.SuiteJSON}, so)})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, f := range rep.Flips {
		count[f.Suite+"/"+f.Direction]++
		if f.Cache != "int2" || f.Baseline != "fp16" || f.BaselinePass == f.Pass || (f.Direction == eval.FlipRegressed) != f.BaselinePass {
			t.Errorf("flip %+v", f)
		}
	}
	want := map[string]int{}
	for _, s := range rep.Suites {
		c := s.Caches[1]
		want[s.Name+"/"+eval.FlipRegressed] += c.PassToFail
		want[s.Name+"/"+eval.FlipImproved] += c.FailToPass
	}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if !reflect.DeepEqual(count, want) {
		t.Errorf("flips by suite and direction = %v, want %v", count, want)
	}
	if count["copy/"+eval.FlipRegressed] == 0 {
		t.Errorf("no copy item regressed under int2 on the probe model: flips %v", count)
	}
	marked := 0
	for _, s := range rep.Samples {
		if s.Flipped == "" {
			if s.Baseline != (eval.SampleBaseline{}) {
				t.Errorf("unflipped sample carries a baseline: %+v", s)
			}
			continue
		}
		marked++
		if s.Cache != "int2" || s.Baseline.Cache != "fp16" || s.Baseline.Pass == s.Pass {
			t.Errorf("flipped sample %+v", s)
		}
	}
	if marked != len(rep.Flips) {
		t.Errorf("%d samples marked flipped, %d flips", marked, len(rep.Flips))
	}
}
