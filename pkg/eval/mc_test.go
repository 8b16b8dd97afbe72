package eval_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// probeModel loads the built-in kvq-probe model from the repository
// (datasets/models/kvq-probe), closed at the end of the test.
func probeModel(t *testing.T) *runtime.Model {
	t.Helper()
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(context.Background(), filepath.Join(root, "datasets", "models", "kvq-probe"), runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestLoglikelihoodsMatchTeacherForced: a continuation's log-likelihood
// under every cache is the teacher-forced text path's summed
// log-probability of the same tokens (−tokens·ln PPL): after an empty
// context, the whole text's; after a context, the whole text's less the
// context's own (a byte-level tokenizer: the context's tokens are a prefix
// of the whole's).
func TestLoglikelihoodsMatchTeacherForced(t *testing.T) {
	m := probeModel(t)
	specs := parseSpecs(t, "fp16,int4,kivi2")
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	layouts := make([]*kvcache.Layout, len(specs))
	for i, s := range specs {
		if layouts[i], err = kvcache.NewLayout(m.Geometry(), s, 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// sumLogProb is the teacher-forced summed log-probability of text's
	// tokens after the first (BOS), per cache.
	sumLogProb := func(text string) []float64 {
		res, err := eval.TeacherForced(ctx, r, specs, []eval.Text{{Name: "t", Body: text}}, eval.TextOptions{Ctx: 512})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(res.Caches))
		for i, c := range res.Caches {
			if n := len(m.Tokenizer.Encode(text, true)) - 1; c.Tokens != n {
				t.Fatalf("teacher-forced %q scored %d tokens, want %d", text, c.Tokens, n)
			}
			out[i] = -float64(c.Tokens) * math.Log(c.PPL)
		}
		return out
	}
	const context, continuation = "Once upon a time there was a little fox.", " The fox liked to run in the green grass."
	got, err := eval.Loglikelihoods(ctx, r, layouts, []eval.MCRequest{{Context: "", Continuation: context + continuation}, {Context: context, Continuation: continuation}}, false)
	if err != nil {
		t.Fatal(err)
	}
	whole, head := sumLogProb(context+continuation), sumLogProb(context)
	for c := range specs {
		for qi, want := range []float64{whole[c], whole[c] - head[c]} {
			if g := got[qi][c]; math.Abs(g-want) > 1e-6*max(1, math.Abs(want)) || want >= 0 {
				t.Errorf("%s request %d: log-likelihood %.9f, teacher-forced %.9f", specs[c], qi, g, want)
			}
		}
	}
	// The caches differ (else the comparison shows nothing).
	if got[1][0] == got[1][1] {
		t.Errorf("fp16 and int4 give the same log-likelihood %v", got[1][0])
	}
	// Trailing whitespace of the context moves to the continuation, as
	// lm-eval's _encode_pair: the same tokens, the same score.
	moved, err := eval.Loglikelihoods(ctx, r, layouts[:1], []eval.MCRequest{{Context: context + " ", Continuation: strings.TrimPrefix(continuation, " ")}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if moved[0][0] != got[1][0] {
		t.Errorf("context %q + continuation: %v, want %v", context+" ", moved[0][0], got[1][0])
	}
}

// TestMCPrediction: acc is the argmax of the sums, acc_norm of the sums
// over the choices' lengths in characters (not bytes, and without the
// " " before them); ties go to the first.
func TestMCPrediction(t *testing.T) {
	for _, tc := range []struct {
		ll        []float64
		choices   []string
		acc, norm int
	}{
		{[]float64{-4, -6}, []string{"ab", "abcdefgh"}, 0, 1},     // -2 against -0.75
		{[]float64{-2.5, -2.4}, []string{"日本", "ab"}, 1, 1},       // by characters -1.25, -1.2 (bytes would pick 0)
		{[]float64{-3, -3.3}, []string{"日本語", "abc"}, 0, 0},       // by characters -1, -1.1 (bytes would pick 1)
		{[]float64{-1, -1, -2}, []string{"x", "y", "zz"}, 0, 0},   // ties: the first
		{[]float64{-9, -1, -2}, []string{"a", "b", "cccc"}, 1, 2}, // -9, -1, -0.5
	} {
		acc, norm := eval.MCPrediction(tc.ll, tc.choices)
		if acc != tc.acc || norm != tc.norm {
			t.Errorf("MCPrediction(%v, %q) = %d, %d; want %d, %d", tc.ll, tc.choices, acc, norm, tc.acc, tc.norm)
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readMC(t *testing.T, name, file string) []eval.MCDoc {
	t.Helper()
	p := filepath.Join("testdata", "mc", file)
	docs, err := eval.ParseMC(name, readFile(t, p), p)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestMCAdapters: each adapter maps its fixture to lm-eval's doc_to_text,
// doc_to_choice and gold.
func TestMCAdapters(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		n          int
		i          int
		want       eval.MCDoc
	}{
		{eval.MCARC, "arc.jsonl", 6, 0, eval.MCDoc{Query: "Question: A girl puts a cold spoon into hot soup. What happens to the spoon?\nAnswer:",
			Choices: []string{"It gets warmer.", "It gets colder.", "It turns to water.", "It gets lighter."}, Gold: 0}},
		{eval.MCARC, "arc.jsonl", 6, 2, eval.MCDoc{Query: "Question: What do bees carry from flower to flower?\nAnswer:",
			Choices: []string{"sand", "pollen", "rain"}, Gold: 1}},
		{eval.MCMMLU, "mmlu.jsonl", 4, 1, eval.MCDoc{Query: "How many sides does a triangle have?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer:",
			Choices: []string{"A", "B", "C", "D"}, Gold: 1, Subject: "elementary_mathematics"}},
		{eval.MCMMLU, "mmlu.jsonl", 4, 2, eval.MCDoc{Query: "Which planet is closest to the Sun?\nA. Mercury\nB. Venus\nC. Earth\nD. Mars\nAnswer:",
			Choices: []string{"A", "B", "C", "D"}, Gold: 0, Subject: "astronomy"}},
		{eval.MCHellaSwag, "hellaswag.jsonl", 3, 0, eval.MCDoc{Query: "Baking cookies: A boy puts flour and sugar in a bowl. He",
			Choices: []string{"stirs them with a spoon.", "throws the bowl at the moon.", "sings to the flour loudly.", "paints the bowl  blue."}, Gold: 0}},
		{eval.MCHellaSwag, "hellaswag.jsonl", 3, 1, eval.MCDoc{Query: "Home and Garden: How to water a plant. Fill a can with water. Then pour it slowly",
			Choices: []string{" Pour it onto the soil around the stem.", "onto the roof of the house.", "into your shoes.", " Onto the cat."}, Gold: 0}},
		{eval.MCHellaSwag, "hellaswag.jsonl", 3, 2, eval.MCDoc{Query: "Playing ball: Two kids kick a ball across a field. One kid",
			Choices: []string{"runs after it and kicks it back.", "eats the ball.", "turns into a tree."}, Gold: 0}},
		{eval.MCWinogrande, "winogrande.jsonl", 3, 1, eval.MCDoc{Query: "Anna gave her coat to Lily because _ was cold.",
			Choices: []string{"Anna gave her coat to Lily because Anna", "Anna gave her coat to Lily because Lily"}, Gold: 1, Partial: true, Target: "was cold."}},
		{eval.MCPIQA, "piqa.jsonl", 3, 2, eval.MCDoc{Query: "Question: To make a paper boat float,\nAnswer:",
			Choices: []string{"fill it with stones.", "set it gently on the water."}, Gold: 1}},
		{eval.MCGeneric, "mc.jsonl", 3, 0, eval.MCDoc{Query: "The sky on a clear day is", Choices: []string{"blue", "green", "made of cheese"}, Gold: 0}},
	} {
		docs := readMC(t, tc.name, tc.file)
		if len(docs) != tc.n {
			t.Fatalf("%s: %d items, want %d", tc.file, len(docs), tc.n)
		}
		if !reflect.DeepEqual(docs[tc.i], tc.want) {
			t.Errorf("%s item %d:\n got %#v\nwant %#v", tc.file, tc.i, docs[tc.i], tc.want)
		}
	}
	// Winogrande's requests: one context per option, the same
	// continuation.
	w := readMC(t, eval.MCWinogrande, "winogrande.jsonl")[0]
	want := []eval.MCRequest{{Context: "P: The cup did not fit in the box because the cup", Continuation: " was too big."},
		{Context: "P: The cup did not fit in the box because the box", Continuation: " was too big."}}
	if got := w.Requests("P: "); !reflect.DeepEqual(got, want) {
		t.Errorf("winogrande requests %q, want %q", got, want)
	}
	a := readMC(t, eval.MCARC, "arc.jsonl")[1]
	if got := a.Requests(""); got[1] != (eval.MCRequest{Context: a.Query, Continuation: " the roots"}) {
		t.Errorf("arc request %q", got[1])
	}
}

// TestMCSuitePrompts: the shots and prompts as lm-eval builds them.
func TestMCSuitePrompts(t *testing.T) {
	test, dev := readMC(t, eval.MCMMLU, "mmlu.jsonl"), readMC(t, eval.MCMMLU, "mmlu_dev.jsonl")
	s, err := eval.MCSuite(eval.MCOptions{Name: eval.MCMMLU, Metrics: eval.MCMetrics(eval.MCMMLU), Test: test, Shots: dev, Fewshot: 2, FirstN: true, Description: eval.MMLUDescription})
	if err != nil {
		t.Fatal(err)
	}
	want := "The following are multiple choice questions (with answers) about elementary mathematics.\n\n" +
		"What is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer: B\n\n" +
		"What is 10 - 3?\nA. 7\nB. 6\nC. 8\nD. 13\nAnswer: A\n\n" +
		"What is 7 + 5?\nA. 10\nB. 11\nC. 12\nD. 13\nAnswer:"
	if got := s.Tasks[0].Prompt; got != want {
		t.Errorf("mmlu prompt 0:\n%s\nwant\n%s", got, want)
	}
	if got := s.Tasks[2].Prompt; !strings.HasPrefix(got, "The following are multiple choice questions (with answers) about astronomy.\n\nWhat do we call a star") ||
		strings.Count(got, "Answer:") != 3 {
		t.Errorf("mmlu prompt 2 (astronomy shots):\n%s", got)
	}
	// No subject: no description, the first shots of the file.
	if got := s.Tasks[3].Prompt; !strings.HasPrefix(got, "What is 2 + 2?") || s.Tasks[3].Reference != "C" {
		t.Errorf("mmlu prompt 3 (no subject), reference %q:\n%s", s.Tasks[3].Reference, got)
	}
	if len(s.Tasks[0].Metrics) != 1 || s.Labels[eval.MetricAcc] != "mmlu acc" || s.Kind != "multiple-choice" {
		t.Errorf("mmlu rows %v %v %q", s.Tasks[0].Metrics, s.Labels, s.Kind)
	}
	if _, err := eval.MCSuite(eval.MCOptions{Name: eval.MCMMLU, Test: test, Shots: dev, Fewshot: 3, FirstN: true}); err == nil || !strings.Contains(err.Error(), `holds 2 of subject "elementary_mathematics"`) {
		t.Errorf("3 shots of a subject with 2: %v", err)
	}
	// Seeded draws: the same seed, the same prompts; each item its own.
	arc, train := readMC(t, eval.MCARC, "arc.jsonl"), readMC(t, eval.MCARC, "arc_train.jsonl")
	build := func(seed uint64) []string {
		s, err := eval.MCSuite(eval.MCOptions{Name: eval.MCARC, Test: arc, N: 5, Shots: train, Fewshot: 2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, task := range s.Tasks {
			out = append(out, task.Prompt)
		}
		return out
	}
	a, b, c := build(1), build(1), build(2)
	if len(a) != 5 || !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("seeded shots: %d prompts, seed 1 twice equal %v, seed 2 differs %v", len(a), slices.Equal(a, b), !slices.Equal(a, c))
	}
	shots := map[string]bool{}
	for _, d := range train {
		shots["Question: "+strings.TrimPrefix(d.Query, "Question: ")+" "+d.Choices[d.Gold]] = true
	}
	for i, p := range a {
		parts := strings.Split(p, "\n\n")
		if len(parts) != 3 || !shots[parts[0]] || !shots[parts[1]] || parts[0] == parts[1] || parts[2] != arc[i].Query {
			t.Errorf("arc prompt %d is not two distinct shots and the question:\n%s", i, p)
		}
	}
	// Winogrande's shot: the gold option's sentence, whole.
	wt, wtrain := readMC(t, eval.MCWinogrande, "winogrande.jsonl"), readMC(t, eval.MCWinogrande, "winogrande_train.jsonl")
	ws, err := eval.MCSuite(eval.MCOptions{Name: eval.MCWinogrande, Test: wt, Shots: wtrain[:1], Fewshot: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ws.Tasks[0].Prompt, "The ice melted in the sun because the sun was hot.\n\nThe cup did not fit in the box because the _ was too big."; got != want {
		t.Errorf("winogrande prompt %q, want %q", got, want)
	}
}

// TestRunMC runs a multiple-choice suite on the built-in model: the rows
// acc and acc_norm over every cache, an identical second baseline agrees
// exactly, and every sample's verdict is the prediction from the
// log-likelihoods Loglikelihoods gives for the same requests.
func TestRunMC(t *testing.T) {
	m := probeModel(t)
	specs := parseSpecs(t, "fp16,fp16,int2")
	docs := readMC(t, eval.MCARC, "arc.jsonl")
	s, err := eval.MCSuite(eval.MCOptions{Name: eval.MCARC, Test: docs, N: 4})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eval.Run(context.Background(), m, eval.Options{Specs: specs, Suites: []eval.Suite{s}, Workers: 2, LogSamples: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Suites) != 2 || rep.Suites[0].Name != "arc acc" || rep.Suites[1].Name != "arc acc_norm" {
		t.Fatalf("rows %+v", rep.Suites)
	}
	for _, row := range rep.Suites {
		if row.N != 4 || len(row.Caches) != 3 || row.Kind != "multiple-choice" {
			t.Errorf("row %+v", row)
		}
		if c := row.Caches[1]; c.Score != row.Caches[0].Score || c.PassToFail+c.FailToPass != 0 {
			t.Errorf("%s: the second fp16 %+v differs from the baseline", row.Name, c)
		}
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := kvcache.NewLayout(m.Geometry(), specs[2], 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, smp := range rep.Samples {
		if smp.Cache != specs[2].String() {
			continue
		}
		d := docs[smp.Index]
		ll, err := eval.Loglikelihoods(context.Background(), r, []*kvcache.Layout{l}, d.Requests(""), false)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(ll))
		for i := range ll {
			v[i] = ll[i][0]
		}
		acc, norm := eval.MCPrediction(v, d.Choices)
		pick := acc
		if smp.Metric == "acc_norm" {
			pick = norm
		}
		if smp.Pass != (pick == d.Gold) || !strings.HasPrefix(smp.Output, "acc: ") || smp.Reference != d.Choices[d.Gold] {
			t.Errorf("sample %+v: pick %d, gold %d", smp, pick, d.Gold)
		}
		checked++
	}
	if checked != 8 {
		t.Errorf("%d int2 samples, want 4 items × 2 metrics", checked)
	}
}

// TestRunMCStore: a run kept in a store resumes from the log-likelihoods
// it holds: with the stored values overwritten by ties (every cache then
// picks the first choice), the resumed run reports what they say.
func TestRunMCStore(t *testing.T) {
	m := probeModel(t)
	specs := parseSpecs(t, "fp16,int2")
	s, err := eval.MCSuite(eval.MCOptions{Name: eval.MCPIQA, Test: readMC(t, eval.MCPIQA, "piqa.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func() *eval.Report {
		st, err := eval.OpenStore(dir, "mc", nil, false)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rep, err := eval.Run(context.Background(), m, eval.Options{Specs: specs, Suites: []eval.Suite{s}, Workers: 1, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	run()
	items := filepath.Join(dir, "items.jsonl")
	b := readFile(t, items)
	re := regexp.MustCompile(`"loglik":\[[^\]]*\]`)
	if n := len(re.FindAll(b, -1)); n != 3*2 {
		t.Fatalf("items.jsonl holds %d log-likelihood lists, want 3 items × 2 caches:\n%s", n, b)
	}
	if err := os.WriteFile(items, re.ReplaceAll(b, []byte(`"loglik":[-1,-1]`)), 0o644); err != nil {
		t.Fatal(err)
	}
	// piqa.jsonl's golds are 0, 0, 1: ties pass two items of three by
	// acc (the first choice); acc_norm picks the longer solution each
	// time, which is the gold one once.
	for _, row := range run().Suites {
		want := 200.0 / 3
		if row.Metric == "acc_norm" {
			want = 100.0 / 3
		}
		for _, c := range row.Caches {
			if math.Abs(c.Score-want) > 1e-9 {
				t.Errorf("%s %s: %v after resuming from ties, want %.1f", row.Name, c.Cache, c.Score, want)
			}
		}
	}
}

// TestMCNotOnEndpoints: servers give no log-likelihoods to kvq: a
// multiple-choice suite is refused before any request.
func TestMCNotOnEndpoints(t *testing.T) {
	m := probeModel(t)
	s, err := eval.MCSuite(eval.MCOptions{Name: eval.MCGeneric, Test: readMC(t, eval.MCGeneric, "mc.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eval.RunEndpoints(context.Background(), m, eval.EndpointOptions{Names: []string{"a", "b"}, Deployments: []eval.Deployment{nil, nil}, Suites: []eval.Suite{s}})
	if !errors.Is(err, eval.ErrOptions) || !strings.Contains(err.Error(), "not with --endpoint") {
		t.Errorf("RunEndpoints(multiple choice) = %v, want ErrOptions", err)
	}
}

// TestLoglikelihoodsTruncate: a context longer than the model's is cut
// from the left, as lm-eval does: the score is the same as with the
// context's tail alone; a continuation longer than the context is an
// error.
func TestLoglikelihoodsTruncate(t *testing.T) {
	m := probeModel(t)
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := kvcache.NewLayout(m.Geometry(), parseSpecs(t, "fp16")[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("The fox ran. ", 400) + "The fox" // byte-level: 5207 tokens with BOS
	got, err := eval.Loglikelihoods(context.Background(), r, []*kvcache.Layout{l}, []eval.MCRequest{{Context: long, Continuation: " ran."}}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The input is the last ContextLen tokens of whole[:-1]: with a
	// byte-level tokenizer, the text's last ContextLen bytes (no BOS).
	whole := long + " ran."
	tail := whole[len(whole)-1-m.ContextLen : len(whole)-1]
	logits, err := func() ([]float32, error) {
		c, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(m.ContextLen)})
		if err != nil {
			return nil, err
		}
		_ = c.AddSeq(0)
		out, err := r.Forward(context.Background(), []runtime.Entry{{Cache: c, Seq: 0, Tokens: m.Tokenizer.Encode(tail, false), Logits: runtime.AllLogits}})
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	cont := m.Tokenizer.Encode(" ran.", false)
	V := m.Vocab
	var want float64
	for k, id := range cont {
		row := logits[(m.ContextLen-len(cont)+k)*V : (m.ContextLen-len(cont)+k+1)*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = max(mx, float64(v))
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		want += float64(row[id]) - mx - math.Log(sum)
	}
	if math.Abs(got[0][0]-want) > 1e-6 {
		t.Errorf("truncated context: %v, want %v", got[0][0], want)
	}
	_, err = eval.Loglikelihoods(context.Background(), r, []*kvcache.Layout{l}, []eval.MCRequest{{Context: "x", Continuation: strings.Repeat("a", m.ContextLen+5)}}, false)
	if !errors.Is(err, eval.ErrOptions) {
		t.Errorf("a continuation longer than the context: %v, want ErrOptions", err)
	}
}
