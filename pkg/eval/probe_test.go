package eval_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// tinyModel loads a tiny random Llama (closed at the end of the test) and
// parses specs.
func tinyModel(t *testing.T, specs string) (*runtime.Model, []quant.Spec) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 2, Context: 4096}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ss, err := quant.Formats().ParseList(specs)
	if err != nil {
		t.Fatal(err)
	}
	return m, ss
}

// TestRunProbeTable runs the probe suites on a tiny random model: the scores
// mean nothing, but the table must have every ability for every spec, rates
// in [0, 100], and identical caches must score identically.
func TestRunProbeTable(t *testing.T) {
	m, specs := tinyModel(t, "fp32,fp32,int2")
	calls := 0
	res, err := eval.RunProbe(context.Background(), m, eval.ProbeOptions{N: 2, PasskeyContexts: []int{256}, Specs: specs, Progress: func(done, total int) { calls++ }, LogSamples: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"passkey 256", "multi-key", "copy", "json exact", "json valid", "refusal (forbidden)", "false refusal (benign)", "false refusal (unlisted)", "story perplexity"}
	if len(res.Abilities) != len(want) {
		t.Fatalf("abilities = %+v", res.Abilities)
	}
	for i, a := range res.Abilities {
		if a.Name != want[i] || len(a.Values) != 3 || a.N != 2 {
			t.Errorf("ability %d = %+v, want %s over 3 specs", i, a, want[i])
		}
		for _, v := range a.Values {
			if a.Unit == "%" && (v < 0 || v > 100) || a.Unit == "ppl" && !(v > 1) {
				t.Errorf("%s: value %v out of range", a.Name, v)
			}
		}
		if a.Unit == "%" {
			// N = 2: a rate of 50% has standard error 100·sqrt(0.25/1) = 50.
			for s, v := range a.Values {
				want := 0.0
				if v == 50 {
					want = 50
				}
				if len(a.Stderr) != 3 || math.Abs(a.Stderr[s]-want) > 1e-9 {
					t.Errorf("%s: stderr %v for values %v", a.Name, a.Stderr, a.Values)
				}
			}
		} else if a.Stderr != nil {
			t.Errorf("%s: stderr on a perplexity row", a.Name)
		}
		if a.Values[0] != a.Values[1] {
			t.Errorf("%s: two fp32 caches score %v and %v", a.Name, a.Values[0], a.Values[1])
		}
	}
	if calls != 8*2*3 { // 8 suites (json scores two rows) × N × specs
		t.Errorf("progress called %d times, want %d", calls, 8*2*3)
	}
	if len(res.Samples) != 8*2*3 {
		t.Fatalf("%d samples, want %d", len(res.Samples), 8*2*3)
	}
	for k, sm := range res.Samples {
		if sm.Cache != res.Specs[k%3] || sm.Index != k/3%2 || sm.Target == "" {
			t.Errorf("sample %d: %+v", k, sm)
		}
		if sm.Ability == "story perplexity" && (sm.Tokens == 0 || !(sm.NLL > 0)) {
			t.Errorf("perplexity sample %d without a likelihood: %+v", k, sm)
		}
	}
	if ppl, _ := res.Row("story perplexity"); ppl.Values[2] == ppl.Values[0] {
		t.Error("int2 cache gives exactly fp32's perplexity: quantization not applied?")
	}
}

// TestRunProbeTasks: Tasks limits the run to some suites, with the examples
// of a full run, and rejects an unknown task.
func TestRunProbeTasks(t *testing.T) {
	m, specs := tinyModel(t, "fp32")
	opts := eval.ProbeOptions{N: 3, PasskeyContexts: []int{256}, Specs: specs, LogSamples: true}
	full, err := eval.RunProbe(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Tasks = []string{"copy", "json"}
	part, err := eval.RunProbe(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range part.Abilities {
		names = append(names, a.Name)
	}
	if len(names) != 3 || names[0] != "copy" || names[1] != "json exact" || names[2] != "json valid" {
		t.Errorf("abilities %v, want copy, json exact, json valid", names)
	}
	var want []eval.Sample
	for _, s := range full.Samples {
		if s.Ability == "copy" || s.Ability == "json" {
			want = append(want, s)
		}
	}
	if len(part.Samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(part.Samples), len(want))
	}
	for i := range want {
		if part.Samples[i].Prompt != want[i].Prompt || part.Samples[i].Output != want[i].Output {
			t.Errorf("sample %d differs from the full run's", i)
		}
	}
	opts.Tasks = []string{"bogus"}
	if _, err := eval.RunProbe(context.Background(), m, opts); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown task: %v", err)
	}
}

// TestProbeWorkersAgree runs fp8:dynamic (whose scales are learned from the
// first batch a cache sees) with 1 and 4 workers, and with only the story
// task: every sample's output and likelihood must be identical, which holds
// only if each cache learns from its own data, not from whichever example
// ran first. A context beyond the model's is refused.
func TestProbeWorkersAgree(t *testing.T) {
	const list = "fp16,fp8:dynamic,fp8:dynamic:head"
	m, _ := tinyModel(t, list)
	opts := eval.ProbeOptions{N: 3, PasskeyContexts: []int{256}, LogSamples: true}
	// Each run parses its specs, as the CLI does: a format value carries its
	// learned state across runs only if caches share it.
	parse := func() []quant.Spec {
		ss, err := quant.Formats().ParseList(list)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	var runs []*eval.ProbeResult
	for _, w := range []int{1, 4} {
		opts.Workers, opts.Specs = w, parse()
		res, err := eval.RunProbe(context.Background(), m, opts)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res)
	}
	for i, a := range runs[0].Samples {
		b := runs[1].Samples[i]
		if a.Output != b.Output || a.NLL != b.NLL || a.Correct != b.Correct {
			t.Fatalf("sample %d (%s %d, %s): 1 worker %q nll %v, 4 workers %q nll %v", i, a.Ability, a.Index, a.Cache, a.Output, a.NLL, b.Output, b.NLL)
		}
	}
	opts.Workers, opts.Tasks, opts.Specs = 1, []string{"story"}, parse()
	story, err := eval.RunProbe(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	var full []eval.Sample
	for _, s := range runs[0].Samples {
		if s.Ability == "story perplexity" {
			full = append(full, s)
		}
	}
	for i, a := range story.Samples {
		if b := full[i]; a.NLL != b.NLL {
			t.Fatalf("story sample %d (%s): nll %v alone, %v after the other tasks", a.Index, a.Cache, a.NLL, b.NLL)
		}
	}
	opts.Tasks = nil
	opts.PasskeyContexts = []int{m.ContextLen + 1}
	if _, err := eval.RunProbe(context.Background(), m, opts); !errors.Is(err, eval.ErrOptions) {
		t.Errorf("passkey context past the model's: %v, want ErrOptions", err)
	}
}
