package eval_test

import (
	"context"
	"errors"
	"math"
	"os"
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
func tinyModel(t testing.TB, specs string) (*runtime.Model, []quant.Spec) {
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
	return m, parseSpecs(t, specs)
}

func parseSpecs(t testing.TB, specs string) []quant.Spec {
	t.Helper()
	ss, err := quant.Formats().ParseList(specs)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func suites(t *testing.T, names []string, o eval.SuiteOptions) []eval.Suite {
	t.Helper()
	s, err := eval.BuildSuites(context.Background(), names, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const storyText = "Once upon a time there was a little fox. The fox liked to run in the green grass and play with the birds. One day it found a red ball. "

// TestRunTable runs every built-in suite and the text metrics on a tiny
// random model: the scores mean nothing, but every row must cover every
// cache with rates in [0, 100], and two identical caches must agree
// exactly (the second fp32 has KLD 0, no flips, the same score).
func TestRunTable(t *testing.T) {
	m, specs := tinyModel(t, "fp32,fp32,int2")
	calls := map[string]int{}
	opts := eval.Options{Specs: specs, Texts: []eval.Text{{Name: "s", Body: strings.Repeat(storyText, 6)}},
		TextOpts: eval.TextOptions{Ctx: 256},
		Suites:   suites(t, eval.BuiltinSuites(), eval.SuiteOptions{N: 2, PasskeyContexts: []int{256}, GridContexts: []int{128, 256}, GridDepths: 2, GridN: 1, ModelContext: m.ContextLen}),
		Progress: func(stage string, done, total int) { calls[stage]++ }, LogSamples: true, Speed: true, SpeedDepth: 64, SpeedTokens: 4, SpeedRounds: 2,
		Gates: eval.DefaultGates()}
	rep, err := eval.Run(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"passkey 256", "multi-key", "copy", "json exact", "json valid", "refusal (forbidden)", "false refusal (benign)",
		"false refusal (unlisted)", "long-context passkey", "multi-hop", "citation answer", "citation source", "tool call"}
	var got []string
	for _, s := range rep.Suites {
		got = append(got, s.Name)
		if len(s.Caches) != 3 {
			t.Fatalf("%s: %d caches", s.Name, len(s.Caches))
		}
		for _, c := range s.Caches {
			if c.Score < 0 || c.Score > 100 || math.IsNaN(c.Score) {
				t.Errorf("%s %s: score %v", s.Name, c.Cache, c.Score)
			}
		}
		if a, b := s.Caches[0], s.Caches[1]; a.Score != b.Score || b.PassToFail+b.FailToPass != 0 || b.Diff != 0 {
			t.Errorf("%s: two fp32 caches differ: %+v vs %+v", s.Name, a, b)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rows\n%v\nwant\n%v", got, want)
	}
	if rep.Text == nil || len(rep.Text.Caches) != 3 {
		t.Fatalf("text metrics: %+v", rep.Text)
	}
	same, low := rep.Text.Caches[1], rep.Text.Caches[2]
	if same.KLD.Mean != 0 || same.SameTop != 1 || same.LnPPLRatio != 0 || same.PPL != rep.Text.Caches[0].PPL {
		t.Errorf("an identical cache: %+v, want KLD 0, same top 1, the baseline's PPL", same)
	}
	if !(low.KLD.Mean > 0) || low.PPL == rep.Text.Caches[0].PPL {
		t.Errorf("int2: KLD %v, PPL %v: quantization not applied?", low.KLD.Mean, low.PPL)
	}
	if rep.Grid == nil || len(rep.Grid.Contexts) != 2 || len(rep.Grid.Depths) != 2 || len(rep.Grid.Caches) != 3 {
		t.Fatalf("grid: %+v", rep.Grid)
	}
	if len(rep.Speed) != 3 || rep.Speed[0].Relative != 1 {
		t.Errorf("speed: %+v", rep.Speed)
	}
	if calls["tasks"] == 0 || calls["text"] == 0 || calls["speed"] == 0 {
		t.Errorf("progress calls %v", calls)
	}
	if len(rep.Samples) == 0 || len(rep.Verdicts) != 2 || len(rep.Caches) != 3 || rep.Caches[2].Compression <= 1 {
		t.Errorf("samples %d, verdicts %+v, caches %+v", len(rep.Samples), rep.Verdicts, rep.Caches)
	}
}

// TestWorkersAgree runs fp8:dynamic (whose scales are learned from the
// first batch a cache sees) with 1 and 4 workers, and with one suite alone:
// every sample must be identical, which holds only if each cache learns
// from its own data, not from whichever item ran first.
func TestWorkersAgree(t *testing.T) {
	const list = "fp16,fp8:dynamic,fp8:dynamic:head"
	m, _ := tinyModel(t, list)
	so := eval.SuiteOptions{N: 3, PasskeyContexts: []int{256}, ModelContext: m.ContextLen}
	run := func(workers int, names ...string) *eval.Report {
		// Each run parses its specs, as the CLI does: a format value
		// carries learned state across runs only if caches share it.
		rep, err := eval.Run(context.Background(), m, eval.Options{Specs: parseSpecs(t, list), Workers: workers, LogSamples: true,
			Suites: suites(t, names, so)})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	all := []string{eval.SuitePasskey, eval.SuiteMultiKey, eval.SuiteCopy, eval.SuiteJSON}
	a, b := run(1, all...), run(4, all...)
	for i := range a.Samples {
		if a.Samples[i] != b.Samples[i] {
			t.Fatalf("sample %d: 1 worker %+v, 4 workers %+v", i, a.Samples[i], b.Samples[i])
		}
	}
	alone := run(1, eval.SuiteCopy)
	var fromAll []eval.Sample
	for _, s := range a.Samples {
		if s.Suite == "copy" {
			fromAll = append(fromAll, s)
		}
	}
	for i, s := range alone.Samples {
		if s != fromAll[i] {
			t.Fatalf("copy sample %d alone %+v, after the other suites %+v", i, s, fromAll[i])
		}
	}
}

// TestBuildSuitesErrors: an unknown suite and a passkey context beyond the
// model's are refused before any work.
func TestBuildSuitesErrors(t *testing.T) {
	if _, err := eval.BuildSuites(context.Background(), []string{"bogus"}, eval.SuiteOptions{}); !errors.Is(err, eval.ErrOptions) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown suite: %v", err)
	}
	if _, err := eval.BuildSuites(context.Background(), []string{eval.SuitePasskey}, eval.SuiteOptions{PasskeyContexts: []int{4097}, ModelContext: 4096}); !errors.Is(err, eval.ErrOptions) {
		t.Errorf("passkey context past the model's: %v", err)
	}
}

// TestLlamaCppChunks checks the llama.cpp protocol's chunking on a small
// text: chunks of ctx tokens from one token stream, each chunk's first token
// replaced by BOS, only positions ctx/2 … ctx−2 scored.
func TestLlamaCppChunks(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int8")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat(storyText, 4)
	n := len(m.Tokenizer.Encode(text, true))
	const ctx = 64
	res, err := eval.TeacherForced(context.Background(), r, specs, []eval.Text{{Body: text}}, eval.TextOptions{Protocol: eval.ProtocolLlamaCpp, Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	chunks := n / ctx
	if res.Chunks != chunks || res.Caches[0].Tokens != chunks*(ctx-1-ctx/2) {
		t.Errorf("%d tokens in chunks of %d: %d chunks, %d positions; want %d, %d", n, ctx, res.Chunks, res.Caches[0].Tokens, chunks, chunks*(ctx-1-ctx/2))
	}
	for _, b := range res.Caches[1].ByPosition {
		if b.From < ctx/2-ctx/2%64 && b.Tokens > 0 && b.To <= ctx/2 {
			t.Errorf("positions [%d, %d) scored in the first half of a chunk", b.From, b.To)
		}
	}
	// The kvq protocol scores every position after the first of each
	// text chunk.
	kv, err := eval.TeacherForced(context.Background(), r, specs, []eval.Text{{Body: text}}, eval.TextOptions{Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	if kv.Caches[0].Tokens < n-kv.Chunks-1 {
		t.Errorf("kvq protocol: %d positions of %d tokens in %d chunks", kv.Caches[0].Tokens, n, kv.Chunks)
	}
	if _, err := eval.TeacherForced(context.Background(), r, specs, []eval.Text{{Body: "too short"}}, eval.TextOptions{Protocol: eval.ProtocolLlamaCpp, Ctx: ctx}); !errors.Is(err, eval.ErrOptions) {
		t.Errorf("a text shorter than 2·ctx: %v, want ErrOptions", err)
	}
}

// TestResume runs a suite into a store, then again: the second run scores
// nothing anew and reports the same; a different configuration is refused
// without force.
func TestResume(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int4")
	dir := t.TempDir()
	so := eval.SuiteOptions{N: 3, PasskeyContexts: []int{256}, ModelContext: m.ContextLen}
	run := func(hash string) (*eval.Report, int) {
		st, err := eval.OpenStore(dir, hash, map[string]string{"x": hash}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		before := st.Items() + st.Chunks()
		rep, err := eval.Run(context.Background(), m, eval.Options{Specs: specs, Store: st, LogSamples: true,
			Texts: []eval.Text{{Body: strings.Repeat(storyText, 4)}}, TextOpts: eval.TextOptions{Ctx: 64},
			Suites: suites(t, []string{eval.SuiteCopy, eval.SuiteJSON}, so)})
		if err != nil {
			t.Fatal(err)
		}
		return rep, before
	}
	first, n0 := run("a")
	second, n1 := run("a")
	if n0 != 0 || n1 == 0 {
		t.Errorf("the store held %d records before the first run and %d before the second", n0, n1)
	}
	for i := range first.Samples {
		if first.Samples[i] != second.Samples[i] {
			t.Fatalf("resumed sample %d differs: %+v vs %+v", i, first.Samples[i], second.Samples[i])
		}
	}
	if first.Text.Caches[1].KLD != second.Text.Caches[1].KLD {
		t.Errorf("resumed text metrics differ")
	}
	if _, err := eval.OpenStore(dir, "b", nil, false); !errors.Is(err, eval.ErrStore) {
		t.Errorf("another configuration: %v, want ErrStore", err)
	}
	// A partial last line (a crash mid-write) is dropped.
	f, err := os.OpenFile(filepath.Join(dir, "items.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"kind":"item","key":"copy#9","outp`)
	f.Close()
	st, err := eval.OpenStore(dir, "a", nil, false)
	if err != nil {
		t.Fatalf("a partial last line: %v", err)
	}
	if st.Item("copy#9") != nil {
		t.Error("the partial record was read")
	}
	st.Close()
	if st, err := eval.OpenStore(dir, "b", nil, true); err != nil || st.Items() != 0 {
		t.Errorf("--force: %v, %d items left", err, st.Items())
	} else {
		st.Close()
	}
}

// TestCancelled stops a run and checks that what was scored is kept.
func TestCancelled(t *testing.T) {
	m, specs := tinyModel(t, "fp16,int4")
	dir := t.TempDir()
	st, err := eval.OpenStore(dir, "h", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = eval.Run(ctx, m, eval.Options{Specs: specs, Store: st, Workers: 1,
		Suites: suites(t, []string{eval.SuiteCopy}, eval.SuiteOptions{N: 6, ModelContext: m.ContextLen}),
		Progress: func(stage string, done, total int) {
			if done == 2 {
				cancel()
			}
		}})
	st.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	st, err = eval.OpenStore(dir, "h", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Items() < 2 {
		t.Errorf("%d items kept after a cancel at the second", st.Items())
	}
}

// TestRecommendation: the smallest candidate that passes every gate, and
// never one larger than the baseline.
func TestRecommendation(t *testing.T) {
	m, _ := tinyModel(t, "fp16")
	loose := 10.0
	run := func(list string) *eval.Report {
		rep, err := eval.Run(context.Background(), m, eval.Options{Specs: parseSpecs(t, list), Texts: []eval.Text{{Body: strings.Repeat(storyText, 3)}},
			TextOpts: eval.TextOptions{Ctx: 64}, Gates: []eval.Gate{{Metric: eval.GateKLD, Max: &loose}}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rc := run("fp32,fp16,int4").Recommendation; rc == nil || rc.Cache != "int4" || !(rc.Saving > 0.8) {
		t.Errorf("recommendation %+v, want int4 saving over 80%%", rc)
	}
	if rc := run("fp16,fp32").Recommendation; rc != nil {
		t.Errorf("a candidate larger than the baseline was recommended: %+v", rc)
	}
	strict := 0.0
	rep, err := eval.Run(context.Background(), m, eval.Options{Specs: parseSpecs(t, "fp16,int2"), Texts: []eval.Text{{Body: strings.Repeat(storyText, 3)}},
		TextOpts: eval.TextOptions{Ctx: 64}, Gates: []eval.Gate{{Metric: eval.GateKLD, Max: &strict}, {Metric: eval.GateDrop, Suite: "*", Max: &strict}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommendation != nil || len(rep.Verdicts) != 1 || rep.Verdicts[0].Pass || len(rep.Verdicts[0].Failed) != 2 {
		t.Errorf("failing gates: recommendation %+v, verdicts %+v (the drop gate has no suite to measure: it fails as not measured)", rep.Recommendation, rep.Verdicts)
	}
}
